"""taskiq with its RabbitMQ broker (taskiq-aio-pika's `AioPikaBroker`, over
aio-pika): the same task, kicker, receiver and metrics as
workers/taskiq_queue.py (taskiq on Redis), only the broker differs.

`kiq` publishes a persistent message to the topic exchange `lab-taskiq`,
routed to the durable classic queue `lab-taskiq` (taskiq-aio-pika declares
quorum queues by default; classic here, as for every queue of the lab on
RabbitMQ, so that a comparison is of the libraries, not of queue types),
with publisher confirms: the API answers 202 once RabbitMQ has confirmed the
message. While RabbitMQ is away the publish fails at once (its connection is
closed; aio-pika reconnects it every second), a 503. No deadline on the
confirm itself: under load at a small CPU limit the API's event loop can be
later than any short one, and a message RabbitMQ took would be answered 503
(a broker that keeps the connection open and stops answering is given up
when aio-pika's heartbeat is).

Delivery: the worker's consumer has a prefetch of TASKIQ_MAX_ASYNC_TASKS
(taskiq-aio-pika's default is 10), the receiver runs that many at a time,
and a message is acknowledged after its task ran (`ack_type=when_executed`).
A killed worker's unacknowledged messages go back to the queue as soon as
its connection closes. On SIGTERM the receiver stops taking messages and
waits up to SHUTDOWN_GRACE_S for running ones.

Start it with `python -m workers.taskiq_rabbitmq_queue`."""

import asyncio
from functools import partial

from taskiq_aio_pika import AioPikaBroker, Exchange
from taskiq_aio_pika import Queue as RabbitQueue
from taskiq_aio_pika.queue import QueueType

from lab import rabbitmq
from lab.protocol import Queue
from lab.settings import Settings, get_settings
from lab.worker_runtime import setup_logging
from workers import taskiq_queue
from workers.taskiq_queue import run

QUEUE = Queue("taskiq-rabbitmq")
QUEUE_NAME = "lab-taskiq"
DEAD_LETTERS = f"{QUEUE_NAME}.dead_letter"  # taskiq-aio-pika's; failed tasks are acknowledged, none lands there


def make_broker(settings: Settings) -> AioPikaBroker:
    return AioPikaBroker(
        settings.rabbitmq_url,
        qos=settings.concurrency_for(QUEUE),
        exchange=Exchange(name=QUEUE_NAME),
        task_queues=[RabbitQueue(name=QUEUE_NAME, type=QueueType.CLASSIC)],
        dead_letter_queue=RabbitQueue(name=DEAD_LETTERS, type=QueueType.CLASSIC),
        # aio-pika's connect: the first one fails within it (the API's 503);
        # later, its robust connection reconnects by itself.
        timeout=settings.redis_timeout_s,
        reconnect_interval=1.0,
    )


class Producer(taskiq_queue.Producer):
    def __init__(self, settings: Settings):
        super().__init__(settings, make_broker(settings))


# The backlog (the queue monitor) and `make purge`: the queue's ready messages on RabbitMQ.
depth, purge = rabbitmq.backlog_functions((QUEUE_NAME,))


async def startup(settings: Settings, broker: AioPikaBroker) -> None:
    """Connects once RabbitMQ answers, declaring the exchange and queues."""
    await rabbitmq.wait_until_answers(settings)
    await broker.startup()


def main() -> None:
    setup_logging()
    settings = get_settings()
    broker = make_broker(settings)
    asyncio.run(run(settings, QUEUE, broker, partial(startup, settings, broker)))


if __name__ == "__main__":
    main()
