"""A bare Dramatiq worker, the same on Redis (services/bare/queues.py) and on
RabbitMQ (services/bare/rabbitmq_queues.py): only its broker differs."""

import signal
import threading

import redis.asyncio as aioredis

from lab.settings import Settings
from services.bare.bench_task import TASK, done_key


def run_dramatiq_worker(settings: Settings, broker, queue: str, queue_name: str) -> None:
    """A bare Dramatiq worker on `broker` until SIGTERM: the lab worker's
    settings (no retries, TASK_TIMEOUT_S, an async task on the AsyncIO
    middleware's loop, its queue's threads), counting into done_key(queue)."""
    from dramatiq import Worker, actor
    from dramatiq.middleware import AsyncIO

    broker.add_middleware(AsyncIO())
    client = aioredis.Redis.from_url(settings.redis_url)

    async def bench_task(message: dict) -> None:
        await client.incrby(done_key(queue), message["value"])

    actor(
        bench_task,
        broker=broker,
        actor_name=TASK,
        queue_name=queue_name,
        max_retries=0,
        time_limit=settings.task_timeout_s * 1000,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    broker.emit_after("process_boot")
    worker = Worker(broker, queues={queue_name}, worker_threads=settings.concurrency_for(queue))
    worker.start()
    while not stop.wait(1):
        pass
    worker.stop(timeout=settings.shutdown_grace_s * 1000)
    broker.close()
