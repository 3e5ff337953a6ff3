"""The lab's PostgreSQL connections when PostgreSQL is away: psycopg's pool
(lab/postgres.pool) and asyncpg's connect (lab/postgres.connect_while_answering)
fail with the reason the broker gave, not a wait without end. Their busy
side, a wait that goes on while PostgreSQL answers, needs a real server:
tests/compose/test_postgres.py."""

import asyncio
import socket

import pytest

from lab.postgres import connect_while_answering, pool
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


def test_an_asyncpg_connection_to_a_postgres_that_is_away_fails_with_its_error():
    def connect(url: str) -> None:
        """Raises what connecting raised; fails the test on a hang (its own
        timeout is not the connection's)."""
        settings = Settings(postgres_url=url, redis_timeout_s=0.2)

        async def bounded() -> None:
            task = asyncio.ensure_future(connect_while_answering(settings, url, timeout=0.2))
            done, _ = await asyncio.wait({task}, timeout=30)
            if not done:
                task.cancel()
                pytest.fail(f"connecting to {url} still tries after 30 s")
            task.result()

        asyncio.run(bounded())

    with pytest.raises(ConnectionRefusedError):
        connect(f"postgresql://lab@127.0.0.1:{closed_port()}/lab")
    # A server that takes the connection and never answers (frozen): a timeout, not a retry without end.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with pytest.raises(TimeoutError):
            connect(f"postgresql://lab@127.0.0.1:{silent.getsockname()[1]}/lab")
