"""Redis clients with short timeouts: an outage must fail fast, never hang."""

import redis
import redis.asyncio as aioredis

from services.settings import Settings


# What a client raises when Redis cannot be reached or does not answer in time
# (as opposed to Redis answering with an error).
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _options(settings: Settings) -> dict:
    return {
        "socket_timeout": settings.redis_timeout_s,
        "socket_connect_timeout": settings.redis_timeout_s,
        "health_check_interval": 10,
    }


def async_client(settings: Settings) -> aioredis.Redis:
    return aioredis.Redis.from_url(settings.redis_url, **_options(settings))


def sync_client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url, **_options(settings))
