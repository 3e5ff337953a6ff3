"""The blog's taskiq worker: RedisStreamBroker at its defaults; the post's 10 at a time.

python blog_enqueue.py taskiq io|cpu N                                    # enqueue
taskiq worker --workers 1 --max-async-tasks 10 blog_taskiq:broker # work
"""

import asyncio

import blog_jobs
from taskiq_redis import RedisStreamBroker

broker = RedisStreamBroker("redis://localhost:6379")


@broker.task
async def io(i: int) -> None:
    await blog_jobs.io_async(i)


@broker.task
async def cpu(i: int) -> None:
    await blog_jobs.cpu_async(i)


async def _enqueue(kind: str, n: int) -> None:
    task = io if kind == "io" else cpu
    await broker.startup()
    await blog_jobs.timed_enqueue_async(lambda i: task.kiq(i), n)
    await broker.shutdown()


def enqueue(kind: str, n: int) -> None:
    asyncio.run(_enqueue(kind, n))
