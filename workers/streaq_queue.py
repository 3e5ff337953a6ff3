"""streaq: `enqueue_unsafe(...)` adds an entry to the Redis stream
`streaq:lab:queues:normal` (the task itself at `streaq:lab:task:data:<id>`);
workers read it through streaq's consumer group `workers`, so each entry is
delivered to one replica. streaq runs its Redis side as Lua functions: it needs
Redis 7 or later, and talks to it through coredis, not redis-py.

Delivery: an entry is acknowledged (and deleted) after its task ran. A live
worker keeps claiming the entries of its running tasks; the entries a stopped or
killed worker held (running or read ahead) are claimed by another reader once
idle for STREAQ_IDLE_TIMEOUT_S (streaq's default 60 s) and run again, up to
streaq's `max_tries` (3) executions in all; the ledger counts a second
execution as a duplicate. A task that raised is not retried. No results are
kept (`ttl=0`). On SIGTERM the worker stops reading and gives running tasks
SHUTDOWN_GRACE_S (`grace_period`) to finish; what is left is claimed later.
Knobs that change the result: STREAQ_CONCURRENCY (default CONCURRENCY;
streaq's default 16); the worker reads as many entries ahead as it runs at
once (streaq's default prefetch).

A streaq worker ends when Redis goes away (and when Redis comes back without its
consumer group): here a new one is started in the same process, once a second
until Redis answers.
"""

import asyncio
import logging
from pathlib import Path

import streaq
from coredis.exceptions import ResponseError
from coredis.retry import NoRetryPolicy
from streaq import Worker

from lab.key_purge import delete_keys
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import async_client
from lab.settings import Settings, get_settings
from lab.stream_groups import ensure_group, unread_entries
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("streaq")
QUEUE_NAME = "lab"
STREAM = f"streaq:{QUEUE_NAME}:queues:normal"  # one stream per priority; the lab uses streaq's one default
GROUP = "workers"  # streaq's consumer group
TASK_NAME = "lab_task"
LUA = Path(streaq.__file__).parent / "lua" / "streaq.lua"
log = logging.getLogger("lab.streaq")


class Producer:
    """coredis' timeout runs from the moment a command is queued on its shared
    connection, not from the send as redis-py's does: with it at REDIS_TIMEOUT_S,
    an API whose loop runs seconds behind under load times enqueues out with
    Redis up, and one that reached Redis all the same would be counted
    completed by the ledger but never enqueued (docs/hot-path.md). So coredis
    gets a long timeout, and an enqueue still waiting after half of
    REDIS_TIMEOUT_S asks whether Redis answers at all: one redis-py PING at a
    time, shared by every waiting enqueue. If it does not, the request's task
    is cancelled out of its enqueue and gets its 503 within the API's 2 s (the
    enqueue may still have landed; coredis drops that connection).

    Fast path: the enqueue runs in the request's own task, watched by a
    timer, not in a task of its own raced against the timeout by
    asyncio.wait, which keeps many more objects alive per request in flight
    and makes the API's garbage collector run far more often
    (docs/hot-path.md)."""

    def __init__(self, settings: Settings):
        self.timeout = settings.redis_timeout_s
        # coredis waits forever by default, and retries a timed-out command twice.
        self.worker = Worker(
            redis_url=settings.redis_url,
            queue_name=QUEUE_NAME,
            redis_kwargs={
                "connect_timeout": settings.redis_timeout_s,
                "stream_timeout": 10 * settings.redis_timeout_s,
                "retry_policy": NoRetryPolicy(),
            },
        )
        self.redis = async_client(settings)
        self._holder: asyncio.Task | None = None
        self._closing = asyncio.Event()
        self._probe: asyncio.Future | None = None
        # Request tasks whose enqueue is late -> the error that cancelled them (None until the probe fails).
        self._late: dict[asyncio.Task, BaseException | None] = {}

    async def start(self) -> None:
        """Connects and loads streaq's Lua functions. coredis' connection pool
        must be left by the task that entered it (a context variable of that
        task's), and runs its connections' readers in a task group that task
        hosts: a task of the producer's own, for its whole life, not the request
        that happened to come first."""
        entered = asyncio.get_running_loop().create_future()
        self._holder = asyncio.create_task(self._hold(entered), name="streaq-producer")
        try:
            await asyncio.shield(entered)
        except BaseException:
            self._closing.set()  # a connected pool whose starter gave up is left again
            raise

    async def _hold(self, entered: asyncio.Future) -> None:
        try:
            async with self.worker:
                entered.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if entered.done():
                raise
            if isinstance(exc, asyncio.CancelledError):
                entered.cancel()
            else:
                entered.set_exception(exc)

    async def enqueue(self, msg: TaskMessage) -> None:
        # Typed optional for code outside any task; an enqueue runs in its request's.
        task: asyncio.Task = asyncio.current_task()  # type: ignore[assignment]
        timer = asyncio.get_running_loop().call_later(self.timeout / 2, self._is_late, task)
        try:
            await self._enqueue(msg)
        except asyncio.CancelledError:
            error = self._late.get(task)  # removed below, whatever the outcome
            if error is None:
                raise
            task.uncancel()  # cancelled by _probe_answered, not by the server
            raise error from None
        finally:
            timer.cancel()
            self._late.pop(task, None)

    def _is_late(self, task: asyncio.Task) -> None:
        self._late[task] = None
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self.redis.ping())
            self._probe.add_done_callback(self._probe_answered)

    def _probe_answered(self, probe: asyncio.Future) -> None:
        error = ConnectionError("Redis PING cancelled") if probe.cancelled() else probe.exception()
        if error is None:
            return  # Redis answers: the late enqueues wait on (coredis' own long timeout)
        for task, cancelled_by in self._late.items():
            if cancelled_by is None and not task.done():
                self._late[task] = error
                task.cancel()

    async def _enqueue(self, msg: TaskMessage) -> None:
        try:
            await self.worker.enqueue_unsafe(TASK_NAME, msg.payload())
        except ResponseError as exc:
            if "Function not found" not in str(exc):
                raise
            # Redis came back without its data: load streaq's functions again.
            await self.worker.redis.function_load(LUA.read_text(), replace=True)
            await self.worker.enqueue_unsafe(TASK_NAME, msg.payload())

    async def close(self) -> None:
        await self.redis.aclose()
        if self._holder is not None:
            self._closing.set()
            await self._holder


async def depth(redis) -> int:
    """(`redis` is the monitor's redis-py client.) Entries no worker has read yet: streaq deletes an entry once done, so
    the stream holds the backlog plus what is read and not yet finished."""
    return await unread_entries(redis, STREAM, GROUP)


async def purge(redis) -> int:
    """(make purge, no worker running) Its streams (with the entries read and not done) and
    every task's data, then its group again at the stream's start, as streaq creates it."""
    prefix = f"streaq:{QUEUE_NAME}"
    names = (f"{prefix}:queues*", f"{prefix}:task:data:*", f"{prefix}:task:retry:*", f"{prefix}:index:running")
    deleted = await delete_keys(redis, names)
    await ensure_group(redis, STREAM, GROUP)
    return deleted


# Worker
def make_worker(settings: Settings, runtime: WorkerRuntime) -> Worker:
    worker = Worker(
        redis_url=settings.redis_url,
        queue_name=QUEUE_NAME,
        concurrency=settings.concurrency_for(QUEUE),
        idle_timeout=settings.streaq_idle_timeout_s,
        grace_period=settings.shutdown_grace_s,
    )

    @worker.task(name=TASK_NAME, timeout=settings.task_timeout_s, ttl=0)
    async def lab_task(message: dict) -> None:
        await runtime.runner.run(message)

    return worker


async def run(settings: Settings) -> None:
    runtime = WorkerRuntime(settings, QUEUE)
    await runtime.start()
    try:
        while True:
            try:
                # A worker runs once: a fresh one after each failure. It returns
                # when SIGTERM or SIGINT stopped it (its own signal handlers).
                await make_worker(settings, runtime).run_async()
                return
            except Exception as exc:  # Redis unreachable, or back without the group
                log.warning("streaq worker ended (%r): starting a new one in 1 s", exc)
                await asyncio.sleep(1)
    finally:
        await runtime.stop()


def main() -> None:
    setup_logging()
    asyncio.run(run(get_settings()))


if __name__ == "__main__":
    main()
