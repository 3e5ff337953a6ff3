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
)
from services.protocol import TaskMessage
from services.redis_clients import async_client, sync_client
from services.settings import Settings
from services.tasks import TaskWork

log = logging.getLogger("lab.runner")


class _TaskMetrics:
    """The task series of one queue/kind/variant, looked up once."""

    def __init__(self, labels: dict):
        self.started, self.completed = TASK_STARTED.labels(**labels), TASK_COMPLETED.labels(**labels)
        self.failed, self.duplicates = TASK_FAILED.labels(**labels), TASK_DUPLICATES.labels(**labels)
        self.wait, self.duration = TASK_WAIT.labels(**labels), TASK_DURATION.labels(**labels)
        self.latency, self.in_progress = TASK_LATENCY.labels(**labels), TASKS_IN_PROGRESS.labels(**labels)


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
        m.started.inc()
        m.wait.observe(max(0.0, started - msg.enqueued_at))
        m.in_progress.inc()
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
                    m.failed.inc()
                else:
                    m.duplicates.inc()
                raise  # let the queue library see the failure too
            finished = time.time()
            m.duration.observe(finished - started)
            # The task's closing INCRBY, if it has one, goes with its settle.
            if await self.ledger.settle(msg, "completed", write=write_after, start=start,
                                        retry_s=self.settings.task_timeout_s):
                m.completed.inc()
                m.latency.observe(finished - msg.enqueued_at)
            else:
                m.duplicates.inc()
        finally:
            m.in_progress.dec()

    async def close(self) -> None:
        self.work.close()
        await self.redis.aclose()
