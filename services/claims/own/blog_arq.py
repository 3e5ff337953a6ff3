"""The blog's arq worker: arq's defaults plus the post's max_jobs=10 and poll_delay=0.01.

python blog_enqueue.py arq io|cpu N      # enqueue
arq blog_arq.WorkerSettings      # work
"""

import asyncio

import blog_jobs
from arq import create_pool
from arq.connections import RedisSettings


async def io(ctx, i):
    await blog_jobs.io_async(i)


async def cpu(ctx, i):
    await blog_jobs.cpu_async(i)


class WorkerSettings:
    functions = [io, cpu]
    redis_settings = RedisSettings()
    max_jobs = 10
    poll_delay = 0.01


async def _enqueue(kind: str, n: int) -> None:
    pool = await create_pool(RedisSettings())
    await blog_jobs.timed_enqueue_async(lambda i: pool.enqueue_job(kind, i), n)


def enqueue(kind: str, n: int) -> None:
    asyncio.run(_enqueue(kind, n))
