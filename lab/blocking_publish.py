"""Publishing through a queue library whose client is blocking (Celery's kombu,
Dramatiq's, RQ's and Huey's redis-py), from the API's event loop.

BLOCKING_PUBLISH=inline (the default) makes the call on the loop, as a plain
FastAPI app does: each publish holds the loop for its round trip to Redis.
Under a 0.2-CPU limit and 50-100 connections that adds up to loop turns longer
than REDIS_TIMEOUT_S; the lab's asyncio Redis clients tolerate such turns
(lab/redis_clients.TimelyConnection), so a late loop is not taken for a
dead Redis. BLOCKING_PUBLISH=threads runs the call in threads of their own
instead: the loop never waits on the library, but every publish pays a thread
hop and the GIL handover back and forth, which costs the API a large share of
its requests per second (docs/hot-path.md).

An outage must not cost a socket timeout per publish: a publish that fails
marks the broker down, and while it is down each publish first asks the
broker (Redis: an async PING; RabbitMQ: a connection, each bounded by
REDIS_TIMEOUT_S) whether it answers again; if
not, the request gets its 503 without touching the library. Inline, at most
one publish holds the loop for a timeout per outage: the check and the call
are one step, and the next request finds the broker marked down. A publish is
carried to its end: one given up on half-way may still reach the broker, and
the ledger counts what the broker took."""

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from lab.redis_clients import async_client
from lab.settings import Settings

# Asks the broker whether it answers: returns, or raises within REDIS_TIMEOUT_S.
Probe = Callable[[], Awaitable[object]]


class BlockingPublisher:
    def __init__(
        self, settings: Settings, threads: int, name: str, *, start_down: bool = False, probe: Probe | None = None
    ):
        """threads: the pool's size when BLOCKING_PUBLISH=threads.
        start_down: ask the broker before the first publish (kombu's first connect
        retries for seconds, which inline would hold the loop for).
        probe: how to ask a broker that is not Redis."""
        self.settings = settings
        self.redis = async_client(settings)
        self.probe: Probe = probe or self.redis.ping
        self.threads = (
            ThreadPoolExecutor(threads, thread_name_prefix=f"{name}-publish")
            if settings.blocking_publish == "threads"
            else None
        )
        self.down = start_down

    async def publish(self, send: Callable[[], object]) -> None:
        if self.down:
            # Raises while the broker is away (the client's socket timeouts
            # bound it): a 503, and the library was never called.
            await self.probe()
            self.down = False
        try:
            if self.threads is None:
                send()
            else:
                await asyncio.get_running_loop().run_in_executor(self.threads, send)
        except Exception:
            self.down = True
            raise

    async def close(self) -> None:
        if self.threads is not None:
            self.threads.shutdown(wait=False)
        await self.redis.aclose()
