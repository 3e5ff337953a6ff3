"""FastStream on Redis: tasks go through a Redis stream read by a consumer group,
so however many replicas run, each message is delivered to one of them.

A message is acknowledged only after its handler ran (AckPolicy.ACK). A second
subscriber on the same group reclaims (XAUTOCLAIM) messages that stayed
unacknowledged for FASTSTREAM_RECLAIM_S: those a replica had read but not
finished when it was stopped or killed. (A list would lose them: FastStream
pops list messages into an in-memory buffer that a shutdown discards.)

FASTSTREAM_CHANNEL=pubsub switches to Redis pub/sub, as the original experiment
used: every subscriber then receives every message (duplicates, which the
ledger counts) and messages published while no one listens are lost.
Knobs that change the result: FASTSTREAM_MAX_WORKERS (default CONCURRENCY),
the subscriber's `max_workers`. On SIGTERM the broker waits up to
SHUTDOWN_GRACE_S (`graceful_timeout`) for handlers in flight.
"""

import asyncio
import logging
import os
import socket
from typing import Any

from faststream import AckPolicy, FastStream
from faststream.redis import RedisBroker, StreamSub
from redis.exceptions import ResponseError

from lab.key_purge import delete_keys
from lab.protocol import Queue, TaskMessage
from lab.redis_clients import REDIS_DOWN, TimelyConnection, async_client
from lab.settings import Settings, get_settings
from lab.stream_groups import ensure_group, find_group, group_lag
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("faststream")
STREAM = "lab:faststream"  # a STREAM (or, with pubsub, the channel of that name)
GROUP = "lab"
log = logging.getLogger("lab.faststream")


def make_broker(settings: Settings, timeout_s: float | None, logs: bool = True) -> RedisBroker:
    options: dict[str, Any] = (
        {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s, "connection_class": TimelyConnection}
        if timeout_s
        else {}
    )
    return RedisBroker(
        settings.redis_url,
        graceful_timeout=settings.shutdown_grace_s,
        # Per-message lines are INFO: LIBRARY_LOG_LEVEL (WARNING) filters them, not errors.
        # The API's producer logs nothing: a failed publish raises into the API,
        # which answers 503 and counts it, and FastStream's logging context is
        # a noticeable part of a publish (docs/hot-path.md).
        # None is FastStream's documented "no logger"; its type leaves None out.
        logger=logging.getLogger("faststream") if logs else None,  # type: ignore[arg-type]
        **options,
    )


async def create_group(settings: Settings) -> None:
    redis = async_client(settings)
    try:
        await ensure_group(redis, STREAM, GROUP)
    finally:
        await redis.aclose()


class Producer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.broker = make_broker(settings, settings.redis_timeout_s, logs=False)
        self.pubsub = settings.faststream_channel == "pubsub"

    async def start(self) -> None:
        await self.broker.connect()
        if not self.pubsub:
            await create_group(self.settings)

    async def enqueue(self, msg: TaskMessage) -> None:
        target: dict[str, Any] = {"channel": STREAM} if self.pubsub else {"stream": STREAM}
        await self.broker.publish(msg.payload(), **target)

    async def close(self) -> None:
        await self.broker.stop()


async def depth(redis) -> int | float:
    return await group_lag(redis, STREAM, GROUP)


async def purge(redis) -> int:
    """(make purge, no worker running) The stream, with the entries read and not acknowledged,
    then its group again at the stream's start (lab/stream_groups.py)."""
    deleted = await delete_keys(redis, (STREAM,))
    await ensure_group(redis, STREAM, GROUP)
    return deleted


# Worker
def reclaim_poll_ms(settings: Settings) -> int:
    """How often the reclaimer looks: a twelfth of FASTSTREAM_RECLAIM_S, between
    1 and 5 s (FastStream's default polling is 10 times a second). Entries idle
    for that long need no faster look, and idle XAUTOCLAIMs at FastStream's
    rate take a visible share of a small CPU limit (docs/hot-path.md)."""
    return int(1000 * min(5.0, max(1.0, settings.faststream_reclaim_s / 12)))


def make_app(settings: Settings) -> FastStream:
    broker = make_broker(settings, None)
    lab = WorkerRuntime(settings, QUEUE)

    async def handle(message: dict) -> None:
        await lab.runner.run(message)

    if settings.faststream_channel == "pubsub":
        broker.subscriber(channel=STREAM, max_workers=settings.concurrency_for(QUEUE))(handle)
        return FastStream(broker, after_startup=[lab.start], after_shutdown=[lab.stop])

    consumer = f"{socket.gethostname()}-{os.getpid()}"  # one per replica and per start
    # One entry per read: entries wait in memory only as long as a worker slot
    # takes to free up, far less than the reclaim delay.
    read = StreamSub(STREAM, group=GROUP, consumer=consumer, max_records=1)
    reclaim = StreamSub(
        STREAM,
        group=GROUP,
        consumer=consumer,
        polling_interval=reclaim_poll_ms(settings),
        min_idle_time=int(settings.faststream_reclaim_s * 1000),
    )
    broker.subscriber(stream=read, max_workers=settings.concurrency_for(QUEUE), ack_policy=AckPolicy.ACK)(handle)
    broker.subscriber(stream=reclaim, ack_policy=AckPolicy.ACK)(handle)
    return FastStream(broker, after_startup=[lab.start], after_shutdown=[lab.stop])


async def group_lost(settings: Settings) -> bool:
    """True only when Redis answers and our consumer group is not there."""
    redis = async_client(settings)
    try:
        return find_group(await redis.xinfo_groups(STREAM), GROUP) is None
    except ResponseError:  # no such stream: the group went with it
        return True
    except REDIS_DOWN:
        return False
    finally:
        await redis.aclose()


async def wait_and_create_group(settings: Settings) -> None:
    while True:
        try:
            return await create_group(settings)
        except REDIS_DOWN as exc:
            log.warning("Redis unreachable (%s): creating the consumer group again in 1 s", exc)
            await asyncio.sleep(1)


def main() -> None:
    setup_logging()
    settings = get_settings()
    if settings.faststream_channel == "pubsub":
        asyncio.run(make_app(settings).run())
        return
    # FastStream retries reads while Redis is unreachable, but when Redis comes
    # back without the consumer group (restarted without persistence, or
    # flushed) its subscriber stops for good and the app exits. Then the group
    # is created again and a new app started in this process; an exit with the
    # group still in place is a signal's (SIGTERM), and ends the worker.
    while True:
        asyncio.run(wait_and_create_group(settings))
        asyncio.run(make_app(settings).run())
        if not asyncio.run(group_lost(settings)):
            return
        log.warning("consumer group %s of stream %s is gone (Redis lost its data): starting over", GROUP, STREAM)


if __name__ == "__main__":
    main()
