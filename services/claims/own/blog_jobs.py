"""The blog comparison's two jobs, and the one write each makes when it ends
(its index into a set, its start and end into a list, one round trip), shared
by the five minimal workers (blog_<library>.py). The post states the jobs:

    io   asyncio.sleep(0.1) for the async libraries, time.sleep(0.1) for Celery and Dramatiq
    cpu  SHA-256 of a 1 KB random payload, 1000 times

    python blog_jobs.py calibrate   # the cpu job's body alone, 200 times: its mean in ms
"""

import asyncio
import hashlib
import os
import sys
import time

import redis
import redis.asyncio as aioredis

RUN = os.environ.get("CLAIMS_RUN", "")
IO_S = 0.1
_sync = redis.Redis()
_async: dict = {}


def cpu_body() -> None:
    payload = os.urandom(1024)
    for _ in range(1000):
        hashlib.sha256(payload).digest()


def _record(pipe, i: int, start: float) -> None:
    pipe.incrby(f"claims:{RUN}:exec", 1)
    pipe.sadd(f"claims:{RUN}:ids", i)
    pipe.rpush(f"claims:{RUN}:times", f"{start:.6f} {time.time():.6f}")


def record(i: int, start: float) -> None:
    pipe = _sync.pipeline(transaction=False)
    _record(pipe, i, start)
    pipe.execute()


async def record_async(i: int, start: float) -> None:
    loop = asyncio.get_running_loop()
    client = _async.get(loop)
    if client is None:
        client = _async[loop] = aioredis.Redis()
    pipe = client.pipeline(transaction=False)
    _record(pipe, i, start)
    await pipe.execute()


async def io_async(i: int) -> None:
    start = time.time()
    await asyncio.sleep(IO_S)
    await record_async(i, start)


async def cpu_async(i: int) -> None:
    start = time.time()
    cpu_body()
    await record_async(i, start)


def io_sync(i: int) -> None:
    start = time.time()
    time.sleep(IO_S)
    record(i, start)


def cpu_sync(i: int) -> None:
    start = time.time()
    cpu_body()
    record(i, start)


def timed_enqueue(send, n: int) -> None:
    """send(i) for each task, timed; the same line for every library."""
    start = time.time()
    for i in range(n):
        send(i)
    print(f"enqueued {n} tasks in {time.time() - start:.4f}s")


async def timed_enqueue_async(send, n: int) -> None:
    start = time.time()
    for i in range(n):
        await send(i)
    print(f"enqueued {n} tasks in {time.time() - start:.4f}s")


if __name__ == "__main__" and sys.argv[1:] == ["calibrate"]:
    cpu_body()
    start = time.perf_counter()
    for _ in range(200):
        cpu_body()
    print(f"cpu body {(time.perf_counter() - start) / 200 * 1000:.4f} ms")
