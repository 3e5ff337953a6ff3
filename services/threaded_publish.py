"""Publishing through a queue library whose client is blocking (Celery's kombu,
Dramatiq's redis-py), from the API's event loop.

The publish runs in threads of its own, never on the loop: made on the loop (as
a plain FastAPI app makes it) it was cheaper per request, but 100 users each
blocking the loop for a publish under a 0.2-CPU limit held it for over a second
at a time; the API's own Redis timeouts then fired before the loop could read
the replies (503s with Redis up), and every other request, /healthz included,
waited as long.

An outage must not fill those threads with publishes that each wait a socket
timeout: a publish that fails marks the broker down, and while it is down each
publish first asks Redis, with an async PING bounded by REDIS_TIMEOUT_S,
whether it answers again; if not, the request gets its 503 without touching
the library. A publish is awaited to its end: one given up on half-way may
still reach the broker, and the ledger counts what the broker took."""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from services.redis_clients import async_client
from services.settings import Settings


class ThreadedPublisher:
    def __init__(self, settings: Settings, threads: int, name: str, *, start_down: bool = False):
        """start_down: ask Redis before the first publish (kombu's first connect
        retries for seconds). Otherwise the first publishes go straight to the
        library: a burst of 100 first requests each waiting on a PING under a
        0.2-CPU limit let some of those PINGs' timers fire before the loop read
        the replies (7 of 5000 Dramatiq requests got a 503 with Redis up)."""
        self.settings = settings
        self.redis = async_client(settings)
        self.threads = ThreadPoolExecutor(threads, thread_name_prefix=f"{name}-publish")
        self.down = start_down

    async def publish(self, send: Callable[[], object]) -> None:
        if self.down:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                await self.redis.ping()  # raises while Redis is away: a 503, and the loop never waited
            self.down = False
        try:
            await asyncio.get_running_loop().run_in_executor(self.threads, send)
        except Exception:
            self.down = True
            raise

    async def close(self) -> None:
        self.threads.shutdown(wait=False)
        await self.redis.aclose()
