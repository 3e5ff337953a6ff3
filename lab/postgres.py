"""What the lab asks PostgreSQL itself, whichever library keeps a queue's jobs
there: whether it answers (/readyz, a worker waiting at its start), how
many jobs wait in a queue (the queue monitor's backlog) and emptying a queue
(`make purge`). Each library has tables of its own: its adapter gives the SQL.
Each call opens a connection of its own (a plain socket for `answers`,
psycopg for the others), bounded by REDIS_TIMEOUT_S as every other client of
the lab.

The monitor's questions, one of a kind at a time per process: while one
still waits (an absent server's name being resolved when the profile was
not started), the next one of its kind fails at once rather than adding
another thread every second."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lab import broker_probe
from lab.settings import Settings, get_settings

if TYPE_CHECKING:  # the drivers are imported by the calls that use them: a process that only asks `answers` loads none
    import asyncpg
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

_busy: set[tuple] = set()  # the kinds of call still waiting
# The SSLRequest message: a server answers it with one byte, "S" or "N", before any authentication.
SSL_REQUEST = struct.pack("!ii", 8, 80877103)


def _greets(url: str, timeout_s: float) -> None:
    """PostgreSQL takes a TCP connection and answers an SSLRequest; raises if
    it does not, each step bounded by timeout_s."""
    parts = urlsplit(url)
    address = (parts.hostname or "localhost", parts.port or 5432)
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.sendall(SSL_REQUEST)
        if sock.recv(1) not in (b"S", b"N"):
            raise ConnectionError(f"{address[0]}:{address[1]} did not answer as PostgreSQL does")


async def answers(settings: Settings) -> None:
    """Returns once PostgreSQL answers; raises if it does not (lab/broker_probe.py)."""
    await broker_probe.answered(_greets, settings.postgres_url, settings.redis_timeout_s)


async def wait_until_answers(settings: Settings) -> None:
    """(a worker starting) Returns once PostgreSQL takes a connection, asking every second."""
    await broker_probe.wait_until_answers(partial(answers, settings), "PostgreSQL")


def connect_timeout(settings: Settings) -> int:
    """libpq's connect_timeout: whole seconds, at least 1 (below 2 libpq takes 2)."""
    return max(1, round(settings.redis_timeout_s))


def pool(settings: Settings, max_size: int) -> AsyncConnectionPool:
    """A psycopg pool, not yet open, for SAQ and procrastinate. Connecting is
    bounded, and a connection is waited for REDIS_TIMEOUT_S at a time; when
    none came, PostgreSQL is asked whether it answers (one question per pool
    at a time, its answer shared by every waiter). While it answers the wait
    goes on: the pool is busy, not the broker away (at a small CPU limit the
    API's requests queue for its connections behind a late event loop), and a
    request waits its turn as it would for Redis. Once it does not answer,
    the waiters fail (a 503). The statement itself has no deadline:
    cancelling an INSERT half-way leaves its outcome unknown
    (services/api/enqueue.py)."""
    from psycopg_pool import AsyncConnectionPool, PoolTimeout

    class BusyTolerantPool(AsyncConnectionPool):
        probe: asyncio.Task[None] | None = None

        async def getconn(self, timeout: float | None = None) -> AsyncConnection:
            while True:
                try:
                    return await super().getconn(timeout)
                except PoolTimeout:
                    if self.probe is None or self.probe.done():
                        self.probe = asyncio.create_task(answers(settings))
                    await asyncio.shield(self.probe)  # raises when PostgreSQL does not answer

    return BusyTolerantPool(
        settings.postgres_url,
        open=False,
        min_size=1,
        max_size=max_size,
        timeout=settings.redis_timeout_s,
        kwargs={"connect_timeout": connect_timeout(settings)},
        check=AsyncConnectionPool.check_connection,
    )


async def connect_while_answering(settings: Settings, *args: Any, **kwargs: Any) -> asyncpg.Connection:
    """asyncpg's connect, for PgQueuer's pools (their `connect`): bounded by
    REDIS_TIMEOUT_S as every client of the lab, but a connection that timed
    out while PostgreSQL answers is tried again (a late event loop, not an
    absent broker); once it does not answer, its error, so an enqueue fails
    fast (a 503) only while PostgreSQL is away."""
    import asyncpg

    while True:
        try:
            return await asyncpg.connect(*args, **kwargs)
        except TimeoutError:
            await answers(settings)


@asynccontextmanager
async def advisory_lock(settings: Settings, key: int) -> AsyncIterator[AsyncConnection]:
    """A connection holding the advisory transaction lock `key` meanwhile, so one
    process at a time does the work. The processes of a queue that start at
    once (the API, its worker, the monitor) create the library's tables one
    after the other, never side by side (procrastinate's and PgQueuer's schema
    scripts fail when run twice, SAQ's skips its work in all but one process and
    lets the others go on before the tables exist); procrastinate's workers
    give back stalled jobs one at a time."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(
        settings.postgres_url, connect_timeout=connect_timeout(settings), autocommit=True
    ) as conn:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            yield conn


async def _execute(settings: Settings, sql: str, params: tuple) -> int:
    """The first column of the first row `sql` returns, or the rows it changed;
    0 when the library has not created its table yet (nothing was enqueued, no
    worker started)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(
        settings.postgres_url, connect_timeout=connect_timeout(settings), autocommit=True
    ) as conn:
        try:
            cursor = await conn.execute(sql, params)
        except psycopg.errors.UndefinedTable:
            return 0
        row = await cursor.fetchone() if cursor.description else None
        return int(row[0] or 0) if row else max(cursor.rowcount, 0)


async def run(settings: Settings, sql: str, params: tuple = ()) -> int:
    """`sql` once, within 2 x REDIS_TIMEOUT_S; one call per statement at a time."""
    key = (settings.postgres_url, sql, params)
    if key in _busy:
        raise TimeoutError("the last call to PostgreSQL of this kind has not returned yet")
    _busy.add(key)
    try:
        return await asyncio.wait_for(_execute(settings, sql, params), 2 * settings.redis_timeout_s)
    finally:
        _busy.discard(key)


def backlog_functions(
    count_sql: str, purge_sql: str, params: tuple = ()
) -> tuple[Callable[[object], Awaitable[int]], Callable[[object], Awaitable[int]]]:
    """`depth(redis)` and `purge(redis)` of an adapter (lab/queues.py) whose jobs
    live in PostgreSQL: `count_sql` counts the jobs that wait (not those a
    worker runs, as on Redis), `purge_sql` deletes every job of the queue
    (`make purge`, no worker running). PostgreSQL, not Redis, knows them: the
    ledger's client is not used."""

    async def depth(redis: object) -> int:
        return await run(get_settings(), count_sql, params)

    async def purge(redis: object) -> int:
        return await run(get_settings(), purge_sql, params)

    return depth, purge
