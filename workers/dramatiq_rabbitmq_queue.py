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

import asyncio
import threading
from urllib.parse import urlencode

import pika
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from pika.exceptions import ChannelClosedByBroker

from lab.protocol import Queue
from lab.settings import Settings, get_settings
from lab.worker_runtime import setup_logging
from workers import dramatiq_queue
from workers.dramatiq_queue import QUEUE_NAME, run_worker

QUEUE = Queue("dramatiq-rabbitmq")
NOT_FOUND = 404


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


def _connect() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(api_url(get_settings())))


def _answers_now() -> None:
    _connect().close()


async def _answers() -> None:
    # Bounded here too: resolving the broker's name is outside the socket's timeouts.
    await asyncio.wait_for(asyncio.to_thread(_answers_now), 2 * get_settings().redis_timeout_s)


class Producer(dramatiq_queue.Producer):
    def __init__(self, settings: Settings):
        broker = RabbitmqBroker(url=api_url(settings), confirm_delivery=True, middleware=[])
        super().__init__(settings, broker, probe=_answers)


_sampling = threading.Lock()


def _on_queues(action) -> int:
    """action(channel, queue name) -> int over the queue and its delay queue, on
    a connection of its own; a queue not declared yet counts 0. One at a
    time: a thread still resolving an absent broker's name (the profile not
    started) is not joined by another every second."""
    if not _sampling.acquire(blocking=False):
        raise TimeoutError("the last call has not returned yet")
    try:
        connection = _connect()
        try:
            total = 0
            for name in (QUEUE_NAME, f"{QUEUE_NAME}.DQ"):
                channel = connection.channel()
                try:
                    total += action(channel, name)
                    channel.close()
                except ChannelClosedByBroker as exc:  # the broker closed the channel
                    if exc.reply_code != NOT_FOUND:
                        raise
            return total
        finally:
            if connection.is_open:
                connection.close()
    finally:
        _sampling.release()


async def depth(redis) -> int:
    """The ready messages of the queue and its delay queue (those a worker
    prefetched are not counted, as on Redis). RabbitMQ, not Redis, knows it:
    the ledger's client is not used."""
    return await asyncio.to_thread(
        _on_queues, lambda channel, name: channel.queue_declare(name, passive=True).method.message_count
    )


async def purge(redis) -> int:
    """(make purge, no worker running) The ready messages of the queue and its
    delay queue; those a worker held went back as its connection closed. The
    dead letters (`lab.XQ`) are failed tasks, counted already, and stay."""
    return await asyncio.to_thread(_on_queues, lambda channel, name: channel.queue_purge(name).method.message_count)


def main() -> None:
    setup_logging()
    # The worker's own connection has pika's defaults (heartbeats, no short
    # socket timeout); Dramatiq starts its consumer again after a connection error.
    run_worker(QUEUE, RabbitmqBroker(url=get_settings().rabbitmq_url))


if __name__ == "__main__":
    main()
