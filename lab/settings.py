"""Every knob of the lab, read from the environment (and `.env`).

Each field is an environment variable of the same name in upper case; `.env.example`
lists them all with their defaults and meaning.
"""

from functools import lru_cache
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from lab.queues import BY_NAME


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    # Where everything lives: broker for every queue, task work and the ledger.
    redis_url: str = "redis://localhost:6379/0"
    # The broker of the queues on RabbitMQ (lab/queues.py: transport "rabbitmq");
    # their tasks are counted in the ledger on Redis all the same.
    rabbitmq_url: str = "amqp://localhost:5672/%2F"
    # The broker of the queues on PostgreSQL (transport "postgres"), counted on Redis too.
    postgres_url: str = "postgresql://localhost:5432/lab"
    # Every Redis call made while serving a request (ledger, brokers) gives up
    # after this long, so a broker outage turns into a fast 503, not a hang.
    redis_timeout_s: float = Field(1.0, gt=0)

    # API behaviour.
    enqueue_mode: Literal["await", "after-response"] = "await"
    # Where the blocking publish of Celery, Dramatiq, RQ and Huey runs (lab/blocking_publish.py).
    blocking_publish: Literal["inline", "threads"] = "inline"
    max_body_bytes: int = Field(4096, ge=64)

    # Event-loop experiments (POST /api/v1/upstream/...).
    upstream_url: str = "http://localhost:8001/"
    upstream_timeout_s: float = Field(10.0, gt=0)
    threadpool_tokens: int = Field(40, ge=1)  # threads for run_in_threadpool and `def` handlers
    api_workers: int = Field(1, ge=1)  # server processes of the API (python -m services.api)
    upstream_latency_ms: int = Field(180, ge=0)  # the upstream stand-in's answer time...
    upstream_jitter_ms: int = Field(0, ge=0)  # ...plus up to this much, at random
    probe_target: str = "http://localhost:8000/healthz"  # what the liveness probe polls
    probe_rate: float = Field(20, gt=0)  # probes per second
    probe_timeout_s: float = Field(1.0, gt=0)
    api_host: str = "0.0.0.0"  # where `python -m services.api` listens (inside its container)
    api_listen_port: int = 8000

    # Task work, identical for every queue.
    cpu_work: int = Field(1_000_000, ge=0)
    io_latency_ms: int = Field(0, ge=0)
    thread_pool_size: int = Field(3, ge=1)
    process_pool_size: int = Field(3, ge=1)

    # Concurrency per worker process: one knob for all, overrides per queue.
    concurrency: int = Field(3, ge=1)
    arq_max_jobs: int | None = Field(None, ge=1)
    saq_concurrency: int | None = Field(None, ge=1)
    faststream_max_workers: int | None = Field(None, ge=1)
    celery_concurrency: int | None = Field(None, ge=1)
    taskiq_max_async_tasks: int | None = Field(None, ge=1)
    dramatiq_threads: int | None = Field(None, ge=1)
    streaq_concurrency: int | None = Field(None, ge=1)
    rq_concurrency: int | None = Field(None, ge=1)  # worker processes of RQ's WorkerPool
    huey_workers: int | None = Field(None, ge=1)
    docket_concurrency: int | None = Field(None, ge=1)
    procrastinate_concurrency: int | None = Field(None, ge=1)
    pgqueuer_concurrency: int | None = Field(None, ge=1)

    # Library-specific knobs that change the result (docs/queues.md).
    arq_poll_delay: float = Field(0.5, gt=0)
    saq_web: bool = False
    saq_web_port: int = 8082
    faststream_channel: Literal["stream", "pubsub"] = "stream"
    # A FastStream message left unacknowledged this long (its replica stopped or
    # died) is taken over by another consumer. Must exceed the longest task.
    faststream_reclaim_s: float = Field(60, gt=0)
    # A taskiq stream entry left unacknowledged this long is claimed by another
    # reader (as FASTSTREAM_RECLAIM_S). Must exceed the longest task.
    taskiq_reclaim_s: float = Field(60, gt=0)
    # A streaq stream entry a dead worker held is claimed by another after this
    # long idle (streaq's idle_timeout; its live workers keep theirs claimed).
    streaq_idle_timeout_s: float = Field(60, gt=0)
    # RQ's Worker forks a work horse per job (RQ's default); SimpleWorker runs it in the worker.
    rq_worker_class: Literal["Worker", "SimpleWorker"] = "Worker"
    # Huey's consumer runs its workers as threads (Huey's default) or forked processes.
    huey_worker_type: Literal["thread", "process"] = "thread"
    # A docket worker whose slots are all busy sleeps this long before it looks
    # for finished tasks (the `docket worker` command's default; its Worker
    # class's is 0.25 s): with short tasks, DOCKET_CONCURRENCY tasks an interval at most.
    docket_minimum_check_interval_s: float = Field(0.1, gt=0)
    # A docket stream entry left idle this long (its worker stopped or died) is
    # delivered to another worker (docket's redelivery_timeout; its live
    # workers renew the leases of theirs, every quarter of it, but not through a
    # stop's grace): more than SHUTDOWN_GRACE_S plus a quarter of itself.
    docket_redelivery_timeout_s: float = Field(60, gt=0)
    celery_pool: Literal["prefork", "threads", "solo"] = "prefork"
    celery_prefetch_multiplier: int = Field(4, ge=1)
    # Task events (-E): what Flower shows tasks from; three publishes a task, on the worker.
    celery_task_events: bool = True

    # The same time limit for one task on every queue (arq's default is 300 s,
    # SAQ's 10 s). It is also each queue's lease: a dead worker's tasks are run
    # again after about this long (arq: +10 s; SAQ: + its 60 s sweep; Celery's
    # visibility timeout is twice it). Tasks here take seconds at most.
    task_timeout_s: int = Field(60, ge=1)
    # How long a worker waits for in-flight tasks on SIGTERM before giving them back.
    shutdown_grace_s: int = Field(20, ge=0)

    # Observability. Queue libraries log every task at INFO, which under a small
    # CPU limit costs about as much as the task itself (docs/hot-path.md): their
    # loggers use this level.
    library_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    metrics_port: int = 9000
    service_name: str = ""
    loop_lag_interval_s: float = Field(0.25, gt=0)
    queue_depth_interval_s: float = Field(1.0, gt=0)

    def concurrency_for(self, queue: str) -> int:
        """CONCURRENCY, or the queue's own knob (lab/queues.py names it) when set."""
        broker = BY_NAME.get(queue)
        override = getattr(self, broker.concurrency_knob.lower()) if broker else None
        return override or self.concurrency


@lru_cache
def get_settings() -> Settings:
    return Settings()
