"""Huey: calling the task pushes a message (pickled) onto the Redis list
`huey.redis.lab` (RedisHuey); the consumer runs HUEY_WORKERS (default
CONCURRENCY) workers of Huey's default type, threads, each taking one message
at a time with BRPOP. HUEY_WORKER_TYPE=process runs them as forked processes
instead.

RedisHuey, not one of its variants: RedisExpireHuey only makes stored results
expire (the lab stores none: the task returns None, which Huey does not
store), and PriorityRedisHuey keeps the queue in a sorted set for priorities
the lab does not use.

The task body is async; Huey refuses `async def` tasks (its documentation:
wrap the coroutine with asyncio.run()). With threads, one event loop per
consumer runs in a thread of its own: a worker thread hands it a body that
awaits and waits for it, and runs a body that never awaits itself, settled
with one blocking call (TaskRunner.run_loop_free, on a runner of its own per
thread), as Celery's prefork children do; handing every task to the loop cost
the worker about half its throughput (docs/hot-path.md). With processes, each
process runs one task at a time and the runner's loop only for a body that
awaits (TaskRunner.run_blocking).

Delivery: BRPOP takes the message off the list; Huey has no acknowledgement.
On SIGTERM (Huey's `graceful_signal="TERM"` here; its default makes SIGTERM
an immediate stop that interrupts running tasks) the workers take no more
messages and running tasks get SHUTDOWN_GRACE_S (Huey's `shutdown_timeout`)
to finish; a worker holds nothing it has not started. A consumer killed with
SIGKILL loses the tasks it was running, at most HUEY_WORKERS per replica, and
a message whose BRPOP reply was lost as Redis restarted is lost too, as is
one taken just before the restart whose revocation check (an HMGET) then
failed: Huey delivers at most once (its maintainer in coleifer/huey#559,
#571, #844).
A task still running when the grace has passed is interrupted, and enqueued
again from Huey's SIGNAL_INTERRUPTED, as Huey's documentation does it (its
signals are its monitoring hooks); the ledger counts a second execution as a
duplicate. No retries of a task that raised (Huey's default `retries=0`).
"""

import os
import shutil
import tempfile

_own_metrics_dir: tuple[int, str] | None = None  # (the consumer's pid, a directory it made)
if __name__ == "__main__" and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    from lab.settings import get_settings as _settings

    if _settings().huey_worker_type == "process":
        # Before prometheus_client is imported anywhere: the worker processes
        # write their samples to files that the consumer's /metrics adds up.
        _own_metrics_dir = (os.getpid(), tempfile.mkdtemp(prefix="lab-huey-metrics-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _own_metrics_dir[1]

import logging
import multiprocessing
import threading
from functools import partial

from huey import RedisHuey
from huey.api import TaskWrapper
from huey.signals import SIGNAL_INTERRUPTED
from redis import ConnectionPool

from lab.blocking_publish import BlockingPublisher
from lab.heap import freeze_startup_heap
from lab.key_purge import delete_keys
from lab.metrics import flush, touch_task_series
from lab.process_loop import ProcessLoop
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import sync_client, worker_pool
from lab.settings import Settings, get_settings
from lab.worker_runtime import serve_worker_metrics, service_name, setup_logging

QUEUE = Queue("huey")
QUEUE_NAME = "lab"  # keys huey.redis.lab (LIST of messages), huey.schedule.lab, huey.results.lab
QUEUE_KEY = f"huey.redis.{QUEUE_NAME}"
PUBLISH_THREADS = 10
log = logging.getLogger("lab.huey")


def make_huey(pool: ConnectionPool) -> tuple[RedisHuey, TaskWrapper]:
    """A RedisHuey on `pool` and the lab's task registered on it (a message
    names the task by module and name: the API's and the worker's agree)."""
    huey = RedisHuey(QUEUE_NAME, connection_pool=pool)
    return huey, huey.task(timeout=get_settings().task_timeout_s)(lab_task)


class Producer:
    def __init__(self, settings: Settings):
        # The client has the API's short timeouts.
        self.huey, self.task = make_huey(sync_client(settings).connection_pool)
        self.publisher = BlockingPublisher(settings, PUBLISH_THREADS, "huey")

    async def start(self) -> None:
        pass

    async def enqueue(self, msg: TaskMessage) -> None:
        # Calling the task enqueues it. Its id is the lab's task id, as RQ's job
        # id and Dramatiq's message id are: Huey's logs and signals name the
        # ledger's task, and no uuid4 is made per call (docs/hot-path.md).
        await self.publisher.publish(partial(self.task, msg.payload(), id=msg.task_id))

    async def close(self) -> None:
        await self.publisher.close()


async def depth(redis) -> int:
    return await redis.llen(QUEUE_KEY)


async def purge(redis) -> int:
    """(make purge, no worker running) The queue and its schedule."""
    return await delete_keys(redis, (QUEUE_KEY, f"huey.schedule.{QUEUE_NAME}"))


# Worker: one event loop per worker process (lab/process_loop.py).
class _HueyLoop(ProcessLoop):
    """Huey's thread workers hand the loop only a body that awaits, and run
    the others themselves, each on a runner of its own (TaskRunner.for_thread)."""

    def __init__(self) -> None:
        super().__init__(QUEUE, lambda settings: settings.huey_worker_type == "thread")
        self._threads = threading.local()  # each worker thread's runner

    def run(self, message: dict) -> None:
        own = getattr(self._threads, "runner", None)  # set on this worker thread's first task
        if own is None:
            _, runner = self.get()
            if not self.threaded:
                return super().run(message)
            own = self._threads.runner = runner.for_thread()
        msg = TaskMessage.validate(message)
        if own.is_loop_free(msg):
            # Fast path: in this worker thread, not handed to the loop's (docs/hot-path.md).
            own.run_loop_free(msg)
        else:
            self._call(self.runner.run(msg))  # on the loop's thread; this one waits


process_loop = _HueyLoop()


def lab_task(message: dict) -> None:
    process_loop.run(message)


def _child_started() -> None:
    # Huey's worker processes are daemonic, and multiprocessing refuses a
    # daemonic process children, which cpu/process needs. Huey supervises
    # them (a dead one is replaced), so each may own a process pool.
    multiprocessing.current_process()._config.pop("daemon", None)  # type: ignore[attr-defined]  # private: not typed
    freeze_startup_heap(collect=False)


def _child_stopped() -> None:
    process_loop.stop()
    flush()  # this process's last updates into its files, which outlive it
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())


def _requeue_interrupted(huey: RedisHuey):
    def requeue(signal: str, task, *args, **kwargs) -> None:
        log.warning("task %s interrupted by the consumer's stop: enqueued again", task.id)
        huey.enqueue(task)

    return requeue


def main() -> None:
    setup_logging()
    settings = get_settings()
    # No read timeout, as Huey's own pool: BRPOP returns every second (Huey's
    # read_timeout) and a restarted Redis closes the socket (worker_pool).
    huey, _ = make_huey(worker_pool(settings))
    huey.signal(SIGNAL_INTERRUPTED)(_requeue_interrupted(huey))
    if settings.huey_worker_type == "process":
        huey.on_startup()(_child_started)
        huey.on_shutdown()(_child_stopped)
    consumer = huey.create_consumer(
        workers=settings.concurrency_for(QUEUE),
        worker_type=settings.huey_worker_type,
        graceful_signal="TERM",
        shutdown_timeout=settings.shutdown_grace_s,
    )
    freeze_startup_heap()  # before worker processes fork: they inherit the frozen start-up objects
    touch_task_series([QUEUE])
    server = serve_worker_metrics(service_name(settings, QUEUE), settings)
    try:
        consumer.run()
    finally:
        process_loop.stop()  # the thread workers ran their tasks in this process
        if server is not None:
            server.stop()


if __name__ == "__main__":
    import importlib

    try:
        # Through the module's own name: a message names its task by module.
        importlib.import_module("workers.huey_queue").main()
    finally:
        if _own_metrics_dir is not None and _own_metrics_dir[0] == os.getpid():
            shutil.rmtree(_own_metrics_dir[1], ignore_errors=True)
