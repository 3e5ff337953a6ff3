"""SAQ with its PostgreSQL queue (`PostgresQueue`, over psycopg 3): the same
job options, worker and shutdown as workers/saq_queue.py (SAQ on Redis),
only the queue differs.

The API inserts a row into SAQ's table `saq_jobs` (queue `lab`) and NOTIFYs
the workers, which LISTEN and take jobs with SELECT ... FOR UPDATE SKIP
LOCKED. SAQ creates its tables on connect, under the lab's lock
(lab/postgres.advisory_lock). The API's connections come from the lab's pool
(lab/postgres.pool): while PostgreSQL is away an enqueue fails within a
few REDIS_TIMEOUT_S (a 503); while it is only busy, the enqueue waits.

Delivery: a job a dead worker held stays "active" until SAQ's sweep (one
worker at a time, every sweep_interval_s) finds it past its timeout,
TASK_TIMEOUT_S; with `retries=2` it is then queued again, as on Redis.

Start it with `python -m workers.saq_postgres_queue`."""

import asyncio

from saq.queue.postgres import PostgresQueue

from lab import postgres
from lab.protocol import Queue
from lab.settings import Settings, get_settings
from lab.worker_runtime import setup_logging
from workers import saq_queue
from workers.saq_queue import QUEUE_NAME, TASK_NAME, LabWorker, hooks, lab_task, sweep_interval_s

QUEUE = Queue("saq-postgres")
SCHEMA_LOCK = 0x5A0  # lab/postgres.advisory_lock's key for SAQ's tables
API_POOL_SIZE = 10  # connections of the API's producer: an enqueue holds one for its INSERT


async def connected_queue(settings: Settings, pool_size: int) -> PostgresQueue:
    queue = PostgresQueue(
        pool=postgres.pool(settings, pool_size),
        name=QUEUE_NAME,
        manage_pool_lifecycle=True,
        min_size=1,
        max_size=pool_size,
    )
    async with postgres.advisory_lock(settings, SCHEMA_LOCK):
        await queue.connect()
    return queue


class Producer(saq_queue.Producer):
    """SAQ's producer on Redis (the same job options), on this queue."""

    queue: PostgresQueue  # type: ignore[assignment]

    async def start(self) -> None:
        self.queue = await connected_queue(self.settings, API_POOL_SIZE)


# The backlog (the queue monitor) and `make purge`: the queue's waiting jobs in SAQ's table.
depth, purge = postgres.backlog_functions(
    "SELECT count(*) FROM saq_jobs WHERE queue = %s AND status = 'queued'",
    "DELETE FROM saq_jobs WHERE queue = %s",
    (QUEUE_NAME,),
)


startup, shutdown = hooks(QUEUE)


async def run() -> None:
    settings = get_settings()
    await postgres.wait_until_answers(settings)
    concurrency = settings.concurrency_for(QUEUE)
    # A connection per job at once, one for LISTEN, one for the sweep and the timers.
    queue = await connected_queue(settings, concurrency + 2)
    worker = LabWorker(
        queue,
        functions=[(TASK_NAME, lab_task)],
        concurrency=concurrency,
        startup=startup,
        shutdown=shutdown,
        grace_s=settings.shutdown_grace_s,
        timers={"sweep": sweep_interval_s(settings.task_timeout_s)},
        dequeue_timeout=1.0,
    )
    await worker.start()


def main() -> None:
    setup_logging()
    asyncio.run(run())


if __name__ == "__main__":
    main()
