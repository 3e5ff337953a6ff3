"""The lab's Redis connection against a real redis-server: a reply that arrived
in time is read even when the event loop comes back to it late, and a Redis
that never answers still times out, in about socket_timeout."""

import asyncio
import select
import threading
import time
import uuid
import warnings

import pytest
import redis
import redis.asyncio as aioredis

from lab.redis_clients import TimelyConnection, sync_client, worker_client
from lab.settings import Settings
from tests.lab import RedisServer, UpstreamBug, wait_until

TIMEOUT_S = 0.3
HANG_S = 60  # bounds a hang only


def client(url: str, connection_class) -> aioredis.Redis:
    return aioredis.Redis.from_url(
        url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S, connection_class=connection_class
    )


def watched(connection_class):
    """`connection_class`, telling when a read has begun (its timeout then runs) and on which socket."""

    class Watched(connection_class):
        reading: asyncio.Event | None = None

        async def read_response(self, *args, **kwargs):
            if Watched.reading is not None and not Watched.reading.is_set():
                Watched.socket = self._writer.get_extra_info("socket")
                Watched.reading.set()
            return await super().read_response(*args, **kwargs)

    return Watched


async def incr_with_a_late_loop(server: RedisServer, connection_class, key: str) -> int:
    """INCR `key` while Redis is frozen, so that no reply can come; once the
    read is waiting (its timeout running), one long turn of the event loop (as
    under 0.2 CPU): Redis is thawed and answers, and the turn lasts until the
    reply is in the socket and the timeout has passed. When the loop comes
    back, the reply and the expired timer are both there."""
    conn_class = watched(connection_class)
    r = client(server.url, conn_class)
    try:
        await r.ping()
        conn_class.reading = asyncio.Event()
        server.freeze()
        try:
            incr = asyncio.create_task(r.incr(key))
            await asyncio.wait_for(conn_class.reading.wait(), HANG_S)
            # Here the read has yielded: its timer started no later than now.
            timer_started_by = time.monotonic()
        finally:
            server.thaw()
        readable, _, _ = select.select([conn_class.socket], [], [], HANG_S)  # the loop stands still meanwhile
        assert readable, f"Redis did not answer within {HANG_S}s of its thaw"
        time.sleep(max(0.0, timer_started_by + TIMEOUT_S * 1.2 - time.monotonic()))
        return await incr
    finally:
        await r.aclose()


def unique_key(prefix: str) -> str:
    """A key no other test touches: the session's Redis is shared."""
    return f"{prefix}-{uuid.uuid4().hex}"


@pytest.fixture
def own_redis():
    """A Redis of this test's own: it is frozen."""
    server = RedisServer().start()
    yield server
    server.thaw()
    server.stop()


def test_a_reply_that_came_in_time_is_read_after_a_late_loop_turn(own_redis):
    assert asyncio.run(incr_with_a_late_loop(own_redis, TimelyConnection, unique_key("late-loop"))) == 1


def test_redis_pys_own_connection_under_a_late_loop_turn_is_reported(own_redis):
    """What TimelyConnection.read_response prevents: Redis ran the INCR, redis-py's
    own connection reports a timeout. Reported as a warning either way (the lab
    is right whatever redis-py does); what must hold is that the INCR ran."""
    key = unique_key("late-loop")
    try:
        asyncio.run(incr_with_a_late_loop(own_redis, aioredis.Connection, key))
        state = "looks fixed: its own connection read the reply that came in time"
    except redis.exceptions.TimeoutError:
        state = "still present: its own connection reports a timeout for a reply that came in time"
    warnings.warn(UpstreamBug(f"redis-py late-loop-turn timeout {state}"), stacklevel=1)
    assert asyncio.run(incr_with_a_late_loop(own_redis, TimelyConnection, key)) == 2  # the first INCR ran too


def time_out_on_a_frozen_redis(call, message: str, while_frozen=None, after=None) -> float:
    """`call(client)` to a Redis frozen after the client's first PING must
    raise redis-py's TimeoutError (matching `message`); returns how long that
    took. `while_frozen(client)` runs next, before Redis is thawed; then the
    same client must answer again (no cancellation left over), and
    `after(client)` runs."""
    server = RedisServer().start()
    try:

        async def scenario():
            r = client(server.url, TimelyConnection)
            await r.ping()
            server.freeze()
            try:
                started = time.monotonic()
                # A hang ends as asyncio's TimeoutError, which is not redis-py's: the test fails.
                with pytest.raises(redis.exceptions.TimeoutError, match=message):
                    await asyncio.wait_for(call(r), HANG_S)
                elapsed = time.monotonic() - started
                if while_frozen is not None:
                    await while_frozen(r)
            finally:
                server.thaw()
            assert await r.ping()
            if after is not None:
                await after(r)
            await r.aclose()
            return elapsed

        return asyncio.run(scenario())
    finally:
        server.stop()


def test_a_redis_that_never_answers_still_times_out():
    async def a_callers_own_timeout(r):
        with pytest.raises(TimeoutError):  # a caller's own cancellation still reaches the caller as one
            await asyncio.wait_for(r.get("k"), TIMEOUT_S / 3)

    elapsed = time_out_on_a_frozen_redis(lambda r: r.get("k"), "reading", while_frozen=a_callers_own_timeout)
    assert elapsed >= TIMEOUT_S * 0.9, f"gave up after {elapsed:.2f}s, before its timeout"


def test_a_send_that_redis_does_not_take_times_out():
    """A command larger than the sockets' buffers, to a frozen Redis: what the
    socket does not take waits for room under socket_timeout, and the send
    fails in about that long; the client then works again on a new connection."""

    async def half_a_command_never_ran(r):
        assert await r.exists("big") == 0

    big = b"x" * (64 << 20)  # made before the clock starts
    elapsed = time_out_on_a_frozen_redis(lambda r: r.set("big", big), "writing", after=half_a_command_never_ran)
    assert elapsed >= TIMEOUT_S * 0.9, f"gave up after {elapsed:.2f}s, before its timeout"


def test_a_workers_client_waits_for_a_slow_reply_that_the_lab_client_gives_up_on(redis_server):
    """worker_client has a connect timeout only (lab/redis_clients.py says why):
    a reply that comes after redis_timeout_s is read, where sync_client's
    socket timeout gives up on it. The reply is a BLPOP's, which Redis sends
    only once the test pushes: it comes when the test says, never by a race."""
    settings = Settings(redis_url=redis_server.url, redis_timeout_s=TIMEOUT_S)
    key = unique_key("slow-reply")
    waiting, impatient, probe = worker_client(settings), sync_client(settings), sync_client(settings)
    answer: dict = {}
    reader = threading.Thread(target=lambda: answer.update(reply=waiting.blpop([key], 0)), daemon=True)
    try:
        with pytest.raises(redis.exceptions.TimeoutError):
            impatient.blpop([key], 0)

        waiting.client_setname(key)  # on the one connection its BLPOP then uses

        def blocked_on_the_key() -> bool:
            return any(c.get("name") == key and c.get("cmd") == "blpop" for c in probe.client_list())

        reader.start()
        wait_until(blocked_on_the_key, HANG_S, "the worker client's BLPOP to reach Redis", interval=0.02)
        sent_by = time.monotonic()
        while time.monotonic() < sent_by + 2 * TIMEOUT_S:  # twice the timeout the lab client gives up after
            assert reader.is_alive() and not answer, answer
            time.sleep(TIMEOUT_S / 3)
        probe.rpush(key, b"late")
        reader.join(HANG_S)
        assert answer == {"reply": (key.encode(), b"late")}, answer
    finally:
        for c in (waiting, impatient, probe):
            c.close()
