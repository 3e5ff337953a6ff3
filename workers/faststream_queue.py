"""FastStream on Redis: the task is published to a Redis list and the
subscriber pops it, so however many replicas run, each message is handled once.

FASTSTREAM_CHANNEL=pubsub switches to Redis pub/sub, as the original experiment
used: every subscriber then receives every message (duplicates, which the
ledger counts) and messages published while no one listens are lost.
Knobs that change the result: FASTSTREAM_MAX_WORKERS (default CONCURRENCY),
the subscriber's `max_workers`. On SIGTERM the broker waits up to
SHUTDOWN_GRACE_S (`graceful_timeout`) for handlers in flight.
"""

import asyncio

from faststream import FastStream
from faststream.redis import ListSub, RedisBroker

from services.protocol import Queue, TaskMessage
from services.settings import Settings, get_settings
from services.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue.faststream
LIST_NAME = "lab:faststream"  # a LIST (or the pub/sub channel of the same name)


def make_broker(settings: Settings, timeout_s: float | None) -> RedisBroker:
    options = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s} if timeout_s else {}
    return RedisBroker(
        settings.redis_url,
        graceful_timeout=settings.shutdown_grace_s,
        logger=None,  # one log line per message would cost more than the task itself
        **options,
    )


def destination(settings: Settings) -> dict:
    return {"channel": LIST_NAME} if settings.faststream_channel == "pubsub" else {"list": LIST_NAME}


class Producer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.broker = make_broker(settings, settings.redis_timeout_s)

    async def start(self) -> None:
        await self.broker.connect()

    async def enqueue(self, msg: TaskMessage) -> None:
        await self.broker.publish(msg.payload(), **destination(self.settings))

    async def close(self) -> None:
        await self.broker.stop()


async def depth(redis) -> int:
    return await redis.llen(LIST_NAME)


# Worker
def make_app(settings: Settings) -> FastStream:
    broker = make_broker(settings, None)
    lab = WorkerRuntime(settings, QUEUE)
    source = (
        {"channel": LIST_NAME}
        if settings.faststream_channel == "pubsub"
        else {"list": ListSub(LIST_NAME)}
    )

    @broker.subscriber(**source, max_workers=settings.concurrency_for(QUEUE))
    async def lab_task(message: dict) -> None:
        await lab.runner.run(message)

    # /metrics comes up after the subscriber does: readiness means consuming.
    return FastStream(broker, after_startup=[lab.start], after_shutdown=[lab.stop])


def main() -> None:
    setup_logging()
    asyncio.run(make_app(get_settings()).run())


if __name__ == "__main__":
    main()
