"""Celery with the RabbitMQ broker: the same app, task, producer and worker as
workers/celery_queue.py (Celery on Redis), only the broker differs, through
Celery's own AMQP transport (kombu over py-amqp).

`apply_async` publishes to the direct exchange `lab-celery`, bound to the
durable classic queue `lab-celery` in RabbitMQ's default vhost, with publisher
confirms (the API's 202 once RabbitMQ has the message); the worker
consumes it with a prefetch of CELERY_CONCURRENCY x CELERY_PREFETCH_MULTIPLIER.

Delivery: `acks_late` with `reject_on_worker_lost`, as on Redis. A message not
acknowledged goes back to the queue as soon as the worker's connection closes
(a killed worker's tasks come back at once, not after a visibility timeout).
RabbitMQ's own `consumer_timeout` (30 min) bounds how long a task may hold one.

Start it with `python -m workers.celery_rabbitmq_queue`."""

# Before prometheus_client is imported anywhere: run as a program, the prefork
# children write their samples to files that the parent's /metrics adds up.
from lab.metrics_dir import OwnMetricsDir

_metrics_dir = OwnMetricsDir("celery", claim=__name__ == "__main__")

from functools import partial

from lab import rabbitmq
from lab.protocol import Queue
from lab.settings import Settings, get_settings
from workers import celery_queue
from workers.celery_queue import QUEUE_NAME, make_app

QUEUE = Queue("celery-rabbitmq")


def amqp_transport(settings: Settings) -> dict:
    return {
        # Publisher confirms: a publish returns once RabbitMQ has the message,
        # so the API's 202 means what a Redis reply means on Redis.
        "confirm_publish": True,
        # Every read and write gives up after REDIS_TIMEOUT_S (connecting too,
        # broker_connection_timeout), so a RabbitMQ outage turns into a fast
        # 503 as a Redis one does.
        "read_timeout": settings.redis_timeout_s,
        "write_timeout": settings.redis_timeout_s,
    }


app = make_app(get_settings(), get_settings().rabbitmq_url, amqp_transport(get_settings()))
app.conf.broker_connection_timeout = get_settings().redis_timeout_s


class Producer(celery_queue.Producer):
    def __init__(self, settings: Settings):
        super().__init__(settings, app, probe=partial(rabbitmq.answers, settings))


# The backlog (the queue monitor) and `make purge`: the queue's ready messages on RabbitMQ.
depth, purge = rabbitmq.backlog_functions((QUEUE_NAME,))


worker = celery_queue.Worker(app, QUEUE)
main = worker.main


if __name__ == "__main__":
    try:
        main()
    finally:
        _metrics_dir.remove()
