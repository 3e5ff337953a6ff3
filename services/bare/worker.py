"""The bare workers of `make bench`: `python -m services.bare.worker arq|saq|faststream|celery`.

Each is the library's own worker with the settings the lab's worker uses
(concurrency, poll delay, acknowledgement, pool), running a task that only
does INCRBY on `bench:done:<queue>`: the drain rate a library reaches without
the lab's runner, ledger and metrics around its tasks.
"""

import asyncio
import os
import socket
import sys

import redis
import redis.asyncio as aioredis

from services.bare import keys
from services.settings import get_settings

settings = get_settings()


def arq() -> None:
    from arq.connections import RedisSettings
    from arq.worker import Worker, func

    async def bench_task(ctx: dict, value: int) -> None:
        await ctx["redis"].incrby(keys.done_key("arq"), value)

    Worker(
        functions=[func(bench_task, name=keys.TASK)],
        redis_settings=RedisSettings.from_dsn(settings.redis_url),
        queue_name=keys.ARQ_QUEUE,
        max_jobs=settings.concurrency_for("arq"),
        poll_delay=settings.arq_poll_delay,
        job_timeout=settings.task_timeout_s,
        keep_result=60,
    ).run()


def saq() -> None:
    from saq import Queue, Worker

    client = aioredis.Redis.from_url(settings.redis_url)

    async def bench_task(ctx: dict, *, value: int) -> None:
        await client.incrby(keys.done_key("saq"), value)

    async def run() -> None:
        queue = Queue.from_url(settings.redis_url, name=keys.SAQ_QUEUE)
        await Worker(queue, functions=[(keys.TASK, bench_task)],
                     concurrency=settings.concurrency_for("saq")).start()

    asyncio.run(run())


def faststream() -> None:
    from faststream import AckPolicy, FastStream
    from faststream.redis import RedisBroker, StreamSub

    broker = RedisBroker(settings.redis_url, logger=None)
    client = aioredis.Redis.from_url(settings.redis_url)
    read = StreamSub(keys.STREAM, group=keys.GROUP, consumer=f"{socket.gethostname()}-{os.getpid()}",
                     max_records=1)

    @broker.subscriber(stream=read, max_workers=settings.concurrency_for("faststream"),
                       ack_policy=AckPolicy.ACK)
    async def bench_task(message: dict) -> None:
        await client.incrby(keys.done_key("faststream"), message["value"])

    asyncio.run(FastStream(broker, logger=None).run())


def celery() -> None:
    from celery import Celery

    app = Celery("bench", broker=settings.redis_url)
    app.conf.update(
        task_default_queue=keys.CELERY_QUEUE,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=settings.celery_prefetch_multiplier,
        worker_send_task_events=settings.celery_task_events,  # as the lab's worker: Flower's events
        worker_hijack_root_logger=False,
    )
    client = redis.Redis.from_url(settings.redis_url)

    @app.task(name=keys.TASK)
    def bench_task(value: int) -> None:
        client.incrby(keys.done_key("celery"), value)

    app.worker_main(["worker", f"--pool={settings.celery_pool}",
                     f"--concurrency={settings.concurrency_for('celery')}",
                     f"--queues={keys.CELERY_QUEUE}", f"--loglevel={settings.library_log_level}",
                     *(["--events"] if settings.celery_task_events else [])])


WORKERS = {"arq": arq, "saq": saq, "faststream": faststream, "celery": celery}

if __name__ == "__main__":
    if sys.argv[1:2] not in ([q] for q in WORKERS):
        sys.exit(f"usage: python -m services.bare.worker {'|'.join(WORKERS)}")
    WORKERS[sys.argv[1]]()
