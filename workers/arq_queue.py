"""arq: `enqueue_job` into a Redis sorted set; `Worker(max_jobs=...)` polls it.

Knobs that change the result: ARQ_MAX_JOBS (default CONCURRENCY) and
ARQ_POLL_DELAY (arq's default 0.5 s: the worker looks for jobs twice a
second, and each poll starts ARQ_MAX_JOBS jobs plus one for each that finishes
while the others are being started; docs/queues.md, "arq's drain", has what
that comes to). On
SIGTERM the worker stops taking jobs and waits SHUTDOWN_GRACE_S for running
ones (arq's `job_completion_wait`);
jobs still running after that are cancelled and arq runs them again later.

Delivery: a job stays in the queue until it finishes; the worker running it
holds an in-progress key that expires TASK_TIMEOUT_S + 10 s after it started.
A job whose worker died is run again once that key expires (arq's
`max_tries`, 5, bounds the re-runs); the ledger counts a second execution as a
duplicate. Redis going away does not end the worker (see LabWorker).
"""

import asyncio
import logging

from arq.connections import ArqRedis, RedisSettings
from arq.worker import Worker
from redis.asyncio import ConnectionPool

from lab.key_purge import delete_keys
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import REDIS_DOWN, async_options
from lab.settings import Settings, get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("arq")
QUEUE_KEY = "lab:arq:queue"  # a ZSET of job ids; jobs themselves live at arq:job:<id>
TASK_NAME = "lab_task"


def redis_settings(settings: Settings) -> RedisSettings:
    rs = RedisSettings.from_dsn(settings.redis_url)
    rs.conn_retries = 30  # a starting worker waits for Redis
    return rs


class Producer:
    pool: ArqRedis  # set by start(): the API enqueues only through started producers

    def __init__(self, settings: Settings):
        self.settings = settings

    async def start(self) -> None:
        # arq's create_pool sets no command timeout: a frozen Redis would hang the
        # request. Its ArqRedis on a pool of our own has the API's timeouts.
        pool = ConnectionPool.from_url(self.settings.redis_url, **async_options(self.settings))
        self.pool = ArqRedis(pool, default_queue_name=QUEUE_KEY)
        await self.pool.ping()

    async def enqueue(self, msg: TaskMessage) -> None:
        job = await self.pool.enqueue_job(TASK_NAME, msg.payload(), _job_id=msg.task_id)
        if job is None:
            # arq returns None when a job with this id exists, and when its
            # transaction fails while it watches the job's key: redis-py raises
            # WatchError for a timeout then, though Redis may have run it (the
            # ledger counts such a task if it runs: Ledger.count_refused).
            raise RuntimeError(f"arq enqueued no job {msg.task_id} (an existing id, or a reply lost while watching)")

    async def close(self) -> None:
        if hasattr(self, "pool"):
            await self.pool.aclose()


async def depth(redis) -> int:
    return await redis.zcard(QUEUE_KEY)


async def purge(redis) -> int:
    """(make purge, no worker running) The queue, and every job's body, lease and retry count."""
    return await delete_keys(redis, (QUEUE_KEY, "arq:job:*", "arq:in-progress:*", "arq:retry:*"))


# Worker
log = logging.getLogger("lab.arq")


class LabWorker(Worker):
    """arq's Worker, except that losing Redis does not end it.

    arq lets a connection error out of its poll loop, and the process exits.
    Here the poll is retried every second until Redis answers again; jobs
    that were running carry on (those whose result could not be written are
    run again when their in-progress key expires)."""

    async def _poll_iteration(self) -> None:
        try:
            await super()._poll_iteration()
        except REDIS_DOWN as exc:
            log.warning("Redis unreachable (%s): polling again in 1 s", exc)
            await asyncio.sleep(1)

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        try:
            await super().start_jobs(job_ids)
        except REDIS_DOWN:
            # arq had taken a slot for the job it was starting when Redis went:
            # give it back, or each outage would cost the worker one slot.
            self.job_counter -= 1
            self.sem.release()
            raise


async def lab_task(ctx: dict, message: dict) -> None:
    await ctx["lab"].runner.run(message)


async def startup(ctx: dict) -> None:
    ctx["lab"] = WorkerRuntime(get_settings(), QUEUE)
    await ctx["lab"].start()


async def shutdown(ctx: dict) -> None:
    await ctx["lab"].stop()


def main() -> None:
    setup_logging()
    settings = get_settings()
    LabWorker(
        functions=[lab_task],
        redis_settings=redis_settings(settings),
        queue_name=QUEUE_KEY,
        max_jobs=settings.concurrency_for(QUEUE),
        poll_delay=settings.arq_poll_delay,
        job_timeout=settings.task_timeout_s,
        job_completion_wait=settings.shutdown_grace_s,
        on_startup=startup,
        on_shutdown=shutdown,
        keep_result=60,
        handle_signals=True,
    ).run()


if __name__ == "__main__":
    main()
