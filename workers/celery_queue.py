"""Celery with the Redis broker: `apply_async` pushes onto a Redis list; the
worker (prefork by default, CELERY_POOL) consumes it.

The task bodies are async. Celery 5 cannot await them, so each worker process
(each prefork child, or the one process of the threads/solo pools) makes one
long-lived event loop the first time it runs a task: after the fork, never
before, and never per task. A prefork or solo process runs each task that
awaits on it, and the others (io/simple without IO_LATENCY_MS, io/sync,
cpu/simple) without it, settled with a blocking call; the threads pool runs
the loop in a thread of its own and submits every task to it (ProcessLoop).

Delivery: `acks_late` with `reject_on_worker_lost`: a task is acknowledged only
when it finished, and goes back to the queue if its process dies. If the whole
worker dies, its unacknowledged tasks are delivered again once the Redis
transport's visibility timeout (2 x TASK_TIMEOUT_S) has passed. Task events
are on (`-E`), so Flower shows every task. Knobs that change the result:
CELERY_CONCURRENCY (default CONCURRENCY), CELERY_POOL,
CELERY_PREFETCH_MULTIPLIER (Celery's default 4).

Start it with `python -m workers.celery_queue`: the prefork pool's metrics
are then collected from every child process.
"""

# Before prometheus_client is imported anywhere: run as a program, the prefork
# children write their samples to files that the parent's /metrics adds up.
from lab.metrics_dir import OwnMetricsDir

_metrics_dir = OwnMetricsDir("celery", claim=__name__ == "__main__")

import multiprocessing
import os
from functools import partial

from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown

from lab.blocking_publish import BlockingPublisher, Probe
from lab.heap import freeze_startup_heap
from lab.key_purge import delete_keys
from lab.metrics import flush, touch_task_series
from lab.metrics_server import MetricsServer
from lab.process_loop import ProcessLoop
from lab.protocol import Queue, TaskMessage
from lab.settings import Settings, get_settings
from lab.worker_runtime import serve_worker_metrics, service_name, setup_logging

QUEUE = Queue("celery")
QUEUE_NAME = "lab-celery"  # the Redis LIST kombu pushes to
TASK_NAME = "lab.task"


def make_app(settings: Settings, broker_url: str, transport_options: dict) -> Celery:
    """The Celery app of either broker: everything but the broker is the same."""
    app = Celery("lab", broker=broker_url)
    app.conf.update(
        task_default_queue=QUEUE_NAME,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_time_limit=settings.task_timeout_s,
        worker_prefetch_multiplier=settings.celery_prefetch_multiplier,
        worker_send_task_events=settings.celery_task_events,
        # No task-sent event: it is a second publish for every task
        # (docs/hot-path.md). Flower shows each task from task-received on.
        task_send_sent_event=False,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        broker_transport_options=transport_options,
    )
    return app


def redis_transport(settings: Settings) -> dict:
    return {
        # A task not acknowledged within this time is delivered again (a
        # killed worker's tasks come back then; kombu's default is an hour).
        # It must exceed the longest task plus its wait in the prefetch
        # buffer, or long tasks run twice.
        "visibility_timeout": 2 * settings.task_timeout_s,
        "socket_timeout": settings.redis_timeout_s,
        "socket_connect_timeout": settings.redis_timeout_s,
    }


app = make_app(get_settings(), get_settings().redis_url, redis_transport(get_settings()))


class Producer:
    """kombu's publish is blocking I/O: made on the loop, or with
    BLOCKING_PUBLISH=threads in threads of its own (as many as kombu has
    producer connections, broker_pool_limit), behind a breaker that answers
    503 at once while the broker is away (lab/blocking_publish.py)."""

    def __init__(self, settings: Settings, celery_app: Celery | None = None, probe: Probe | None = None):
        """celery_app, probe: another broker's app and how to ask that broker whether it answers."""
        self.app = celery_app or app
        self.publisher = BlockingPublisher(
            settings, self.app.conf.broker_pool_limit or 10, "celery", start_down=True, probe=probe
        )

    async def start(self) -> None:
        pass

    async def enqueue(self, msg: TaskMessage) -> None:
        # retry=False: an unreachable broker raises at once instead of
        # retrying; the transport's socket timeouts bound the rest.
        await self.publisher.publish(
            partial(
                self.app.send_task,
                TASK_NAME,
                args=[msg.payload()],
                task_id=msg.task_id,
                retry=False,
                argsrepr=_argsrepr(msg),
                kwargsrepr="{}",
            )
        )

    async def close(self) -> None:
        await self.publisher.close()


def _argsrepr(msg: TaskMessage) -> str:
    """What Flower and the logs show as the task's arguments. Given, because
    Celery's own (saferepr of the message dict) is a large part of a
    publish's CPU (docs/hot-path.md)."""
    return f"[{msg.endpoint} value={msg.value} run={msg.run} task_id={msg.task_id}]"


async def depth(redis) -> int:
    return await redis.llen(QUEUE_NAME)


async def purge(redis) -> int:
    """(make purge, no worker running) The queue's lists (one per priority step) and the
    messages delivered and not acknowledged (kombu's `unacked`: only this queue's worker
    uses it). The exchange's bindings stay: without them a publish goes nowhere."""
    return await delete_keys(redis, (f"{QUEUE_NAME}*", "unacked", "unacked_index"))


class Worker:
    """The worker side of one broker's Celery app: its task, its signal
    handlers and its command. One event loop per worker process
    (lab/process_loop.py); the threads pool submits every task to it.

    Celery's signals are global: `main()` connects the handlers, so a process
    that imports the adapters of both brokers (the API) runs none of them."""

    def __init__(self, celery_app: Celery, queue: Queue):
        self.app = celery_app
        self.queue = queue
        self.process_loop = ProcessLoop(queue, lambda settings: settings.celery_pool == "threads")
        self.metrics_server: MetricsServer | None = None
        process_loop = self.process_loop

        @celery_app.task(name=TASK_NAME)
        def lab_task(message: dict) -> None:
            process_loop.run(message)

    def connect(self) -> None:
        # weak=False: the handlers are bound methods, which a weak reference would not keep.
        worker_init.connect(self._freeze_before_fork, weak=False)
        worker_process_init.connect(self._allow_process_pool, weak=False)
        worker_process_shutdown.connect(self._child_exit, weak=False)
        worker_ready.connect(self._serve_metrics, weak=False)
        worker_shutdown.connect(self._stop, weak=False)

    def _freeze_before_fork(self, **_) -> None:
        # In the parent, before the prefork pool forks: its children inherit the
        # frozen start-up objects and no collection of theirs walks them.
        freeze_startup_heap()

    def _allow_process_pool(self, **_) -> None:
        # Prefork children are daemonic processes, and multiprocessing refuses to
        # let a daemonic process start children ("daemonic processes are not allowed
        # to have children"), which is what cpu/process needs. This child is a pool
        # worker that Celery itself supervises, so it may own a process pool.
        multiprocessing.current_process()._config.pop("daemon", None)  # type: ignore[attr-defined]  # private: not typed
        freeze_startup_heap(collect=False)  # what the child made as it started

    def _child_exit(self, pid=None, **_) -> None:
        self.process_loop.stop()
        flush()  # this child's last updates into its files, which outlive it
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid or os.getpid())

    def _serve_metrics(self, **_) -> None:
        # In the parent, once the worker consumes: /metrics answering means ready.
        settings = get_settings()
        touch_task_series([self.queue])
        self.metrics_server = serve_worker_metrics(service_name(settings, self.queue), settings)

    def _stop(self, **_) -> None:
        self.process_loop.stop()  # the solo and threads pools run tasks in this process
        if self.metrics_server is not None:
            self.metrics_server.stop()

    def main(self) -> None:
        setup_logging()
        settings = get_settings()
        self.connect()
        self.app.worker_main(
            [
                "worker",
                f"--pool={settings.celery_pool}",
                f"--concurrency={settings.concurrency_for(self.queue)}",
                f"--queues={QUEUE_NAME}",
                *(["--events"] if settings.celery_task_events else []),
                f"--loglevel={settings.library_log_level}",
                f"--hostname={service_name(settings, self.queue)}@%h",
            ]
        )


worker = Worker(app, QUEUE)
main = worker.main


if __name__ == "__main__":
    try:
        main()
    finally:
        _metrics_dir.remove()
