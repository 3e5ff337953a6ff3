"""The lab's psycopg pool (lab/postgres.pool) when PostgreSQL is away: a
request that finds no connection fails with the reason the broker gave, not
a wait without end. Its busy side, a wait that goes on while PostgreSQL
answers, needs a real server: tests/compose/test_postgres.py."""

import asyncio
import socket

import pytest

from lab.postgres import pool
from lab.settings import Settings


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_connection_asked_of_a_pool_whose_postgres_is_away_fails_with_a_connection_error():
    settings = Settings(postgres_url=f"postgresql://lab@127.0.0.1:{closed_port()}/lab", redis_timeout_s=0.2)

    async def ask() -> None:
        lab_pool = pool(settings, max_size=2)
        await lab_pool.open(wait=False)
        try:
            async with lab_pool.connection():
                pass
        finally:
            await lab_pool.close()

    # The bound is on a hang only: the pool's wait and the refused probe take far less.
    with pytest.raises(ConnectionRefusedError):
        asyncio.run(asyncio.wait_for(ask(), 30))
