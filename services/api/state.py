"""LabState: what the API's routes need, created once per API process (in the
app's lifespan) and read by the handlers through services/api/deps.py."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial

import httpx

from lab.heap import freeze_startup_heap
from lab.ledger import Ledger
from lab.metrics import flush
from lab.protocol import Producer, Queue, TaskMessage
from lab.queues import adapter
from lab.redis_clients import async_client
from lab.runner import TaskRunner
from lab.settings import Settings
from services.api.background import BackgroundQueue
from services.api.outbox import Outbox

log = logging.getLogger("lab.api")
# ENQUEUE_MODE=after-response: tasks published at once, at most (a publish is a
# Redis round trip or two: a few are enough to keep up with what a CPU limit
# lets the API answer).
AFTER_RESPONSE_PUBLISHERS = 16


def upstream_clients(settings: Settings) -> tuple[httpx.Client, httpx.AsyncClient]:
    """The event-loop experiments' clients of the upstream API (routes/upstream.py)."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    timeout = httpx.Timeout(settings.upstream_timeout_s)
    return httpx.Client(limits=limits, timeout=timeout), httpx.AsyncClient(limits=limits, timeout=timeout)


class LabState:
    """The settings, the Redis client, the ledger, the queues' producers, the
    `background` queue, the outbox and the upstream clients of one API process.
    `publish`: what the outbox's publishers call with this state and a message
    (services/api/enqueue.py's publish_after_response, which app.py hands in)."""

    def __init__(self, settings: Settings, publish: Callable[["LabState", TaskMessage], Awaitable[None]]):
        self.settings = settings
        self.redis = async_client(settings)
        self.ledger = Ledger(self.redis)
        self.background = BackgroundQueue(TaskRunner(settings))
        self.outbox = Outbox(partial(publish, self), AFTER_RESPONSE_PUBLISHERS)
        self.upstream_sync, self.upstream_async = upstream_clients(settings)
        self.producers: dict[Queue, Producer] = {}
        self._lock = asyncio.Lock()

    async def producer(self, queue: Queue) -> Producer:
        """The queue's producer, connected on first use, so the API starts (and
        reports not-ready) even while Redis is down. Its library is imported
        then, in a thread: an import takes a moment the event loop would
        otherwise stand still for."""
        if queue not in self.producers:
            async with self._lock:
                if queue not in self.producers:
                    module = await asyncio.to_thread(adapter, queue)
                    producer = module.Producer(self.settings)
                    await producer.start()
                    self.producers[queue] = producer
                    # The library's objects live as long as the process: frozen
                    # with the rest of start-up's, full collections skip them.
                    freeze_startup_heap()
        return self.producers[queue]

    async def close(self) -> None:
        await self.outbox.flush(self.settings.shutdown_grace_s)
        try:  # the enqueue counts still in memory (a stopped Redis loses them: logged)
            await asyncio.wait_for(self.ledger.enqueues.written(), self.settings.shutdown_grace_s)
        except TimeoutError:
            log.warning("enqueue counts not written before shutdown: Redis unreachable")
        for producer in self.producers.values():
            try:
                await producer.close()
            except Exception:
                log.exception("closing a producer")
        await self.background.runner.close()
        flush()  # with API_WORKERS > 1, this process's last updates into its files, which outlive it
        await self.upstream_async.aclose()
        self.upstream_sync.close()
        await self.redis.aclose()
