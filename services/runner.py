"""Run one task message: the work, the ledger and the metrics, the same for every queue.

Each queue adapter receives a message its own way and hands it to
`TaskRunner.run`; nothing else about a task differs between queues.
"""

import logging
import time

from services.ledger import Ledger
from services.metrics import (
    TASK_COMPLETED,
    TASK_DUPLICATES,
    TASK_DURATION,
    TASK_FAILED,
    TASK_LATENCY,
    TASK_STARTED,
    TASK_WAIT,
    TASKS_IN_PROGRESS,
    Observe,
    tally,
)
from services.protocol import TaskMessage
from services.redis_clients import async_client, sync_client
from services.settings import Settings
from services.tasks import TaskWork

log = logging.getLogger("lab.runner")


class _TaskMetrics:
    """The task series of one queue/kind/variant, looked up once, each as the
    one call that updates it (tally, Observe)."""

    def __init__(self, labels: dict):
        self.started, self.completed = tally(TASK_STARTED.labels(**labels)), tally(TASK_COMPLETED.labels(**labels))
        self.failed = tally(TASK_FAILED.labels(**labels))
        self.duplicates = tally(TASK_DUPLICATES.labels(**labels))
        self.in_progress = tally(TASKS_IN_PROGRESS.labels(**labels))
        self.wait, self.duration = Observe(TASK_WAIT.labels(**labels)), Observe(TASK_DURATION.labels(**labels))
        self.latency = Observe(TASK_LATENCY.labels(**labels))


class TaskRunner:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = async_client(settings)
        self.work = TaskWork(settings, self.redis, sync_client(settings))
        self.ledger = Ledger(self.redis)
        self._metrics: dict[tuple, _TaskMetrics] = {}

    def metrics(self, msg: TaskMessage) -> _TaskMetrics:
        key = (msg.queue, msg.kind, msg.variant)
        if key not in self._metrics:
            self._metrics[key] = _TaskMetrics({"queue": msg.queue, "kind": msg.kind, "variant": msg.variant})
        return self._metrics[key]

    async def run(self, msg: TaskMessage | dict) -> None:
        if isinstance(msg, dict):
            msg = TaskMessage.validate(msg)
        m = self.metrics(msg)
        started = time.time()
        m.started(1)
        m.wait(max(0.0, started - msg.enqueued_at))
        m.in_progress(1)
        try:
            # The start is counted in the task's own settle (or half a second in,
            # for a long task): one Redis round trip per task for the ledger, not two.
            start = self.ledger.start_later(msg)
            work, write_after = self.work.steps(msg.kind, msg.variant)
            try:
                await work(msg)
            except Exception:
                log.exception("task %s (%s %s) failed", msg.task_id, msg.queue, msg.endpoint)
                if await self.ledger.settle(msg, "failed", start=start, retry_s=self.settings.task_timeout_s):
                    m.failed(1)
                else:
                    m.duplicates(1)
                raise  # let the queue library see the failure too
            finished = time.time()
            m.duration(finished - started)
            # The task's closing INCRBY, if it has one, goes with its settle.
            if await self.ledger.settle(msg, "completed", write=write_after, start=start,
                                        retry_s=self.settings.task_timeout_s):
                m.completed(1)
                m.latency(finished - msg.enqueued_at)
            else:
                m.duplicates(1)
        finally:
            m.in_progress(-1)

    async def close(self) -> None:
        self.work.close()
        await self.redis.aclose()
