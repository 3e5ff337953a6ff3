"""RQ: `Queue.enqueue` pushes a job id onto the Redis list `rq:queue:lab` (the
job itself in the hash `rq:job:<id>`); RQ's WorkerPool runs RQ_CONCURRENCY
(default CONCURRENCY) worker processes, and each worker, RQ's default
`Worker`, forks a work horse for every job (RQ_WORKER_CLASS=SimpleWorker runs
the job in the worker process itself, no fork).

The task body is async. RQ runs an `async def` job with `asyncio.run()`: a new
event loop for every job, which would also drop the runner's asyncio Redis
connections after each job of a SimpleWorker. So the job is a plain function
that runs the lab's runner as Celery's solo and prefork children do
(TaskRunner.run_blocking): a body that never awaits runs without a loop and
settles with a blocking call; the others run on a loop of this process (in a
work horse, the horse's own: it lives for one job). The runner is made in each
worker process before any horse is forked, so a horse only inherits it.

Delivery: a worker moves a job id from the queue to `rq:queue:lab:intermediate`
(BLMOVE), then records the execution in the queue's StartedJobRegistry,
which the worker's heartbeat keeps alive while the job runs. On SIGTERM the
pool asks each worker for a warm shutdown: it finishes its running job and
takes no other (nothing is fetched ahead). When a worker dies its job stays
STARTED; once the execution's heartbeat has expired (TASK_TIMEOUT_S + 60 s
after it started at most) a live worker's maintenance (every
RQ_MAINTENANCE_INTERVAL_S here, RQ's default 600 s, lab/queues.py) treats it
as abandoned: it is run again since each job is enqueued with `Retry(max=2)`
(without retries RQ moves it to the FailedJobRegistry); the ledger counts a
second execution as a duplicate. Every process under the pool dies with its
parent (_die_with_parent), as in a container that is killed. A job
left in the intermediate queue (its BLMOVE's reply lost, or a kill between the
BLMOVE and the registry) is taken out by that maintenance a minute after it
first saw it, and retried the same way. A worker killed in its maintenance
pass leaves RQ's maintenance lock behind: it expires after
RQ_MAINTENANCE_LOCK_S here (LabQueue), 899 s in RQ. No result is kept (`result_ttl=0`: the
API never reads one). Redis going away does not end the pool: a worker that
gives up (RQ quits on a connection error outside its dequeue) is replaced by
the pool within a second.

The pool makes the runner and every task series before it forks its
workers, and serves /metrics from them: each worker sends what it counted
every second, and each horse once as it ends, through a pipe the pool reads
(lab.metrics.listen_to_children). Multi-process files would cost every
scrape a read of every process's files, and every horse the opening of its
own (docs/hot-path.md).

RQ's own monitoring: `rq info --url $REDIS_URL` (queues, workers, registries)
and rq-dashboard read the same keys (docs/queues.md).

The API's enqueue is redis-py's blocking call, made as Celery's is: on the
loop or in threads of its own (BLOCKING_PUBLISH), behind a breaker
(lab/blocking_publish.py).
"""

import asyncio
import ctypes
import logging
import os
import signal
from collections.abc import Callable
from functools import partial
from typing import Any

from rq import Queue as RQQueue
from rq import Retry, SimpleWorker, Worker
from rq.worker import BaseWorker
from rq.worker_pool import WorkerPool

from lab.blocking_publish import BlockingPublisher
from lab.heap import freeze_startup_heap
from lab.key_purge import delete_keys
from lab.metrics import Count, children_flush_at_exit, flush, listen_to_children
from lab.protocol import Queue, TaskMessage
from lab.queues import RQ_MAINTENANCE_INTERVAL_S, RQ_MAINTENANCE_LOCK_S, RQ_WORKER_TTL_S
from lab.redis_clients import sync_client, worker_client
from lab.runner import TaskRunner
from lab.settings import Settings, get_settings
from lab.worker_runtime import serve_worker_metrics, service_name, setup_logging

QUEUE = Queue("rq")
QUEUE_NAME = "lab"  # keys rq:queue:lab (LIST of job ids), rq:job:<id> (HASH), rq:wip:lab, ...
QUEUE_KEY = f"rq:queue:{QUEUE_NAME}"
TASK_NAME = "workers.rq_queue.lab_task"  # what a job names: imported by the worker
RETRIES = 2  # an abandoned job runs again (as SAQ's retries=2)
PUBLISH_THREADS = 10
log = logging.getLogger("lab.rq")


class Producer:
    def __init__(self, settings: Settings):
        # The client has the API's short timeouts.
        self.queue = RQQueue(QUEUE_NAME, connection=sync_client(settings))
        self.timeout = settings.task_timeout_s
        self.publisher = BlockingPublisher(settings, PUBLISH_THREADS, "rq")

    async def start(self) -> None:
        pass

    async def enqueue(self, msg: TaskMessage) -> None:
        await self.publisher.publish(
            partial(
                self.queue.enqueue,
                TASK_NAME,
                msg.payload(),
                job_id=msg.task_id,
                job_timeout=self.timeout,
                result_ttl=0,
                retry=Retry(max=RETRIES),
                # Given: RQ's own is the repr of the call's arguments, made per enqueue.
                description=f"lab_task {msg.endpoint} run={msg.run}",
            )
        )

    async def close(self) -> None:
        await self.publisher.close()


async def depth(redis) -> int:
    """Job ids no worker has taken yet."""
    return await redis.llen(QUEUE_KEY)


async def purge(redis) -> int:
    """(make purge, no worker running) The queue and its intermediate list, the started,
    scheduled and deferred registries, every job, and every execution (a job's and a
    dead worker's lists of them)."""
    registries = tuple(f"rq:{r}:{QUEUE_NAME}" for r in ("wip", "scheduled", "deferred"))
    executions = ("rq:execution:*", "rq:executions:*", "rq:worker:*:executions")
    return await delete_keys(redis, (f"{QUEUE_KEY}*", *registries, "rq:job:*", *executions))


# Worker: RQ's WorkerPool, RQ_CONCURRENCY workers, a runner per worker process.
_runner: TaskRunner | None = None
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None
_in_horse = False


# Looked up once, here: a work horse that made its own CDLL would write to
# pages it shares with its worker, and pay for each page copied, on every job.
_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux's PR_SET_PDEATHSIG).
    Run in every process forked under the pool (workers, horses, RQ's
    scheduler, a horse's process pool): a pool killed with SIGKILL takes them
    all with it, as a container's death does, instead of leaving them
    consuming."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def _process_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_pid
    if _loop is None or _loop_pid != os.getpid():
        _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
    return _loop


def lab_task(message: dict) -> None:
    if _runner is None:
        raise RuntimeError("the lab's RQ job runs only in the lab's RQ worker (python -m workers.rq_queue)")
    try:
        _runner.run_blocking(message, _process_loop)
    finally:
        if _in_horse:
            # The horse ends with os._exit: what it counted goes to the pool
            # now, and a process pool it made (cpu/process) must not outlive it.
            flush()
            pool = _runner.work._process_pool
            if pool is not None:
                pool.shutdown(wait=True)


class _LabWorker:
    """RQ's worker with the lab's maintenance interval and worker TTL
    (lab/queues.py). WorkerPool makes it with RQ's own arguments: the lab's
    are added here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("maintenance_interval", RQ_MAINTENANCE_INTERVAL_S)
        kwargs.setdefault("worker_ttl", RQ_WORKER_TTL_S)
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]  # a mixin: RQ's worker comes next in the MRO

    def work(self, *args: Any, **kwargs: Any) -> bool:
        try:
            return super().work(*args, **kwargs)  # type: ignore[misc]  # a mixin, as above
        finally:
            # A SimpleWorker ran tasks here: its pools must end before the
            # process does (multiprocessing waits for the process pool's
            # children at exit), and what it counted goes to the pool.
            if _runner is not None:
                _runner.work.close()
            flush()


class LabWorker(_LabWorker, Worker):
    """RQ's default worker: a horse per job, which sends its counts to the pool as it ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        children_flush_at_exit()  # a horse: no flusher thread

    def main_work_horse(self, job, queue) -> None:
        global _in_horse
        _in_horse = True
        super().main_work_horse(job, queue)

    def execute_job(self, job, queue) -> None:
        running = _in_progress(job)  # the horse's own gauge is back at 0 when it sends
        if running is not None:
            running.value += 1
        try:
            super().execute_job(job, queue)
        finally:
            if running is not None:
                running.value -= 1


def _in_progress(job) -> Count | None:
    assert _runner is not None
    try:
        return _runner.metrics(TaskMessage.validate(job.args[0])).in_progress
    except Exception:  # not a lab message: its horse fails it
        return None


class LabSimpleWorker(_LabWorker, SimpleWorker):
    pass


WORKER_CLASSES: dict[str, type[BaseWorker]] = {"Worker": LabWorker, "SimpleWorker": LabSimpleWorker}


class LabQueue(RQQueue):
    """RQ's queue as the lab's workers see it, with the lab's lifetime of the
    maintenance lock (lab/queues.py): a worker that dies in its maintenance pass
    (its node's death) holds off the others' passes, and so the return of its own
    job, for RQ_MAINTENANCE_LOCK_S, not RQ's 15 minutes."""

    def acquire_maintenance_lock(self) -> bool:
        return bool(self.connection.set(self.registry_cleaning_key, 1, nx=True, ex=RQ_MAINTENANCE_LOCK_S))


class LabWorkerPool(WorkerPool):
    """RQ's pool, whose /metrics server starts once its workers are forked:
    /metrics answering means they run, and no worker holds the server's socket."""

    def start_workers(self, *args: Any, **kwargs: Any) -> None:
        super().start_workers(*args, **kwargs)
        # In the pool's process: every worker's and horse's counts, sent to it.
        # The task series are made already, at 0 (main: _runner.make_series).
        settings = get_settings()
        serve_worker_metrics(service_name(settings, QUEUE), settings)


def main() -> None:
    setup_logging()
    settings = get_settings()
    connection = worker_client(settings)
    pool = LabWorkerPool(
        [QUEUE_NAME],
        connection=connection,
        num_workers=settings.concurrency_for(QUEUE),
        worker_class=WORKER_CLASSES[settings.rq_worker_class],
        queue_class=LabQueue,
    )
    global _runner
    _runner = TaskRunner(settings)
    _runner.make_series(QUEUE)  # before any fork: a worker or horse only adds to them
    listen_to_children()
    os.register_at_fork(after_in_child=_die_with_parent)  # inherited by every process forked below
    freeze_startup_heap()  # before the pool forks: its workers inherit the frozen start-up objects
    pool.start(logging_level=settings.library_log_level)


if __name__ == "__main__":
    import importlib

    # Through the module's own name: RQ imports TASK_NAME from it in every
    # worker and horse, which must find this module's state, not a second copy.
    importlib.import_module("workers.rq_queue").main()
