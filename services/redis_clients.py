"""Redis clients with short timeouts: an outage must fail fast, never hang."""

import asyncio

import redis
import redis.asyncio as aioredis

from services.settings import Settings


# What a client raises when Redis cannot be reached or does not answer in time
# (as opposed to Redis answering with an error).
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class TimelyConnection(aioredis.Connection):
    """redis-py's connection, with timeouts that a slow event loop does not trip.

    Sends: redis-py bounds every send with `asyncio.wait_for`, which on Python
    3.11 starts a task per command: ≈45 µs of a 0.2-CPU process per Redis call,
    paid by every request and every task. `asyncio.timeout` bounds the same
    send with a timer.

    Reads: redis-py cancels a read when socket_timeout has passed, even when
    the reply is already in the buffer. Under 0.2 CPU one event-loop turn can
    last longer than REDIS_TIMEOUT_S; a reply that arrived in time then meets
    its expired timer in the same turn, and the read is cancelled: a command
    Redis carried out is reported as a timeout (a 503 for a task that was
    enqueued, or a task left unsettled), and the connection is dropped. Here,
    an expired read gives up only if, one loop turn later, nothing has arrived;
    a Redis that takes the command and never answers still fails in about
    socket_timeout."""

    async def send_packed_command(self, command, check_health: bool = True) -> None:
        timeout = self.socket_timeout
        if not timeout:
            return await super().send_packed_command(command, check_health)
        if not self.is_connected:
            await self.connect()
        elif check_health:
            await self.check_health()  # a PING whose reply is read under the timeout
        self.socket_timeout = None  # super() sends without wait_for; our timer bounds it
        try:
            async with asyncio.timeout(timeout):
                await super().send_packed_command(command, check_health=False)
        except TimeoutError:
            raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
        finally:
            self.socket_timeout = timeout

    async def read_response(self, disable_decoding: bool = False, timeout: float | None = None, *,
                            disconnect_on_error: bool = True, push_request: bool | None = False):
        read_timeout = self.socket_timeout
        if timeout is not None or not read_timeout:  # a caller's own timeout returns None: left to redis-py
            return await super().read_response(disable_decoding, timeout, disconnect_on_error=disconnect_on_error,
                                               push_request=push_request)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        gave_up = False

        def expired() -> None:
            nonlocal timer
            timer = loop.call_soon(look_again)  # after the next poll of the sockets

        def look_again() -> None:
            nonlocal timer, gave_up
            if self._reader is not None and self._reader._buffer:  # the reply is here; the loop was late
                timer = loop.call_later(read_timeout, expired)
            else:
                gave_up = True
                task.cancel()

        timer = loop.call_later(read_timeout, expired)
        self.socket_timeout = None  # super() reads unbounded; the timer above bounds it
        try:
            return await super().read_response(disable_decoding, disconnect_on_error=disconnect_on_error,
                                               push_request=push_request)
        except asyncio.CancelledError:
            if gave_up and task.uncancel() == 0:  # our cancel, not the caller's; super() has disconnected
                raise redis.exceptions.TimeoutError(f"Timeout reading from {self._host_error()}") from None
            raise
        finally:
            timer.cancel()
            self.socket_timeout = read_timeout


def _options(settings: Settings) -> dict:
    return {
        "socket_timeout": settings.redis_timeout_s,
        "socket_connect_timeout": settings.redis_timeout_s,
        "health_check_interval": 10,
    }


def async_options(settings: Settings) -> dict:
    """What an asyncio client of the lab is created with (also for the queue
    libraries' own clients in the API, which take the same keywords)."""
    return {**_options(settings), "connection_class": TimelyConnection}


def async_client(settings: Settings) -> aioredis.Redis:
    return aioredis.Redis.from_url(settings.redis_url, **async_options(settings))


def sync_client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url, **_options(settings))
