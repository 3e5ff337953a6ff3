"""Dramatiq with its RabbitMQ broker (`RabbitmqBroker`, over pika): the same
actor, producer and worker as workers/dramatiq_queue.py (Dramatiq on Redis),
only the broker differs.

`broker.enqueue` publishes the message to the durable queue `lab` (its delay
and dead-letter queues `lab.DQ` and `lab.XQ` beside it) with publisher
confirms on: the API answers 202 once RabbitMQ has confirmed the message, as
a Redis reply confirms it on Redis. The worker's consumer takes messages with
a prefetch of twice its threads (Dramatiq's default), its worker threads run
them; a message is acknowledged after the task ran, success or failure.

Delivery: a killed worker's unacknowledged messages go back to the queue as
soon as its connection closes. Concurrency: DRAMATIQ_THREADS, as on Redis.

Start it with `python -m workers.dramatiq_rabbitmq_queue`."""

from functools import partial
from urllib.parse import urlencode

from dramatiq.brokers.rabbitmq import RabbitmqBroker

from lab import rabbitmq
from lab.protocol import Queue
from lab.settings import Settings, get_settings
from lab.worker_runtime import setup_logging
from workers import dramatiq_queue
from workers.dramatiq_queue import QUEUE_NAME, run_worker

QUEUE = Queue("dramatiq-rabbitmq")


def api_url(settings: Settings) -> str:
    """RABBITMQ_URL with the API's bounds: one connection attempt, and every
    socket operation given up after REDIS_TIMEOUT_S, so a RabbitMQ outage is a
    fast 503 as a Redis one is."""
    bounds = {
        "connection_attempts": 1,
        "socket_timeout": settings.redis_timeout_s,
        "stack_timeout": 2 * settings.redis_timeout_s,
        "blocked_connection_timeout": settings.redis_timeout_s,
    }
    return f"{settings.rabbitmq_url}?{urlencode(bounds)}"


class Producer(dramatiq_queue.Producer):
    def __init__(self, settings: Settings):
        broker = RabbitmqBroker(url=api_url(settings), confirm_delivery=True, middleware=[])
        super().__init__(settings, broker, probe=partial(rabbitmq.answers, settings))


# The backlog (the queue monitor) and `make purge`: the ready messages of the
# queue and its delay queue on RabbitMQ; the dead letters (`lab.XQ`) are failed
# tasks, counted already.
QUEUES = (QUEUE_NAME, f"{QUEUE_NAME}.DQ")
depth, purge = rabbitmq.backlog_functions(QUEUES)


def main() -> None:
    setup_logging()
    # The worker's own connection has pika's defaults (heartbeats, no short
    # socket timeout); Dramatiq starts its consumer again after a connection error.
    run_worker(QUEUE, RabbitmqBroker(url=get_settings().rabbitmq_url))


if __name__ == "__main__":
    main()
