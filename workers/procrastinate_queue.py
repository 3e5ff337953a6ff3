"""procrastinate on PostgreSQL (psycopg 3): `defer_async` inserts a row into
`procrastinate_jobs` (queue `lab`), whose trigger NOTIFYs the workers; a
worker takes jobs with a locking SELECT and runs PROCRASTINATE_CONCURRENCY
(default CONCURRENCY) at once.

The API's connections come from the lab's pool (lab/postgres.pool), opened
without waiting: procrastinate's own waits 30 s for a first connection, the
lab's fails within a few REDIS_TIMEOUT_S while PostgreSQL is away (a 503),
and waits while it is only busy. The tables are created once,
from procrastinate's schema script, under the lab's lock.

Delivery: procrastinate leaves the job of a dead worker "doing" for good
(its workers only record heartbeats). Each worker here gives such jobs back
(`retry_job`) once their worker's heartbeat is STALLED_AFTER_S old,
checking every STALLED_CHECK_S, one worker at a time (an advisory lock), so
a killed worker's tasks run again. On SIGTERM the worker waits up to
SHUTDOWN_GRACE_S for running jobs, then cancels them, and their retry puts
them back in the queue. A job that succeeded is deleted (`delete_jobs`),
as SAQ and PgQueuer also drop theirs, so its table holds what waits and runs.

Start it with `python -m workers.procrastinate_queue`."""

import asyncio
import logging

import procrastinate
from procrastinate.schema import SchemaManager
from psycopg_pool import AsyncConnectionPool

from lab import postgres
from lab.protocol import Queue, TaskMessage
from lab.settings import Settings, get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("procrastinate")
QUEUE_NAME = "lab"
TASK_NAME = "lab_task"
SCHEMA_LOCK = 0x5A1  # lab/postgres.advisory_lock's key for procrastinate's tables
STALLED_LOCK = 0x5A2  # one worker at a time gives stalled jobs back
STALLED_AFTER_S = 30  # procrastinate's default heartbeat window (its heartbeat: every 10 s)
STALLED_CHECK_S = 5
API_POOL_SIZE = 10

log = logging.getLogger("lab.procrastinate")


async def create_schema(settings: Settings) -> None:
    async with postgres.advisory_lock(settings, SCHEMA_LOCK) as conn:
        exists = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
        if exists and exists[0] is None:
            await conn.execute(SchemaManager.get_schema())  # type: ignore[arg-type]


async def opened_app(settings: Settings, pool_size: int) -> tuple[procrastinate.App, AsyncConnectionPool]:
    """The app on the lab's pool, which procrastinate does not close: close_app does."""
    await create_schema(settings)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    pool = postgres.pool(settings, pool_size)
    await pool.open()  # not waiting for a connection: the first enqueue fails fast instead
    await app.open_async(pool)
    return app, pool


async def close_app(app: procrastinate.App, pool: AsyncConnectionPool) -> None:
    await app.close_async()
    await pool.close()


class Producer:
    app: procrastinate.App  # set by start()

    def __init__(self, settings: Settings):
        self.settings = settings

    async def start(self) -> None:
        self.app, self.pool = await opened_app(self.settings, API_POOL_SIZE)
        self.deferrer = self.app.configure_task(TASK_NAME, queue=QUEUE_NAME)

    async def enqueue(self, msg: TaskMessage) -> None:
        await self.deferrer.defer_async(message=msg.payload())

    async def close(self) -> None:
        if hasattr(self, "app"):
            await close_app(self.app, self.pool)


# The backlog (the queue monitor) and `make purge`: the queue's waiting jobs in procrastinate's table.
depth, purge = postgres.backlog_functions(
    "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s AND status = 'todo'",
    "DELETE FROM procrastinate_jobs WHERE queue_name = %s",
    (QUEUE_NAME,),
)


async def give_back_stalled(app: procrastinate.App, settings: Settings) -> None:
    """Every STALLED_CHECK_S, under the lock: the jobs whose worker's heartbeat
    is STALLED_AFTER_S old back to the queue."""
    while True:
        await asyncio.sleep(STALLED_CHECK_S)
        try:
            async with postgres.advisory_lock(settings, STALLED_LOCK):
                for job in await app.job_manager.get_stalled_jobs(
                    queue=QUEUE_NAME, seconds_since_heartbeat=STALLED_AFTER_S
                ):
                    await app.job_manager.retry_job(job)
                    log.warning("job %s of a worker gone quiet given back to the queue", job.id)
        except Exception:  # PostgreSQL away: the next check tries again
            log.exception("looking for stalled jobs")


async def run() -> None:
    settings = get_settings()
    await postgres.wait_until_answers(settings)
    concurrency = settings.concurrency_for(QUEUE)
    app, pool = await opened_app(settings, concurrency + 2)
    lab = WorkerRuntime(settings, QUEUE)

    @app.task(name=TASK_NAME, queue=QUEUE_NAME, retry=1)  # two runs in all, as SAQ's retries=2
    async def lab_task(message: dict) -> None:
        await lab.runner.run(message)

    await lab.start()
    stalled = asyncio.create_task(give_back_stalled(app, settings))
    try:
        await app.run_worker_async(
            queues=[QUEUE_NAME],
            concurrency=concurrency,
            shutdown_graceful_timeout=settings.shutdown_grace_s,
            delete_jobs="successful",
        )
    finally:
        stalled.cancel()
        await lab.stop()
        await close_app(app, pool)


def main() -> None:
    setup_logging()
    asyncio.run(run())


if __name__ == "__main__":
    main()
