"""What the lab asks RabbitMQ itself, whichever library carries a queue's
tasks there: whether it answers (the API's probe while a queue is marked
down), how many messages wait in a queue (the queue monitor's backlog) and
emptying a queue (`make purge`). Each call opens a connection of its own
(a plain socket for `answers`, aio-pika for the others), bounded by
REDIS_TIMEOUT_S as every other client of the lab.

The monitor's questions, one of a kind at a time per process (a kind: the
question and the queues it is about): while one still waits (an absent
broker's name being resolved, in a thread asyncio cannot cancel, when the
profile was not started), the next one of its kind fails at once rather
than adding another thread every second."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from lab import broker_probe
from lab.settings import Settings, get_settings

if TYPE_CHECKING:  # aio-pika is imported by the calls that use it: a process that only asks `answers` never loads it
    from aio_pika.abc import AbstractChannel, AbstractConnection

_busy: set[tuple] = set()  # the kinds of call still waiting


async def _bounded(settings: Settings, kind: tuple, work: Callable[[AbstractConnection], Awaitable[int]]) -> int:
    key = (settings.rabbitmq_url, *kind)
    if key in _busy:
        raise TimeoutError(f"the last call to RabbitMQ {kind} has not returned yet")
    _busy.add(key)
    try:
        return await asyncio.wait_for(_connected(settings, work), 2 * settings.redis_timeout_s)
    finally:
        _busy.discard(key)


async def _connected(settings: Settings, work: Callable[[AbstractConnection], Awaitable[int]]) -> int:
    import aio_pika

    connection = await aio_pika.connect(settings.rabbitmq_url, timeout=settings.redis_timeout_s)
    try:
        return await work(connection)
    finally:
        await connection.close()


def _greets(url: str, timeout_s: float) -> None:
    """RabbitMQ takes a TCP connection and answers the AMQP 0-9-1 header with
    its first frame (Connection.Start); raises if it does not, each step
    bounded by timeout_s."""
    parts = urlsplit(url)
    address = (parts.hostname or "localhost", parts.port or 5672)
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        if sock.recv(1) != b"\x01":  # a method frame
            raise ConnectionError(f"{address[0]}:{address[1]} did not answer as RabbitMQ does")


async def answers(settings: Settings) -> None:
    """Returns once RabbitMQ answers; raises if it does not (lab/broker_probe.py)."""
    await broker_probe.answered(_greets, settings.rabbitmq_url, settings.redis_timeout_s)


async def wait_until_answers(settings: Settings) -> None:
    """(a worker starting) Returns once RabbitMQ takes a connection, asking every second."""
    await broker_probe.wait_until_answers(partial(answers, settings), "RabbitMQ")


async def _each_queue(
    settings: Settings, names: Sequence[str], action: Callable[[AbstractChannel, str], Awaitable[int]]
) -> int:
    from aiormq.exceptions import ChannelNotFoundEntity

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


def backlog_functions(
    names: Sequence[str],
) -> tuple[Callable[[object], Awaitable[int]], Callable[[object], Awaitable[int]]]:
    """`depth(redis)` and `purge(redis)` of an adapter (lab/queues.py) whose
    tasks wait in these RabbitMQ queues: their ready messages (those a worker
    holds, delivered and not yet acknowledged, are not counted, as on Redis),
    and emptying them (`make purge`, no worker running; what a worker held
    went back to its queue when its connection closed). RabbitMQ, not Redis,
    knows them: the ledger's client is not used."""

    async def depth(redis: object) -> int:
        return await ready_messages(get_settings(), names)

    async def purge_(redis: object) -> int:
        return await purge(get_settings(), names)

    return depth, purge_
