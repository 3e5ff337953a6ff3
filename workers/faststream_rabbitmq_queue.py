"""FastStream with its RabbitMQ broker (`RabbitBroker`, over aio-pika): the same
handler and worker runtime as workers/faststream_queue.py (FastStream on
Redis), only the broker differs.

The API publishes a persistent message to the durable classic queue
`lab-faststream` through the default exchange, on a channel with publisher
confirms (FastStream's default): the API answers 202 once RabbitMQ has
confirmed the message. While RabbitMQ is away the publish fails at once (a
503), and no deadline is set on the confirm: workers/taskiq_rabbitmq_queue.py
says why.

Delivery: a message is acknowledged only after its handler ran
(AckPolicy.ACK). FastStream's RabbitMQ subscriber has no `max_workers`:
aio-pika runs every delivered message at once, so the channel's prefetch
is the concurrency, FASTSTREAM_MAX_WORKERS as on Redis. A killed worker's
unacknowledged messages go back to the queue as soon as its connection
closes. On SIGTERM the broker waits up to SHUTDOWN_GRACE_S
(`graceful_timeout`) for handlers in flight.

Start it with `python -m workers.faststream_rabbitmq_queue`."""

import asyncio
import logging

from faststream import AckPolicy, FastStream
from faststream.rabbit import Channel, RabbitBroker, RabbitQueue

from lab import rabbitmq
from lab.protocol import Queue, TaskMessage
from lab.settings import Settings, get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("faststream-rabbitmq")
QUEUE_NAME = "lab-faststream"
RABBIT_QUEUE = RabbitQueue(QUEUE_NAME, durable=True)


def make_broker(settings: Settings, logs: bool = True) -> RabbitBroker:
    return RabbitBroker(
        settings.rabbitmq_url,
        # The first connect fails within it (the API's 503); later, aio-pika's
        # robust connection reconnects by itself, every second.
        timeout=settings.redis_timeout_s,
        reconnect_interval=1.0,
        graceful_timeout=settings.shutdown_grace_s,
        # As on Redis: the API's producer logs nothing (workers/faststream_queue.py says why).
        logger=logging.getLogger("faststream") if logs else None,  # type: ignore[arg-type]
    )


class Producer:
    def __init__(self, settings: Settings):
        self.broker = make_broker(settings, logs=False)

    async def start(self) -> None:
        await self.broker.connect()

    async def enqueue(self, msg: TaskMessage) -> None:
        await self.broker.publish(msg.payload(), queue=RABBIT_QUEUE, persist=True)

    async def close(self) -> None:
        await self.broker.stop()


# The backlog (the queue monitor) and `make purge`: the queue's ready messages on RabbitMQ.
depth, purge = rabbitmq.backlog_functions((QUEUE_NAME,))


def make_app(settings: Settings) -> FastStream:
    broker = make_broker(settings)
    lab = WorkerRuntime(settings, QUEUE)

    async def handle(message: dict) -> None:
        await lab.runner.run(message)

    channel = Channel(prefetch_count=settings.concurrency_for(QUEUE))
    broker.subscriber(RABBIT_QUEUE, channel=channel, ack_policy=AckPolicy.ACK)(handle)
    return FastStream(broker, after_startup=[lab.start], after_shutdown=[lab.stop])


def main() -> None:
    setup_logging()
    settings = get_settings()
    # FastStream's first connect fails for good while RabbitMQ is away (its
    # robust connection reconnects only once connected): wait for it first.
    asyncio.run(rabbitmq.wait_until_answers(settings))
    asyncio.run(make_app(settings).run())


if __name__ == "__main__":
    main()
