"""The blog's streaq worker: streaq's defaults plus the post's concurrency=10.

python blog_enqueue.py streaq io|cpu N            # enqueue
streaq run blog_streaq:worker             # work
"""

import anyio
import blog_jobs
from streaq import Worker

worker = Worker(concurrency=10)


@worker.task
async def io(i: int) -> None:
    await blog_jobs.io_async(i)


@worker.task
async def cpu(i: int) -> None:
    await blog_jobs.cpu_async(i)


async def _enqueue(kind: str, n: int) -> None:
    task = io if kind == "io" else cpu
    async with worker:
        await blog_jobs.timed_enqueue_async(lambda i: task.enqueue(i), n)


def enqueue(kind: str, n: int) -> None:
    anyio.run(_enqueue, kind, n)
