"""Every broker queue of the lab, in one table: the API's `queue` path parameter,
the queue monitor, the experiments (labctl: `make load|chaos|bench|results`), the tests and
the README's checks all read it. A new queue is an adapter module in `workers/`,
its row here, its service in docker-compose.yml (plus its scrape job in
prometheus/prometheus.yml) and its bare counterpart in services/bare/queues.py.

Each adapter module has a `Producer` (lab/protocol.py's, used by the API), `depth(redis)` (used by
the queue monitor), `purge(redis)` (services/purge.py, `make purge`) and `main()`
(its worker: `python -m <module>`).

This file is plain data: importing it imports no queue library, and nothing of
workers/; `adapter(name)` imports one adapter module by its dotted name."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from types import ModuleType


@dataclass(frozen=True)
class Broker:
    name: str  # the queue's name everywhere: path parameter, `queue` label, compose service, Prometheus job
    module: str  # its adapter
    concurrency_knob: str  # the env var that overrides CONCURRENCY for this queue's worker
    knobs: tuple[str, ...] = ()  # other env vars of its worker that change a result (kept in run records)
    loggers: tuple[str, ...] = ()  # the library's loggers, set to LIBRARY_LOG_LEVEL
    # The tasks a killed worker was running are lost, not run again: the
    # library takes a message off the queue as it starts it and has no
    # acknowledgement (Huey). Every other queue delivers at least once.
    at_most_once: bool = False
    # Messages a worker killed outright (SIGKILL, its node's death) can lose
    # although the queue acknowledges: those it has taken off the broker and
    # not yet recorded as its own. kombu's Redis transport pops a message
    # (BRPOP) and only then, in a second command, writes it to its hash of
    # unacknowledged messages (celery/celery#7950): one fetch at a time, so
    # at most one message a killed worker. The others take a message in one
    # atomic step (a stream group's read, BLMOVE, a script) or from a broker
    # that returns it when the connection closes.
    lost_in_fetch: int = 0
    # What carries its tasks: "redis" (REDIS_URL, which also holds the ledger),
    # "rabbitmq" (RABBITMQ_URL) or "postgres" (POSTGRES_URL). The broker's compose service has that name,
    # and so has the profile of every service of another transport than Redis.
    transport: str = "redis"

    @property
    def limits_prefix(self) -> str:
        """<PREFIX>_CPUS / <PREFIX>_MEM override WORKER_CPUS / WORKER_MEM for its service."""
        return self.name.upper().replace("-", "_")


BROKERS: tuple[Broker, ...] = (
    Broker("arq", "workers.arq_queue", "ARQ_MAX_JOBS", ("ARQ_POLL_DELAY",), ("arq",)),
    Broker("saq", "workers.saq_queue", "SAQ_CONCURRENCY", (), ("saq", "aiohttp.access")),
    Broker(
        "faststream", "workers.faststream_queue", "FASTSTREAM_MAX_WORKERS", ("FASTSTREAM_CHANNEL",), ("faststream",)
    ),
    Broker(
        "celery",
        "workers.celery_queue",
        "CELERY_CONCURRENCY",
        ("CELERY_POOL", "CELERY_PREFETCH_MULTIPLIER", "CELERY_TASK_EVENTS"),
        ("celery", "kombu"),
        lost_in_fetch=1,
    ),
    Broker("taskiq", "workers.taskiq_queue", "TASKIQ_MAX_ASYNC_TASKS", ("TASKIQ_RECLAIM_S",), ("taskiq",)),
    Broker("dramatiq", "workers.dramatiq_queue", "DRAMATIQ_THREADS", (), ("dramatiq",)),
    Broker("streaq", "workers.streaq_queue", "STREAQ_CONCURRENCY", ("STREAQ_IDLE_TIMEOUT_S",), ("streaq",)),
    Broker("rq", "workers.rq_queue", "RQ_CONCURRENCY", ("RQ_WORKER_CLASS",), ("rq",)),
    Broker("huey", "workers.huey_queue", "HUEY_WORKERS", ("HUEY_WORKER_TYPE",), ("huey",), at_most_once=True),
    Broker(
        "celery-rabbitmq",
        "workers.celery_rabbitmq_queue",
        "CELERY_CONCURRENCY",
        ("CELERY_POOL", "CELERY_PREFETCH_MULTIPLIER", "CELERY_TASK_EVENTS"),
        ("celery", "kombu", "amqp"),
        transport="rabbitmq",
    ),
    Broker(
        "dramatiq-rabbitmq",
        "workers.dramatiq_rabbitmq_queue",
        "DRAMATIQ_THREADS",
        (),
        ("dramatiq", "pika"),
        transport="rabbitmq",
    ),
    Broker(
        "faststream-rabbitmq",
        "workers.faststream_rabbitmq_queue",
        "FASTSTREAM_MAX_WORKERS",
        (),
        ("faststream", "aio_pika", "aiormq"),
        transport="rabbitmq",
    ),
    Broker(
        "taskiq-rabbitmq",
        "workers.taskiq_rabbitmq_queue",
        "TASKIQ_MAX_ASYNC_TASKS",
        (),
        ("taskiq", "aio_pika", "aiormq"),
        transport="rabbitmq",
    ),
    Broker(
        "saq-postgres",
        "workers.saq_postgres_queue",
        "SAQ_CONCURRENCY",
        (),
        ("saq", "psycopg", "psycopg.pool"),
        transport="postgres",
    ),
    Broker(
        "procrastinate",
        "workers.procrastinate_queue",
        "PROCRASTINATE_CONCURRENCY",
        (),
        ("procrastinate", "psycopg", "psycopg.pool"),
        transport="postgres",
    ),
    Broker("pgqueuer", "workers.pgqueuer_queue", "PGQUEUER_CONCURRENCY", (), ("pgqueuer",), transport="postgres"),
    Broker(
        "docket",
        "workers.docket_queue",
        "DOCKET_CONCURRENCY",
        ("DOCKET_MINIMUM_CHECK_INTERVAL_S", "DOCKET_REDELIVERY_TIMEOUT_S"),
        ("docket",),
    ),
)
BROKER_NAMES: tuple[str, ...] = tuple(b.name for b in BROKERS)
BY_NAME: dict[str, Broker] = {b.name: b for b in BROKERS}
# Every transport but Redis is a compose profile of its name: its broker and its queues' workers.
BROKER_PROFILES: tuple[str, ...] = tuple(sorted({b.transport for b in BROKERS} - {"redis"}))

# Dramatiq's housekeeping (requeueing a dead worker's messages) runs on this
# many of a million Redis calls of a broker: 100000 = 10 %, a hundred times
# Dramatiq's default. An idle worker calls Redis once or twice a second, so a
# killed worker's tasks come back seconds after its heartbeat expired, not
# many minutes later. Each run costs a few Redis calls (and a KEYS over the
# dead workers' ack sets). The lab's worker (workers/dramatiq_queue.py) and
# the bench's bare one (services/bare/queues.py) both use it.
DRAMATIQ_MAINTENANCE_CHANCE = 100_000

# RQ's maintenance (abandoned jobs of dead workers retried, jobs stuck in the
# intermediate queue taken out) runs on one worker at a time, every
# RQ_MAINTENANCE_INTERVAL_S here (RQ's default 600 s); an idle worker only
# gets to it between two blocking dequeues, which last its TTL minus 15 s
# (RQ's default TTL 420 s: 405 s), 10 s here. A dead worker's job is
# abandoned once its execution's heartbeat expired, TASK_TIMEOUT_S + 60 s
# after it started at most (RQ's own margin), so it comes back seconds after
# that, not ten minutes or more later. Each pass costs a few Redis calls. The
# lab's worker (workers/rq_queue.py) and the bench's bare one
# (services/bare/queues.py) both use them.
RQ_MAINTENANCE_INTERVAL_S = 10
RQ_WORKER_TTL_S = 25
# A pass holds RQ's maintenance lock, which a live worker deletes as it ends; one
# killed in its pass leaves it to expire, after 899 s in RQ (sized for its 600 s
# interval), and no worker's maintenance runs meanwhile: the lab's worker
# (workers/rq_queue.py) lets it expire after this.
RQ_MAINTENANCE_LOCK_S = 60


@cache
def adapter(name: str) -> ModuleType:
    """The adapter module of queue `name`, imported on first use."""
    return importlib.import_module(BY_NAME[name].module)
