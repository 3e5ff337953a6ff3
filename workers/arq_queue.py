"""arq: `enqueue_job` into a Redis sorted set; `Worker(max_jobs=...)` polls it.

Knobs that change the result: ARQ_MAX_JOBS (default CONCURRENCY) and
ARQ_POLL_DELAY (arq's default 0.5 s: an idle worker looks for jobs twice a
second, and each poll takes at most a batch of jobs, which caps a worker at
roughly 200 tasks/s with defaults). On SIGTERM the worker stops taking jobs
and waits SHUTDOWN_GRACE_S for running ones (arq's `job_completion_wait`);
jobs still running after that are cancelled and arq runs them again later.
"""

from arq.connections import ArqRedis, RedisSettings
from redis.asyncio import ConnectionPool
from arq.worker import Worker

from services.protocol import Queue, TaskMessage
from services.settings import Settings, get_settings
from services.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue.arq
QUEUE_KEY = "lab:arq:queue"  # a ZSET of job ids; jobs themselves live at arq:job:<id>
TASK_NAME = "lab_task"


def redis_settings(settings: Settings) -> RedisSettings:
    rs = RedisSettings.from_dsn(settings.redis_url)
    rs.conn_retries = 30  # a starting worker waits for Redis
    return rs


class Producer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.pool = None

    async def start(self) -> None:
        # arq's create_pool sets no command timeout: a frozen Redis would hang the
        # request. Its ArqRedis on a pool of our own has the API's timeouts.
        pool = ConnectionPool.from_url(
            self.settings.redis_url,
            socket_timeout=self.settings.redis_timeout_s,
            socket_connect_timeout=self.settings.redis_timeout_s,
        )
        self.pool = ArqRedis(pool, default_queue_name=QUEUE_KEY)
        await self.pool.ping()

    async def enqueue(self, msg: TaskMessage) -> None:
        job = await self.pool.enqueue_job(TASK_NAME, msg.payload(), _job_id=msg.task_id)
        if job is None:  # arq returns None when a job with this id already exists
            raise RuntimeError(f"arq refused duplicate job id {msg.task_id}")

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()


async def depth(redis) -> int:
    return await redis.zcard(QUEUE_KEY)


# Worker
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
    Worker(
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
