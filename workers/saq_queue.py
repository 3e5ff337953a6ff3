"""SAQ: `Queue.enqueue` pushes onto a Redis list; `Worker(concurrency=...)` pops it.

Knobs that change the result: SAQ_CONCURRENCY (default CONCURRENCY). Jobs get
TASK_TIMEOUT_S like every queue (SAQ's own default would be 10 s). On SIGTERM
the worker waits up to SHUTDOWN_GRACE_S for running jobs, then cancels what is
left and SAQ puts those jobs back on the queue. SAQ_WEB=1 serves SAQ's
web UI on SAQ_WEB_PORT.

Delivery: a job a dead worker held stays "active" until SAQ's sweep (every
sweep_interval_s: 60 s, SAQ's default, or TASK_TIMEOUT_S when shorter; in any
live worker) finds it past its timeout; with `retries=2` it is
then queued again, not aborted. The sweep gives a job it finds still "queued"
in the active list a second look first (LabRedisQueue, below).
"""

import asyncio
import math
import signal
import sys
from collections.abc import Awaitable, Callable

from aiohttp import web
from saq import Queue as SaqQueue
from saq import Worker
from saq.job import Status
from saq.queue.redis import RedisQueue
from saq.web.aiohttp import create_app

from lab.key_purge import delete_keys
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import async_client
from lab.settings import Settings, get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("saq")
QUEUE_NAME = "lab"  # SAQ keys: saq:lab:queued (LIST), saq:lab:active, saq:job:lab:<key>
QUEUED_KEY = f"saq:{QUEUE_NAME}:queued"
TASK_NAME = "lab_task"


class Producer:
    queue: SaqQueue  # set by start(): the API enqueues only through started producers

    def __init__(self, settings: Settings):
        self.settings = settings

    async def start(self) -> None:
        # Our own client, with short timeouts: enqueue must fail fast.
        self.queue = RedisQueue(async_client(self.settings), name=QUEUE_NAME)
        await self.queue.connect()

    async def enqueue(self, msg: TaskMessage) -> None:
        job = await self.queue.enqueue(
            TASK_NAME,
            key=msg.task_id,
            timeout=self.settings.task_timeout_s,
            message=msg.payload(),
            # SAQ's default (1) is one attempt in all: a job swept from a dead
            # worker would be aborted, never run. 2 runs it again (and retries a
            # task that raised once; the ledger counts either as a duplicate).
            retries=2,
        )
        if job is None:  # SAQ does not enqueue a key that already exists
            raise RuntimeError(f"saq refused duplicate job key {msg.task_id}")

    async def close(self) -> None:
        if hasattr(self, "queue"):
            await self.queue.disconnect()


async def depth(redis) -> int:
    return await redis.llen(QUEUED_KEY)


async def purge(redis) -> int:
    """(make purge, no worker running) Queued, active and scheduled ids, and every job."""
    keys = tuple(f"saq:{QUEUE_NAME}:{k}" for k in ("queued", "active", "incomplete", "schedule"))
    return await delete_keys(redis, (*keys, f"saq:job:{QUEUE_NAME}:*"))


# Worker
# SAQ 0.26's sweep script, unchanged: under the sweep lock, every id in the
# active list with its stored job.
SWEEP_SCRIPT = """
local id_jobs = {}
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('SETEX', KEYS[1], ARGV[1], 1)
    for i, v in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
        id_jobs[i] = {v, redis.call('GET', v)}
    end
end
return id_jobs
"""
# Longer than a worker ever takes from its BLMOVE to its status update, even
# with one event-loop turn lasting over a second at 0.2 CPU.
QUEUED_RECHECK_S = 5.0


def sweep_interval_s(task_timeout_s: int) -> int:
    """SAQ's sweep timer, which is also its sweep lock: SAQ's 60 s, or the task
    timeout when shorter (a job cannot be found stuck before its timeout, and
    sweeping later only delays its return), never below two rechecks, so one
    sweep's lock outlasts its recheck."""
    return min(60, max(task_timeout_s, math.ceil(2 * QUEUED_RECHECK_S)))


class LabRedisQueue(RedisQueue):
    """SAQ's sweep takes any job in the active list whose status is not
    "active" for stuck, but every job is in that state between a worker's
    BLMOVE and its status update two round trips later. A sweep landing in that
    window aborts and requeues a job that is about to run, and it runs twice
    (saq#124, saq#277): the lab's ledger saw it as duplicates under load, and at
    every worker start over a backlog (the first sweep runs at start). Here the
    sweep looks again after QUEUED_RECHECK_S and passes SAQ only the jobs still
    "queued"; those a dead worker left in that window are swept as before."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._saq_sweep_script = self.redis.register_script(SWEEP_SCRIPT)
        self._cleanup_script = self._sweep_candidates  # what SAQ's sweep() calls

    async def _sweep_candidates(self, keys, args, client=None) -> list:
        id_jobs = await self._saq_sweep_script(keys=keys, args=args, client=client)
        waiting = [job_id for job_id, job in id_jobs if self._is_queued(job)]
        if not waiting:
            return id_jobs
        await asyncio.sleep(QUEUED_RECHECK_S)
        now = dict(zip(waiting, await self.redis.mget(waiting)))
        return [
            (job_id, now.get(job_id, job))
            for job_id, job in id_jobs
            if job_id not in now or self._is_queued(now[job_id])
        ]

    def _is_queued(self, job_bytes) -> bool:
        job = self.deserialize(job_bytes)
        return job is not None and job.status == Status.QUEUED


class LabWorker(Worker):
    """SAQ's stop() waits its grace period for every task it owns, including its
    upkeep loops (asleep for up to 60 s), so each shutdown lasted the whole
    grace period. This one waits, up to the grace period, only for the job
    loops (running jobs finish; idle dequeues end within `dequeue_timeout`),
    then lets SAQ cancel the rest; a job cancelled mid-run goes back to the queue."""

    def __init__(self, *args, grace_s: float, **kwargs):
        super().__init__(*args, shutdown_grace_period_s=None, **kwargs)
        self.grace_s = grace_s

    async def stop(self) -> None:
        self.event.set()  # no new dequeues
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_s
        while any(t.get_name() == "process" for t in self.tasks) and loop.time() < deadline:
            await asyncio.sleep(0.1)
        await super().stop()


async def lab_task(ctx: dict, *, message: dict) -> None:
    await ctx["lab"].runner.run(message)


def hooks(queue: str) -> tuple[Callable[[dict], Awaitable[None]], Callable[[dict], Awaitable[None]]]:
    """The worker's startup and shutdown: the lab's runtime for `queue` in SAQ's context."""

    async def startup(ctx: dict) -> None:
        ctx["lab"] = WorkerRuntime(get_settings(), queue)
        await ctx["lab"].start()

    async def shutdown(ctx: dict) -> None:
        await ctx["lab"].stop()

    return startup, shutdown


startup, shutdown = hooks(QUEUE)


async def serve_web_ui(queue: SaqQueue, port: int) -> web.AppRunner:
    runner = web.AppRunner(create_app([queue]))
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner


async def run() -> None:
    settings = get_settings()
    queue = LabRedisQueue.from_url(settings.redis_url, name=QUEUE_NAME)
    worker = LabWorker(
        queue,
        functions=[(TASK_NAME, lab_task)],
        concurrency=settings.concurrency_for(QUEUE),
        startup=startup,
        shutdown=shutdown,
        grace_s=settings.shutdown_grace_s,
        timers={"sweep": sweep_interval_s(settings.task_timeout_s)},
        # An idle dequeue would otherwise block until cancelled; with a timeout it
        # returns within a second once the worker stops, never mid-move of a job.
        dequeue_timeout=1.0,
    )
    web_ui = await serve_web_ui(queue, settings.saq_web_port) if settings.saq_web else None
    try:
        await worker.start()
    finally:
        if web_ui is not None:
            await web_ui.cleanup()


async def web_only() -> None:
    """SAQ's web UI alone, no worker: `python -m workers.saq_queue web` (the
    compose service `saq-ui`, so that worker replicas need no fixed port)."""
    settings = get_settings()
    runner = await serve_web_ui(SaqQueue.from_url(settings.redis_url, name=QUEUE_NAME), settings.saq_web_port)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()  # create_app's on_shutdown disconnects the queue


def main() -> None:
    setup_logging()
    asyncio.run(web_only() if sys.argv[1:] == ["web"] else run())


if __name__ == "__main__":
    main()
