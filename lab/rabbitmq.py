"""What the lab asks RabbitMQ itself, whichever library carries a queue's
tasks there: whether it answers (the API's probe while a queue is marked
down), how many messages wait in a queue (the queue monitor's backlog) and
emptying a queue (`make purge`). Each call opens a connection of its own
(aio-pika), bounded by REDIS_TIMEOUT_S as every other client of the lab.

One call of a kind at a time per process (a kind: the question and the
queues it is about): while one still waits (an absent broker's name being
resolved, in a thread asyncio cannot cancel, when the profile was not
started), the next one of its kind fails at once rather than adding another
thread every second."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

import aio_pika
from aio_pika.abc import AbstractChannel
from aiormq.exceptions import ChannelNotFoundEntity

from lab.settings import Settings

_busy: set[tuple] = set()  # the kinds of call still waiting


async def _bounded(
    settings: Settings, kind: tuple, work: Callable[[aio_pika.abc.AbstractConnection], Awaitable[int]]
) -> int:
    key = (settings.rabbitmq_url, *kind)
    if key in _busy:
        raise TimeoutError(f"the last call to RabbitMQ {kind} has not returned yet")
    _busy.add(key)
    try:
        return await asyncio.wait_for(_connected(settings, work), 2 * settings.redis_timeout_s)
    finally:
        _busy.discard(key)


async def _connected(settings: Settings, work: Callable[[aio_pika.abc.AbstractConnection], Awaitable[int]]) -> int:
    connection = await aio_pika.connect(settings.rabbitmq_url, timeout=settings.redis_timeout_s)
    try:
        return await work(connection)
    finally:
        await connection.close()


async def answers(settings: Settings) -> None:
    """Returns once RabbitMQ takes a connection; raises if it does not."""

    async def nothing(connection) -> int:
        return 0

    await _bounded(settings, ("answers",), nothing)


async def wait_until_answers(settings: Settings) -> None:
    """(a worker starting) Returns once RabbitMQ takes a connection, asking every second."""
    while True:
        try:
            return await answers(settings)
        except OSError as exc:  # aiormq's connection errors and timeouts are OSErrors
            logging.getLogger("lab.rabbitmq").warning("RabbitMQ unreachable (%s): again in 1 s", exc)
            await asyncio.sleep(1)


async def _each_queue(
    settings: Settings, names: Sequence[str], action: Callable[[AbstractChannel, str], Awaitable[int]]
) -> int:
    async def run(connection) -> int:
        total = 0
        for name in names:
            # A channel per queue: RabbitMQ closes the channel of a passive
            # declare that finds no queue.
            channel = await connection.channel(publisher_confirms=False)
            try:
                total += await action(channel, name)
            except ChannelNotFoundEntity:  # not declared yet: nothing was published, no worker started
                continue
            await channel.close()
        return total

    return await _bounded(settings, (action.__name__, *names), run)


async def _ready(channel: AbstractChannel, name: str) -> int:
    queue = await channel.declare_queue(name, passive=True, timeout=None)
    return queue.declaration_result.message_count or 0


async def _purge(channel: AbstractChannel, name: str) -> int:
    queue = await channel.declare_queue(name, passive=True, timeout=None)
    result = await queue.purge()
    return result.message_count or 0


async def ready_messages(settings: Settings, names: Sequence[str]) -> int:
    """The ready messages of these queues: those a consumer holds and has not
    acknowledged are not counted (they are running or about to)."""
    return await _each_queue(settings, names, _ready)


async def purge(settings: Settings, names: Sequence[str]) -> int:
    """Empties these queues of their ready messages; those a worker held go
    back to its queue when its connection closes."""
    return await _each_queue(settings, names, _purge)
