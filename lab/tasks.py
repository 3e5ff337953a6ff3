"""The task bodies: the same five shapes of work whichever queue delivers them.

io/simple   async Redis INCRBY (after an awaited sleep of IO_LATENCY_MS)
io/sync     the blocking client called inside the async task: it stalls the
            event loop, on purpose, as in the original experiment
io/thread   the blocking client in a ThreadPoolExecutor (THREAD_POOL_SIZE)
cpu/simple  CPU_WORK loop iterations inline, then async INCRBY
cpu/process the CPU work in a ProcessPoolExecutor (PROCESS_POOL_SIZE), then async INCRBY

Every task writes one INCRBY. The async ones are sent by the runner together
with the task's ledger entry, in one round trip (see TaskWork.steps).
"""

import asyncio
import multiprocessing
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import redis
import redis.asyncio as aioredis

from lab.ledger import work_key
from lab.protocol import Kind, TaskMessage, Variant
from lab.settings import Settings

# A task shape's work: an async body, which the runner may also drive without a loop.
TaskBody = Callable[[TaskMessage], Coroutine[None, None, None]]


def cpu_work(iterations: int) -> int:
    """Pure-Python busy loop, like the original experiment's CPU task."""
    total = 0
    for i in range(iterations):
        total += i
    return total


def _blocking_incr(client: redis.Redis, key: str, value: int, latency_s: float) -> None:
    if latency_s:
        time.sleep(latency_s)
    client.incrby(key, value)


class TaskWork:
    """Clients and pools one process needs to run any task body."""

    def __init__(self, settings: Settings, redis_async: aioredis.Redis, redis_sync: redis.Redis):
        self.settings = settings
        self.redis = redis_async
        self.redis_sync = redis_sync
        self.latency_s = settings.io_latency_ms / 1000
        self.thread_pool = ThreadPoolExecutor(settings.thread_pool_size, thread_name_prefix="lab-io")
        self._process_pool: ProcessPoolExecutor | None = None
        self._steps: dict[tuple[Kind, Variant], tuple[TaskBody, bool]] = {
            (Kind.io, Variant.simple): (self.io_wait, True),
            (Kind.io, Variant.sync): (self.io_sync, False),
            (Kind.io, Variant.thread): (self.io_thread, False),
            (Kind.cpu, Variant.simple): (self.cpu_inline, True),
            (Kind.cpu, Variant.process): (self.cpu_process, True),
        }
        # The shapes whose body never awaits: a process that runs one task at a
        # time can run them with no event loop (TaskRunner.run_blocking).
        self.loop_free = {(Kind.io, Variant.sync), (Kind.cpu, Variant.simple)}
        if not self.latency_s:
            self.loop_free.add((Kind.io, Variant.simple))

    @property
    def process_pool(self) -> ProcessPoolExecutor:
        # Created on first use: processes cost memory that only cpu/process needs.
        # "fork" keeps the children small (they share the parent's imports).
        if self._process_pool is None:
            self._process_pool = ProcessPoolExecutor(
                self.settings.process_pool_size, mp_context=multiprocessing.get_context("fork")
            )
        return self._process_pool

    # Each shape is its work, then one INCRBY of the run's work counter by the
    # task's value. io/sync and io/thread write inside their work, with the
    # blocking client (stalling the loop, or in a thread): that is their point.
    # The others end with an async INCRBY, which the runner sends in one round
    # trip with the task's ledger entry (Ledger.settle(..., write=True)).
    async def io_wait(self, msg: TaskMessage) -> None:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)

    async def io_sync(self, msg: TaskMessage) -> None:
        _blocking_incr(self.redis_sync, work_key(msg), msg.value, self.latency_s)

    async def io_thread(self, msg: TaskMessage) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            self.thread_pool, _blocking_incr, self.redis_sync, work_key(msg), msg.value, self.latency_s
        )

    async def cpu_inline(self, msg: TaskMessage) -> None:
        cpu_work(self.settings.cpu_work)

    async def cpu_process(self, msg: TaskMessage) -> None:
        loop = asyncio.get_running_loop()
        pool = self.process_pool
        try:
            await loop.run_in_executor(pool, cpu_work, self.settings.cpu_work)
        except BrokenProcessPool:
            # A child died (the OOM killer's choice under a tight WORKER_MEM): the
            # tasks it held fail, and the next ones get a new pool; a broken pool
            # would fail every cpu/process task until the worker restarts.
            if self._process_pool is pool:
                self._process_pool = None
                pool.shutdown(wait=False, cancel_futures=True)
            raise

    async def write(self, msg: TaskMessage) -> None:
        await self.redis.incrby(work_key(msg), msg.value)

    def steps(self, kind: Kind, variant: Variant) -> tuple[TaskBody, bool]:
        """A shape's work, and whether the async INCRBY is still to be sent after it."""
        return self._steps[(kind, variant)]

    async def run_body(self, msg: TaskMessage) -> None:
        """The whole task, its write included (the runner splits it to save a round trip)."""
        work, write_after = self.steps(msg.kind, msg.variant)
        await work(msg)
        if write_after:
            await self.write(msg)

    def close(self) -> None:
        self.thread_pool.shutdown(wait=True)
        if self._process_pool is not None:
            self._process_pool.shutdown(wait=True)
