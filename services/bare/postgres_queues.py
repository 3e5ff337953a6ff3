"""The bare counterparts of the queues on PostgreSQL in `make bench`, as
services/bare/queues.py has those on Redis: the library's plain call to
enqueue, and its own worker with the lab worker's settings (concurrency, job
options, what it keeps of a finished job) on a task that only does INCRBY on
`bench:done:<queue>` (on Redis, as the ledger is).

Their jobs are in the library's tables, apart from the lab's (queue or
entrypoint `bench`): `postgres_backlog` is the SQL that counts them and the
SQL that deletes them, for their backlog and for emptying them before a
bench (services/bare/drain.py). The tables are created as the lab's are
(its workers' modules), so a bench may run before any lab worker did."""

import asyncio
import json
import signal

import redis.asyncio as aioredis

from lab import postgres
from lab.settings import Settings, get_settings
from services.bare.bench_task import TASK, done_key


class SaqPostgres:
    NAME = "bench"
    postgres_backlog = (
        "SELECT count(*) FROM saq_jobs WHERE queue = %s AND status = 'queued'",
        "DELETE FROM saq_jobs WHERE queue = %s",
        (NAME,),
    )

    @classmethod
    async def connected(cls, settings: Settings):
        from saq.queue.postgres import PostgresQueue

        from workers.saq_postgres_queue import SCHEMA_LOCK

        queue = PostgresQueue.from_url(settings.postgres_url, name=cls.NAME)
        async with postgres.advisory_lock(settings, SCHEMA_LOCK):
            await queue.connect()
        return queue

    async def start(self, url: str) -> None:
        self.queue = await self.connected(get_settings())
        self.timeout_s = get_settings().task_timeout_s

    async def publish(self, message: dict) -> None:
        await self.queue.enqueue(TASK, message=message, timeout=self.timeout_s, retries=2)  # the lab's job options

    async def close(self) -> None:
        await self.queue.disconnect()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from saq import Worker

        client = aioredis.Redis.from_url(settings.redis_url)

        async def bench_task(ctx: dict, *, message: dict) -> None:
            await client.incrby(done_key("saq-postgres"), message["value"])

        async def run() -> None:
            await postgres.wait_until_answers(settings)
            queue = await cls.connected(settings)
            await Worker(
                queue,
                functions=[(TASK, bench_task)],
                concurrency=settings.concurrency_for("saq-postgres"),
                dequeue_timeout=1.0,
            ).start()  # as the lab's worker

        asyncio.run(run())


class Procrastinate:
    NAME = "bench"
    postgres_backlog = (
        "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s AND status = 'todo'",
        "DELETE FROM procrastinate_jobs WHERE queue_name = %s",
        (NAME,),
    )

    @classmethod
    async def app(cls, settings: Settings):
        import procrastinate

        from workers.procrastinate_queue import create_schema

        await create_schema(settings)
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=settings.postgres_url))
        await app.open_async()
        return app

    async def start(self, url: str) -> None:
        self.app_ = await self.app(get_settings())
        self.deferrer = self.app_.configure_task(TASK, queue=self.NAME)

    async def publish(self, message: dict) -> None:
        await self.deferrer.defer_async(message=message)

    async def close(self) -> None:
        await self.app_.close_async()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        client = aioredis.Redis.from_url(settings.redis_url)

        async def run() -> None:
            await postgres.wait_until_answers(settings)
            app = await cls.app(settings)

            @app.task(name=TASK, queue=cls.NAME, retry=1)  # as the lab's
            async def bench_task(message: dict) -> None:
                await client.incrby(done_key("procrastinate"), message["value"])

            await app.run_worker_async(
                queues=[cls.NAME],
                concurrency=settings.concurrency_for("procrastinate"),
                shutdown_graceful_timeout=settings.shutdown_grace_s,
                delete_jobs="successful",
            )

        asyncio.run(run())


class Pgqueuer:
    NAME = "bench"
    postgres_backlog = (
        "SELECT count(*) FROM pgqueuer WHERE entrypoint = %s AND status = 'queued'",
        "DELETE FROM pgqueuer WHERE entrypoint = %s",
        (NAME,),
    )

    async def start(self, url: str) -> None:
        import asyncpg
        from pgqueuer import Queries

        from workers.pgqueuer_queue import create_schema

        settings = get_settings()
        await create_schema(settings)
        self.pool = await asyncpg.create_pool(settings.postgres_url)
        self.queries = Queries.from_asyncpg_pool(self.pool)

    async def publish(self, message: dict) -> None:
        await self.queries.enqueue(self.NAME, json.dumps(message).encode())

    async def close(self) -> None:
        await self.pool.close()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        import asyncpg
        from pgqueuer import PgQueuer
        from pgqueuer.models import Job

        from workers.pgqueuer_queue import batch_and_cap, create_schema

        client = aioredis.Redis.from_url(settings.redis_url)

        async def run() -> None:
            await postgres.wait_until_answers(settings)
            await create_schema(settings)
            pool = await asyncpg.create_pool(settings.postgres_url)
            pgq = PgQueuer.from_asyncpg_pool(pool)

            @pgq.entrypoint(cls.NAME)
            async def bench_task(job: Job) -> None:
                await client.incrby(done_key("pgqueuer"), json.loads(job.payload or b"{}")["value"])

            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, pgq.shutdown.set)
            batch, cap = batch_and_cap(settings.concurrency_for("pgqueuer"))
            await pgq.run(batch_size=batch, max_concurrent_tasks=cap)  # as the lab's worker

        asyncio.run(run())


BARE_POSTGRES = {
    "saq-postgres": SaqPostgres,
    "procrastinate": Procrastinate,
    "pgqueuer": Pgqueuer,
}
