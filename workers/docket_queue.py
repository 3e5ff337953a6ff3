"""docket: `docket.add(...)` runs docket's schedule script, which adds an entry
(the task's arguments, cloudpickled) to the Redis stream `docket:lab:stream`
and writes the task's state, with a second copy of its arguments, to the hash
`docket:lab:runs:<key>`; workers read the stream through docket's consumer
group `docket-workers`, so each entry is delivered to one replica. The task's
key is the lab's task id: docket adds nothing for a key it still knows.

Delivery: an entry is acknowledged and deleted once its task has ended
(docket's terminal script). A live worker renews the lease of every entry it
holds (XCLAIM with idle 0) each quarter of DOCKET_REDELIVERY_TIMEOUT_S; one
worker at a time sweeps the group's pending list (XAUTOCLAIM) on a jittered
timer at a quarter of it, and a worker sweeps as it starts. So the entries a
killed worker held come back to another worker once idle for
DOCKET_REDELIVERY_TIMEOUT_S (docket's default 5 minutes; 60 s here, as the
other stream queues' reclaim), plus up to about a third of it, and run again,
with no bound on how often; the ledger counts a second execution as a
duplicate. A task that raised is not retried (no Retry dependency), and no
results are kept (`execution_ttl` 0: the runs hash goes when the task ends).
Each task has TASK_TIMEOUT_S (docket's Timeout dependency).

On SIGTERM the worker stops reading, and running tasks get SHUTDOWN_GRACE_S to
finish (docket's own stop waits for them without a bound); those still running
then are cancelled, their entries left pending for a later sweep. Leases are
not renewed during that grace: DOCKET_REDELIVERY_TIMEOUT_S must exceed
SHUTDOWN_GRACE_S by a quarter of itself, or another replica takes a task the
stopping one still runs.

Knobs that change the result: DOCKET_CONCURRENCY (default CONCURRENCY;
docket's default 10); the worker reads no more entries than it has free slots.
DOCKET_MINIMUM_CHECK_INTERVAL_S: a worker whose slots are all busy sleeps this
long before it looks for finished tasks, so with short tasks it starts at most
DOCKET_CONCURRENCY tasks an interval (docket's `docket worker` command's
default 0.1 s, here; its Worker class's own default is 0.25 s).

A docket worker outlives Redis going away: it tries again every second here
(docket's `reconnection_delay`, 5 s by default), on connections with no read
timeout (docket makes blocking reads); tasks already running carry on. Docket's
own metrics (OpenTelemetry) and its OpenTelemetry spans are not exported.
"""

import asyncio
import logging
import signal
from datetime import timedelta

from docket import Docket, Timeout, Worker
from docket._redis import RedisConnection
from docket.execution import Disposition
from redis.asyncio import ConnectionPool

from lab.key_purge import delete_keys
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import async_options
from lab.settings import Settings, get_settings
from lab.stream_groups import ensure_group, unread_entries
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("docket")
NAME = "docket:lab"  # the docket's name: the prefix of every key docket keeps for it
STREAM = f"{NAME}:stream"
GROUP = "docket-workers"  # docket's consumer group (the same for every docket)
TASK_NAME = "lab_task"
log = logging.getLogger("lab.docket")


class LabRedisConnection(RedisConnection):
    """docket's connections for the API: the lab's short timeouts
    (lab/redis_clients.py), so that an enqueue fails fast when Redis is away;
    docket's own have no read timeout at all."""

    def __init__(self, settings: Settings):
        super().__init__(settings.redis_url)
        self.options = async_options(settings)

    async def _connection_pool_from_url(self, decode_responses: bool = False, protocol: int | None = None):
        versions = {"protocol": protocol} if protocol is not None else {}
        return ConnectionPool.from_url(self.url, decode_responses=decode_responses, **versions, **self.options)


def make_docket(settings: Settings) -> Docket:
    return Docket(name=NAME, url=settings.redis_url, execution_ttl=timedelta(0))


async def _added_by_name(message: dict) -> None:
    """What the API registers as TASK_NAME: docket adds a task by its name
    (only the worker runs it: make_task)."""
    raise NotImplementedError


class Producer:
    def __init__(self, settings: Settings):
        self.docket = make_docket(settings)
        self.docket._redis = LabRedisConnection(settings)
        self.docket.register(_added_by_name, names=[TASK_NAME])
        self._entered = False

    async def start(self) -> None:
        await self.docket.__aenter__()  # `async with docket:` around the API's life
        try:
            async with self.docket.redis() as redis:
                await redis.exists(STREAM)  # Redis answers (docket's client type lists no PING)
        except BaseException:
            # The API makes a new producer for the next task: this one's strike
            # monitor (a task polling Redis) must not outlive it.
            await self.docket.__aexit__(None, None, None)
            raise
        self._entered = True

    async def enqueue(self, msg: TaskMessage) -> None:
        execution = await self.docket.add(TASK_NAME, key=msg.task_id)(msg.payload())
        if execution.disposition is not Disposition.SCHEDULED:  # a key docket knows already, say
            raise RuntimeError(f"docket did not add task {msg.task_id}: {execution.disposition.value}")

    async def close(self) -> None:
        if self._entered:
            self._entered = False
            await self.docket.__aexit__(None, None, None)


async def depth(redis) -> int:
    """Entries no worker has read yet: docket deletes an entry once its task
    has ended, so the stream holds the backlog plus what is read and not yet
    finished. (Docket keeps tasks added for later in the sorted set
    `docket:lab:queue`; the lab adds every task for now.)"""
    return await unread_entries(redis, STREAM, GROUP)


async def purge(redis) -> int:
    """(make purge, no worker running) Every key of the docket: its stream (with
    the entries read and not finished), its queue of tasks for later, each
    task's state and the workers' records; then its group again at the
    stream's start, as docket creates it."""
    deleted = await delete_keys(redis, (f"{NAME}:*",))
    await ensure_group(redis, STREAM, GROUP)
    return deleted


# Worker
def make_task(settings: Settings, runtime: WorkerRuntime):
    async def lab_task(message: dict, timeout: Timeout = Timeout(timedelta(seconds=settings.task_timeout_s))) -> None:
        await runtime.runner.run(message)

    return lab_task


async def stop(worker: Worker, running: asyncio.Task, grace_s: float) -> None:
    """docket's stop (its worker's task cancelled: it reads no more, and waits
    for the tasks it runs), with SHUTDOWN_GRACE_S for those tasks: any still
    running after it are cancelled, and their entries stay pending."""
    running.cancel()
    if (await asyncio.wait({running}, timeout=grace_s))[0]:
        return
    cut = list(worker._tasks_by_key.values())
    log.warning("%d tasks still running after the %s s grace: cancelled, to be delivered again", len(cut), grace_s)
    for task in cut:
        task.cancel()
    await asyncio.wait({running})


async def run(settings: Settings) -> None:
    runtime = WorkerRuntime(settings, QUEUE)
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
    async with make_docket(settings) as docket:
        docket.register(make_task(settings, runtime), names=[TASK_NAME])
        async with Worker(
            docket,
            concurrency=settings.concurrency_for(QUEUE),
            redelivery_timeout=timedelta(seconds=settings.docket_redelivery_timeout_s),
            reconnection_delay=timedelta(seconds=1),
            minimum_check_interval=timedelta(seconds=settings.docket_minimum_check_interval_s),
            schedule_automatic_tasks=False,  # the lab has no perpetual tasks
        ) as worker:
            await runtime.start()
            try:
                running = asyncio.create_task(worker.run_forever(), name="docket-worker")
                signalled = asyncio.create_task(stopping.wait())
                await asyncio.wait({running, signalled}, return_when=asyncio.FIRST_COMPLETED)
                signalled.cancel()
                if running.done():  # ended on its own: a bug of the worker's, not Redis (it waits Redis out)
                    running.result()
                await stop(worker, running, settings.shutdown_grace_s)
            finally:
                await runtime.stop()


def main() -> None:
    setup_logging()
    asyncio.run(run(get_settings()))


if __name__ == "__main__":
    main()
