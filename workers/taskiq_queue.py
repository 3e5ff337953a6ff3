"""taskiq with taskiq-redis' RedisStreamBroker: `kiq` adds an entry to the Redis
stream `lab:taskiq`; workers read it through the consumer group `lab`, so
however many replicas run, each entry is delivered to one of them.

Why the stream broker: taskiq-redis' ListQueueBroker pops a message off its list
before running it, and a worker killed or stopped with messages in hand loses
them. The stream broker leaves a read entry pending in the group until it is
acknowledged, and here that is after the task ran (`ack_type=when_executed`;
taskiq's default, `when_saved`, is the same without a result backend).

Delivery: each worker reads one entry at a time (`xread_count=1`; the broker's
default 100 would hold up to 100 entries per replica) and, after each read,
claims (XAUTOCLAIM) entries that stayed pending for TASKIQ_RECLAIM_S: those a
stopped or killed replica had read but not finished. A task that outlives that
delay is claimed and run a second time (the ledger counts it). A task that
raised is acknowledged like any other: no retries. On SIGTERM the worker stops
reading and waits up to SHUTDOWN_GRACE_S for running tasks; what it leaves
unacknowledged is claimed later. Knobs that change the result:
TASKIQ_MAX_ASYNC_TASKS (default CONCURRENCY; taskiq's default is unlimited).
taskiq-redis 1.0 is used (1.1 and later need redis-py 8).
"""

import asyncio
import logging
import os
import signal
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import Any

from redis.asyncio import Redis
from taskiq import AckableMessage, AsyncBroker
from taskiq.acks import AcknowledgeType
from taskiq.kicker import AsyncKicker
from taskiq.middlewares.prometheus_middleware import PrometheusMiddleware
from taskiq.receiver import Receiver
from taskiq_redis import RedisStreamBroker

from lab.key_purge import delete_keys
from lab.metrics import Count, Observe, library_exporter
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import REDIS_DOWN, async_options
from lab.settings import Settings, get_settings
from lab.stream_groups import ensure_group, group_lag
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("taskiq")
STREAM = "lab:taskiq"
GROUP = "lab"
TASK_NAME = "lab_task"
RECLAIM_LOCK = f"autoclaim:{GROUP}:{STREAM}"  # taskiq-redis' lock around XAUTOCLAIM
log = logging.getLogger("lab.taskiq")


class LabStreamBroker(RedisStreamBroker):
    """taskiq-redis' stream broker, except that losing Redis does not end the worker.

    Its `listen` lets a Redis error out (and taskiq's worker process dies with
    it, for its supervisor to restart). Here the read is retried every second,
    and the consumer group is created again if Redis came back without it;
    running tasks carry on."""

    async def listen(self) -> AsyncGenerator[AckableMessage, None]:
        while True:
            try:
                async for message in super().listen():
                    yield message
            except Exception as exc:  # connection lost, NOGROUP, a stream deleted under a blocked read
                log.warning("reading %s failed (%s): again in 1 s", STREAM, exc)
                await asyncio.sleep(1)
                try:
                    await self._declare_consumer_group()
                except Exception:
                    pass  # still away: the next read says so


class LabPrometheusMiddleware(PrometheusMiddleware):
    """taskiq's own metrics (received_tasks, success_tasks, found_errors,
    saved_results, execution_time) on the default registry, which the
    worker's /metrics serves; the server taskiq would start for them is not
    started (lab/metrics.py says why they are not in multi-process mode).

    Its hooks count as taskiq's do, into the same series, but through the
    lab's Count and Observe, not taskiq's `.labels(name).inc()` in each hook
    (fast path: docs/hot-path.md)."""

    def __init__(self) -> None:
        with library_exporter():
            super().__init__()
        self._series: dict[str, _TaskSeries] = {}

    def startup(self) -> None:
        pass

    def series(self, task_name: str) -> "_TaskSeries":
        series = self._series.get(task_name)
        if series is None:
            series = self._series[task_name] = _TaskSeries(self, task_name)
        return series

    def pre_execute(self, message):
        self.series(message.task_name).received.value += 1
        return message

    def post_execute(self, message, result) -> None:
        series = self.series(message.task_name)
        (series.errors if result.is_err else series.success).value += 1
        series.execution_time(result.execution_time)

    def post_save(self, message, result) -> None:
        self.series(message.task_name).saved.value += 1


class _TaskSeries:
    """The children of taskiq's metrics for one task name."""

    __slots__ = ("received", "success", "errors", "saved", "execution_time")

    def __init__(self, middleware: PrometheusMiddleware, task_name: str):
        self.received = Count(middleware.received_tasks.labels(task_name))
        self.success = Count(middleware.success_tasks.labels(task_name))
        self.errors = Count(middleware.found_errors.labels(task_name))
        self.saved = Count(middleware.saved_results.labels(task_name))
        self.execution_time = Observe(middleware.execution_time.labels(task_name))


def make_broker(settings: Settings, *, worker: bool) -> LabStreamBroker:
    if worker:
        # A blocked XREADGROUP waits up to 2 s (xread_block) for entries: the
        # worker's reads must not time out before it. A Redis that is down
        # fails the connect.
        options: dict[str, Any] = {"socket_connect_timeout": settings.redis_timeout_s}
    else:
        # The API's short timeouts, and no long wait for a free connection.
        options = {**async_options(settings), "timeout": settings.redis_timeout_s}
    return LabStreamBroker(
        settings.redis_url,
        queue_name=STREAM,
        consumer_group_name=GROUP,
        consumer_name=f"{socket.gethostname()}-{os.getpid()}" if worker else None,
        consumer_id="0",  # a group taskiq creates starts at the stream's beginning, not at "$"
        xread_count=1,
        idle_timeout=int(settings.taskiq_reclaim_s * 1000),
        max_connection_pool_size=100 if not worker else None,
        **options,
    )


class Producer:
    def __init__(self, settings: Settings, broker: AsyncBroker | None = None):
        self.broker = broker or make_broker(settings, worker=False)
        self.kicker: AsyncKicker[[dict], None] = AsyncKicker(task_name=TASK_NAME, broker=self.broker, labels={})

    async def start(self) -> None:
        await self.broker.startup()  # creates the group (at "0"), as the worker would

    async def enqueue(self, msg: TaskMessage) -> None:
        # One kicker for every request: `with_task_id` sets its id, and `kiq`
        # reads it into the message before its first await, so concurrent
        # requests on the loop cannot mix ids up.
        await self.kicker.with_task_id(msg.task_id).kiq(msg.payload())

    async def close(self) -> None:
        await self.broker.shutdown()


async def depth(redis) -> int | float:
    return await group_lag(redis, STREAM, GROUP)


async def purge(redis) -> int:
    """(make purge, no worker running) The stream, with the entries read and not acknowledged,
    then its group again at the stream's start (lab/stream_groups.py)."""
    deleted = await delete_keys(redis, (STREAM,))
    await ensure_group(redis, STREAM, GROUP)
    return deleted


# Worker: one process, one receiver.
async def run(
    settings: Settings,
    queue: Queue,
    broker: AsyncBroker,
    startup: Callable[[], Awaitable[None]],
) -> None:
    """Runs the lab's task from `broker` until SIGTERM; `startup` connects it."""
    broker.is_worker_process = True
    broker.add_middlewares(LabPrometheusMiddleware())
    runtime = WorkerRuntime(settings, queue)

    @broker.task(task_name=TASK_NAME)
    async def lab_task(message: dict) -> None:
        await runtime.runner.run(message)

    finish = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, finish.set)
    await startup()
    await runtime.start()
    try:
        receiver = Receiver(
            broker,
            max_async_tasks=settings.concurrency_for(queue),
            ack_type=AcknowledgeType.WHEN_EXECUTED,
            wait_tasks_timeout=settings.shutdown_grace_s,
            run_startup=False,
        )
        await receiver.listen(finish)
    finally:
        await broker.shutdown()
        await runtime.stop()


async def startup(broker: LabStreamBroker) -> None:
    """The group (at "0"), and no lock left by a replica killed while it claimed
    entries: taskiq-redis 1.0 takes it without an expiry, so a stale one would
    stop every replica from claiming again. Two replicas claiming at once is
    harmless (XAUTOCLAIM hands each entry to one)."""
    redis = Redis(connection_pool=broker.connection_pool)
    while True:
        try:
            await broker.startup()
            await redis.delete(RECLAIM_LOCK)
            return
        except REDIS_DOWN as exc:
            log.warning("Redis unreachable (%s): starting again in 1 s", exc)
            await asyncio.sleep(1)


def main() -> None:
    setup_logging()
    settings = get_settings()
    broker = make_broker(settings, worker=True)
    asyncio.run(run(settings, QUEUE, broker, partial(startup, broker)))


if __name__ == "__main__":
    main()
