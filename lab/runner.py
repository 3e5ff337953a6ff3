"""Run one task message: the work, the ledger and the metrics, the same for every queue.

Each queue adapter receives a message its own way and hands it to
`TaskRunner.run` (Celery's prefork and solo children: `run_blocking`, the same
steps without an event loop where the body needs none; Huey's thread workers
run such a body in their own thread, `run_loop_free` on a runner `for_thread`);
nothing else about a task differs between queues.
"""

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Coroutine

from lab.ledger import BlockingSettle, Ledger
from lab.metrics import (
    TASK_COMPLETED,
    TASK_DUPLICATES,
    TASK_DURATION,
    TASK_FAILED,
    TASK_LATENCY,
    TASK_STARTED,
    TASK_WAIT,
    TASKS_IN_PROGRESS,
    Count,
    Observe,
)
from lab.protocol import ENDPOINTS, TaskMessage
from lab.redis_clients import async_client, sync_client, worker_client
from lab.settings import Settings
from lab.tasks import TaskWork

log = logging.getLogger("lab.runner")


class _TaskMetrics:
    """The task series of one queue/kind/variant, looked up once (Count, Observe)."""

    def __init__(self, labels: dict):
        self.started, self.completed = Count(TASK_STARTED.labels(**labels)), Count(TASK_COMPLETED.labels(**labels))
        self.failed = Count(TASK_FAILED.labels(**labels))
        self.duplicates = Count(TASK_DUPLICATES.labels(**labels))
        self.in_progress = Count(TASKS_IN_PROGRESS.labels(**labels))
        self.wait, self.duration = Observe(TASK_WAIT, labels), Observe(TASK_DURATION, labels)
        self.latency = Observe(TASK_LATENCY, labels)

    def begin(self, msg: TaskMessage) -> float:
        started = time.time()
        self.started.value += 1
        self.wait(max(0.0, started - msg.enqueued_at))
        self.in_progress.value += 1
        return started

    def failed_once(self, first: bool) -> None:
        (self.failed if first else self.duplicates).value += 1

    def completed_once(self, msg: TaskMessage, started: float, finished: float, first: bool) -> None:
        self.duration(finished - started)
        if first:
            self.completed.value += 1
            self.latency(finished - msg.enqueued_at)
        else:
            self.duplicates.value += 1


def _run_without_loop(coro: Coroutine[None, None, None]) -> None:
    """Run a coroutine that never suspends to its end, with no event loop."""
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("a task body listed as loop-free awaited something")


class TaskRunner:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = async_client(settings)
        self.work = TaskWork(settings, self.redis, sync_client(settings))
        self.ledger = Ledger(self.redis)
        self.settle_client = worker_client(settings)
        self.blocking_ledger = BlockingSettle(self.settle_client)
        # A task that ran while Redis was away is settled once it is back, not left pending.
        self.retry_s = settings.task_timeout_s
        self._metrics: dict[tuple, _TaskMetrics] = {}

    def metrics(self, msg: TaskMessage) -> _TaskMetrics:
        return self._series(msg.queue, msg.kind, msg.variant)

    def _series(self, queue: str, kind: str, variant: str) -> _TaskMetrics:
        key = (queue, kind, variant)
        if key not in self._metrics:
            self._metrics[key] = _TaskMetrics({"queue": queue, "kind": kind, "variant": variant})
        return self._metrics[key]

    def make_series(self, queue: str) -> None:
        """Every task series of `queue` made now, not on its first task: a
        process that forks a child per task (RQ's worker) makes them once."""
        for kind, variant in ENDPOINTS:
            self._series(queue, kind, variant)

    async def run(self, msg: TaskMessage | dict) -> None:
        if isinstance(msg, dict):
            msg = TaskMessage.validate(msg)
        m = self.metrics(msg)
        started = m.begin(msg)
        try:
            # The start is counted in the task's own settle (or half a second in,
            # for a long task): one Redis round trip per task for the ledger, not two.
            start = self.ledger.start_later(msg)
            work, write_after = self.work.steps(msg.kind, msg.variant)
            try:
                await work(msg)
            except Exception:
                log.exception("task %s (%s %s) failed", msg.task_id, msg.queue, msg.endpoint)
                m.failed_once(await self.ledger.settle(msg, "failed", start=start, retry_s=self.retry_s))
                raise  # let the queue library see the failure too
            finished = time.time()
            # The task's closing INCRBY, if it has one, goes with its settle.
            m.completed_once(
                msg,
                started,
                finished,
                await self.ledger.settle(msg, "completed", write=write_after, start=start, retry_s=self.retry_s),
            )
        finally:
            m.in_progress.value -= 1

    def run_blocking(self, msg: TaskMessage | dict, loop: Callable[[], asyncio.AbstractEventLoop]) -> None:
        """`run`, for a process that runs one task at a time and no event loop
        between tasks (Celery's prefork and solo children, RQ's work horses). A
        body that never awaits (TaskWork.loop_free) is run to its end without a
        loop and settled with a blocking call (BlockingSettle): one round trip,
        as the bare worker's INCRBY, not through the loop and the async client
        (fast path: docs/hot-path.md). Any other body runs through `run` on the
        loop that `loop()` gives, asked for only then (an RQ horse would
        otherwise make one per task for nothing)."""
        if isinstance(msg, dict):
            msg = TaskMessage.validate(msg)
        if not self.is_loop_free(msg):
            return loop().run_until_complete(self.run(msg))
        self.run_loop_free(msg)

    def is_loop_free(self, msg: TaskMessage) -> bool:
        """Whether the task's body never awaits (TaskWork.loop_free)."""
        return (msg.kind, msg.variant) in self.work.loop_free

    def run_loop_free(self, msg: TaskMessage) -> None:
        """run_blocking's way for a loop-free body, in the calling thread."""
        m = self.metrics(msg)
        started = m.begin(msg)
        try:
            work, write_after = self.work.steps(msg.kind, msg.variant)
            try:
                _run_without_loop(work(msg))
            except Exception:
                log.exception("task %s (%s %s) failed", msg.task_id, msg.queue, msg.endpoint)
                m.failed_once(self.blocking_ledger.settle(msg, "failed", retry_s=self.retry_s))
                raise
            finished = time.time()
            m.completed_once(
                msg,
                started,
                finished,
                self.blocking_ledger.settle(msg, "completed", write=write_after, retry_s=self.retry_s),
            )
        finally:
            m.in_progress.value -= 1

    def for_thread(self) -> "TaskRunner":
        """This runner for one more thread that runs loop-free bodies itself
        (run_loop_free) beside the thread of the loop (Huey's thread workers):
        the same clients, pools and ledger, with task series and a blocking
        settle's connection of its own (lab/metrics.py: each series is
        updated by one thread only)."""
        twin = copy.copy(self)
        twin._metrics = {}
        twin.blocking_ledger = BlockingSettle(self.settle_client)
        return twin

    async def close(self) -> None:
        self.work.close()
        self.settle_client.close()
        await self.redis.aclose()
