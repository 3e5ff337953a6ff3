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


class TaskRunner:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = async_client(settings)
        self.work = TaskWork(settings, self.redis, sync_client(settings))
        self.ledger = Ledger(self.redis)

    async def run(self, msg: TaskMessage | dict) -> None:
        if isinstance(msg, dict):
            msg = TaskMessage.model_validate(msg)
        labels = {"queue": msg.queue, "kind": msg.kind, "variant": msg.variant}
        started = time.time()
        TASK_STARTED.labels(**labels).inc()
        TASK_WAIT.labels(**labels).observe(max(0.0, started - msg.enqueued_at))
        in_progress = TASKS_IN_PROGRESS.labels(**labels)
        in_progress.inc()
        try:
            await self.ledger.record_started(msg)
            try:
                await self.work.body(msg.kind, msg.variant)(msg)
            except Exception:
                log.exception("task %s (%s %s) failed", msg.task_id, msg.queue, msg.endpoint)
                if await self.ledger.settle(msg, "failed"):
                    TASK_FAILED.labels(**labels).inc()
                else:
                    TASK_DUPLICATES.labels(**labels).inc()
                raise  # let the queue library see the failure too
            finished = time.time()
            TASK_DURATION.labels(**labels).observe(finished - started)
            if await self.ledger.settle(msg, "completed"):
                TASK_COMPLETED.labels(**labels).inc()
                TASK_LATENCY.labels(**labels).observe(finished - msg.enqueued_at)
            else:
                TASK_DUPLICATES.labels(**labels).inc()
        finally:
            in_progress.dec()

    async def close(self) -> None:
        self.work.close()
        await self.redis.aclose()
