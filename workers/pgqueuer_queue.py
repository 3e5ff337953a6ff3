"""PgQueuer on PostgreSQL (over asyncpg, its first driver): `enqueue` inserts a
row into the table `pgqueuer` under the entrypoint `lab` (PgQueuer's
entrypoint is its queue), whose trigger NOTIFYs the workers; a worker takes
jobs with SELECT ... FOR UPDATE SKIP LOCKED, at most PGQUEUER_CONCURRENCY
(default CONCURRENCY) at once.

The API's pool waits at most REDIS_TIMEOUT_S for a connection to open, and
opens it again while PostgreSQL answers (lab/postgres.connect_while_answering),
so an enqueue fails fast (a 503) while PostgreSQL is away, not while the
API's event loop is late. The tables are
created once, by PgQueuer's install, under the lab's lock.

Delivery: a running job's row is "picked" and carries a heartbeat, renewed
by its worker; a job whose heartbeat is older than PgQueuer's
heartbeat_timeout (its default, 30 s) is taken again by any worker, so a
killed worker's tasks run again, by itself. PgQueuer has no grace period:
on SIGTERM the worker stops taking jobs and waits for those it runs; after
SHUTDOWN_GRACE_S it exits at once, leaving what still runs "picked" for
another worker (cancelling them would delete them as "canceled").

Concurrency: PgQueuer takes jobs in batches of at most half its cap
(`batch_size`), so the cap is at least 2 and a worker with
PGQUEUER_CONCURRENCY=1 runs up to two.

Start it with `python -m workers.pgqueuer_queue`."""

import asyncio
import json
import logging
import os
import signal
from functools import partial

import asyncpg
from pgqueuer import PgQueuer, Queries
from pgqueuer.models import Job

from lab import postgres
from lab.protocol import Queue, TaskMessage
from lab.settings import Settings, get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("pgqueuer")
ENTRYPOINT = "lab"
SCHEMA_LOCK = 0x5A3  # lab/postgres.advisory_lock's key for PgQueuer's tables
API_POOL_SIZE = 10

log = logging.getLogger("lab.pgqueuer")


async def create_schema(settings: Settings) -> None:
    async with postgres.advisory_lock(settings, SCHEMA_LOCK):
        conn = await postgres.connect_while_answering(settings, settings.postgres_url, timeout=settings.redis_timeout_s)
        try:
            queries = Queries.from_asyncpg_connection(conn)
            if not await queries.schema_is_installed():
                await queries.install()
        finally:
            await conn.close()


async def connected_pool(settings: Settings, size: int) -> asyncpg.Pool:
    await create_schema(settings)
    return await asyncpg.create_pool(
        settings.postgres_url,
        min_size=1,
        max_size=size,
        timeout=settings.redis_timeout_s,
        connect=partial(postgres.connect_while_answering, settings),
    )


class Producer:
    pool: asyncpg.Pool  # set by start()

    def __init__(self, settings: Settings):
        self.settings = settings

    async def start(self) -> None:
        self.pool = await connected_pool(self.settings, API_POOL_SIZE)
        self.queries = Queries.from_asyncpg_pool(self.pool)

    async def enqueue(self, msg: TaskMessage) -> None:
        await self.queries.enqueue(ENTRYPOINT, json.dumps(msg.payload()).encode())

    async def close(self) -> None:
        if hasattr(self, "pool"):
            await self.pool.close()


# The backlog (the queue monitor) and `make purge`: the entrypoint's waiting jobs in PgQueuer's table.
depth, purge = postgres.backlog_functions(
    "SELECT count(*) FROM pgqueuer WHERE entrypoint = %s AND status = 'queued'",
    "DELETE FROM pgqueuer WHERE entrypoint = %s",
    (ENTRYPOINT,),
)


def batch_and_cap(concurrency: int) -> tuple[int, int]:
    """PgQueuer's batch_size and max_concurrent_tasks for a concurrency: it
    requires a cap of at least twice the batch."""
    batch = max(1, concurrency // 2)
    return batch, max(concurrency, 2 * batch)


def make_pgqueuer(pool: asyncpg.Pool, lab: WorkerRuntime) -> PgQueuer:
    pgq = PgQueuer.from_asyncpg_pool(pool)

    @pgq.entrypoint(ENTRYPOINT)
    async def lab_task(job: Job) -> None:
        await lab.runner.run(json.loads(job.payload or b"{}"))

    return pgq


async def run() -> None:
    settings = get_settings()
    await postgres.wait_until_answers(settings)
    batch, cap = batch_and_cap(settings.concurrency_for(QUEUE))
    lab = WorkerRuntime(settings, QUEUE)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    pgq: PgQueuer | None = None

    def stop() -> None:
        stopping.set()
        if pgq is not None:
            pgq.shutdown.set()
        # After the grace period, what still runs stays "picked": another worker takes it.
        loop.call_later(settings.shutdown_grace_s, os._exit, 1)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    await lab.start()
    try:
        # PgQueuer's run ends with an error when PostgreSQL goes away: a new
        # one, on a new pool, once it answers again (its jobs waited in the table).
        while not stopping.is_set():
            pool = None
            try:
                # A connection per job at once, one for LISTEN, one for heartbeats and logs.
                pool = await connected_pool(settings, cap + 2)
                pgq = make_pgqueuer(pool, lab)
                if stopping.is_set():
                    break
                await pgq.run(batch_size=batch, max_concurrent_tasks=cap)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("PostgreSQL lost (%s): taking jobs again once it answers", exc)
                await postgres.wait_until_answers(settings)
            finally:
                if pool is not None:
                    pool.terminate()
    finally:
        await lab.stop()


def main() -> None:
    setup_logging()
    asyncio.run(run())


if __name__ == "__main__":
    main()
