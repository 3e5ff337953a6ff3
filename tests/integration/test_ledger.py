"""The ledger's rules against a real redis-server: a task settles once and its
duplicates are counted, enqueue counts are written once, a run's reset touches
nothing else, settles wait for Redis to come back, the blocking bodies and the
Redis links."""

import asyncio

import pytest
import redis.asyncio as aioredis

from lab.ledger import Ledger
from lab.ledger.executions import SettleCommands, executions_call
from lab.ledger.keys import enqueue_token_key, run_key
from lab.protocol import ENDPOINTS, Kind, Queue, TaskMessage, Variant
from lab.redis_clients import REDIS_DOWN, _pack
from lab.settings import Settings
from tests.lab import RedisServer, cell, new_run


@pytest.fixture
def ledger_redis(redis_server):
    return redis_server.url


def msg(run: str, queue=Queue.arq, value=2) -> TaskMessage:
    return TaskMessage.new(run, queue, Kind.io, Variant.simple, value)


def test_a_lone_settle_is_packed_byte_for_byte_as_the_generic_packer_packs_it():
    commands = SettleCommands("f" * 40)
    for run, value, write, started in (
        ("run-1", 3, True, False),
        ("r.2_x", 7, False, True),
        ("run-1", 2**40, True, True),
    ):
        task = TaskMessage.new(run, Queue.saq, Kind.cpu, Variant.process, value)
        for op in ("completed", "failed"):
            item = (op, task, write, started)
            keys, args = executions_call(run, [item], now=1795600000.123456)
            assert commands(1795600000.123456, *item) == _pack(("EVALSHA", "f" * 40, len(keys), *keys, *args))


def test_ledger_settles_once_and_counts_duplicates(ledger_redis):
    run = new_run("unit")

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        a, b, c = msg(run), msg(run), msg(run)
        for m in (a, b, c):
            await ledger.record_enqueued(m)
        for m in (a, a, b, b, c):  # c's execution is cut off: it never settles
            await ledger.record_started(m)
        assert await ledger.settle(a, "completed") is True
        assert await ledger.settle(a, "completed") is False  # ran twice
        assert await ledger.settle(b, "failed") is True
        assert await ledger.settle(b, "completed") is False  # a retry after a failure
        row = (await ledger.report(run))["queues"]["arq"]["io/simple"]
        await redis.aclose()
        return row

    row = asyncio.run(scenario())
    assert {
        k: row[k]
        for k in ("enqueued", "started", "completed", "failed", "duplicates", "pending", "unfinished", "value")
    } == {
        "enqueued": 3,
        "started": 5,
        "completed": 1,
        "failed": 1,
        "duplicates": 2,
        "pending": 1,
        "unfinished": 1,
        "value": 6,
    }


def test_a_resent_enqueue_count_write_is_applied_once(ledger_redis):
    """A write whose reply was lost is sent again with its token: Redis applies it once."""
    run = new_run("unit-idem")
    token = enqueue_token_key(new_run("token"))

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        for m in (msg(run), msg(run, value=5)):
            await ledger.record_enqueued(m)
        row = [run, run_key(run, "ledger"), "arq:io/simple", 2, 7, "1.5"]
        applied = [await ledger.enqueues._script(keys=[token], args=row) for _ in range(2)]
        report = (await ledger.report(run))["queues"]["arq"]["io/simple"]
        await redis.delete(token)
        await redis.aclose()
        return applied, report

    applied, row = asyncio.run(scenario())
    assert applied == [1, 0]
    assert (row["enqueued"], row["value"], row["pending"]) == (2 + 2, 2 + 5 + 7, 4)


def test_a_ledger_read_does_not_wait_for_the_writers_linger(ledger_redis):
    """Counts waiting for company are written at once when a reader asks
    (GET /runs/<run> allows them REDIS_TIMEOUT_S), and only then: they are
    not in Redis before."""
    run = new_run("unit-linger")

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        ledger.enqueues.linger_s = 60
        ledger.count_enqueued(msg(run))
        await asyncio.sleep(0.2)
        before = await ledger.report(run)
        await asyncio.wait_for(ledger.enqueues.written(), 5)
        after = (await ledger.report(run))["queues"]["arq"]["io/simple"]
        await redis.aclose()
        return before, after

    before, after = asyncio.run(scenario())
    assert before is None and after["enqueued"] == 1


def test_a_taken_back_enqueue_count_write_counts_nothing_whichever_lands_first(ledger_redis):
    """A failed write is taken back: if it had landed, its counts are subtracted;
    if it lands after the take-back (a frozen Redis), it is refused."""
    run = new_run("unit-undo")
    token_a, token_b = enqueue_token_key(new_run("a")), enqueue_token_key(new_run("b"))

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        await ledger.record_enqueued(msg(run))
        row = [run, run_key(run, "ledger"), "arq:io/simple", 2, 7, "1.5"]
        write, undo = ledger.enqueues._script, ledger.enqueues._undo_script
        landed_first = [
            await write(keys=[token_a], args=row),
            await undo(keys=[token_a], args=row),
        ]
        taken_first = [
            await undo(keys=[token_b], args=row),
            await write(keys=[token_b], args=row),
        ]
        report = (await ledger.report(run))["queues"]["arq"]["io/simple"]
        await redis.delete(token_a, token_b)
        await redis.aclose()
        return landed_first, taken_first, report

    landed_first, taken_first, row = asyncio.run(scenario())
    assert landed_first == [1, 1] and taken_first == [0, 0]
    assert (row["enqueued"], row["value"], row["pending"]) == (1, 2, 1)


def test_a_refused_enqueue_is_counted_once_if_it_ever_settles_whichever_is_written_first(ledger_redis):
    """A task answered 503 whose broker had it all the same runs: it is counted
    enqueued by whichever of its note and its settle reaches Redis second, once
    (a note sent again applies once); a refused task that never runs counts
    nothing."""
    run = new_run("unit-refused")

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        accepted, noted_first, settled_first, never_ran = msg(run, value=1), msg(run, value=3), msg(run), msg(run)
        await ledger.record_enqueued(accepted)
        for m in (noted_first, never_ran):
            ledger.count_refused(m)
        await asyncio.wait_for(ledger.enqueues.written(), 10)
        after_notes = await ledger.report(run)
        for m in (accepted, noted_first, settled_first):
            assert await ledger.settle(m, "completed", write=True) is True
        before_note = await ledger.report(run)
        for _ in range(2):  # the second: a write whose reply was lost, sent again
            ledger.count_refused(settled_first)
            ledger.count_refused(noted_first)
        await asyncio.wait_for(ledger.enqueues.written(), 10)
        report = await ledger.report(run)
        await redis.aclose()
        return after_notes, before_note, report

    after_notes, before_note, report = asyncio.run(scenario())
    assert after_notes["totals"]["enqueued"] == 1 and after_notes["enqueued_after_error"] == 0
    assert before_note["totals"]["pending"] == -1 and before_note["enqueued_after_error"] == 1
    assert cell(report, "arq") == dict(enqueued=3, completed=3, pending=0, value=6, work=6), report
    assert report["enqueued_after_error"] == 2, report


def test_a_publish_that_failed_after_its_202_and_ran_is_counted_enqueued_not_as_a_503(ledger_redis):
    """ENQUEUE_MODE=after-response: the outbox's publish fails after the 202
    (its reply lost), the task runs. It is counted enqueued, as its 202 was,
    whichever of note and settle comes second; `enqueued_after_error` counts
    only the task answered 503."""
    run = new_run("unit-refused-accepted")

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        noted_first, settled_first, answered_503 = msg(run, value=2), msg(run, value=5), msg(run, value=7)
        ledger.count_refused(noted_first, accepted=True)
        ledger.count_refused(answered_503)
        await asyncio.wait_for(ledger.enqueues.written(), 10)
        for m in (noted_first, settled_first, answered_503):
            assert await ledger.settle(m, "completed", write=True) is True
        ledger.count_refused(settled_first, accepted=True)
        await asyncio.wait_for(ledger.enqueues.written(), 10)
        report = await ledger.report(run)
        await redis.aclose()
        return report

    report = asyncio.run(scenario())
    assert cell(report, "arq") == dict(enqueued=3, completed=3, pending=0, value=14, work=14), report
    assert report["enqueued_after_error"] == 1, report


def test_failed_enqueues_waiting_to_be_noted_are_bounded_and_those_dropped_said(ledger_redis, caplog):
    """Notes wait in memory while Redis is away; past MAX_REFUSED the rest are
    dropped with a warning, not held until the API runs out of memory."""
    run = new_run("unit-refused-cap")

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        ledger.enqueues.MAX_REFUSED = 2
        for _ in range(3):  # no await between: all three wait for the writer
            ledger.count_refused(msg(run))
        await asyncio.wait_for(ledger.enqueues.written(), 10)
        ledger.count_refused(msg(run))  # the held notes were written: room again
        await asyncio.wait_for(ledger.enqueues.written(), 10)
        noted = await redis.hlen(run_key(run, "refused"))
        await redis.aclose()
        return noted

    assert asyncio.run(scenario()) == 3
    assert "1 failed enqueue(s) not noted" in caplog.text, caplog.text


def test_reset_of_one_run_touches_nothing_else():
    keep, drop = new_run("unit-keep"), new_run("unit-drop")
    # A Redis of its own: the suite's arq worker would take the job from lab:arq:queue.
    server = RedisServer().start()

    async def scenario():
        redis = aioredis.Redis.from_url(server.url)
        ledger = Ledger(redis)
        await redis.set("someone-elses-key", "keep")
        await redis.zadd("lab:arq:queue", {"job": 1})
        for run in (keep, drop):
            m = msg(run)
            await ledger.record_enqueued(m)
            await ledger.settle(m, "completed")
        await ledger.reset(drop)
        result = (
            await ledger.report(drop),
            await ledger.report(keep),
            await redis.get("someone-elses-key"),
            await redis.zcard("lab:arq:queue"),
        )
        await redis.delete("someone-elses-key", "lab:arq:queue")
        await redis.aclose()
        return result

    try:
        dropped, kept, other, queued = asyncio.run(scenario())
    finally:
        server.stop()
    assert dropped is None and kept["totals"]["completed"] == 1
    assert other == b"keep" and queued == 1


def test_a_settle_waits_for_redis_to_come_back_and_counts_once():
    """A task that ran while Redis was away is settled once Redis returns, not
    left pending for ever."""
    run = new_run("unit-retry")
    server = RedisServer(persist=True).start()

    async def scenario():
        redis = aioredis.Redis.from_url(server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
        ledger = Ledger(redis)
        a, b = msg(run), msg(run)
        for m in (a, b):
            await ledger.record_enqueued(m)
        assert await ledger.settle(a, "completed") is True
        server.stop()
        with pytest.raises(REDIS_DOWN):
            await ledger.settle(b, "completed")  # without retry_s, as before
        waiting = asyncio.create_task(ledger.settle(b, "completed", retry_s=30))
        await asyncio.sleep(2)
        assert not waiting.done()
        server.start()
        assert await waiting is True
        row = (await ledger.report(run))["queues"]["arq"]["io/simple"]
        await redis.aclose()
        return row

    try:
        row = asyncio.run(scenario())
    finally:
        server.stop()
    assert (row["enqueued"], row["completed"], row["duplicates"], row["pending"]) == (2, 2, 0, 0)


def test_a_blocking_settle_counts_once_and_waits_for_redis_to_come_back():
    """BlockingSettle (Celery's prefork and solo children) keeps the async
    settle's rules: one first settle per task, every later one a duplicate,
    its start counted in its own write, and a settle that finds Redis away
    waits for it."""
    import threading

    from lab.ledger import BlockingSettle
    from lab.redis_clients import sync_client

    server = RedisServer(persist=True).start()
    settings = Settings(redis_url=server.url, redis_timeout_s=0.5)
    blocking = BlockingSettle(sync_client(settings))
    run = new_run("unit-blocking")
    a, b, c = (msg(run) for _ in range(3))

    async def enqueue():
        redis = aioredis.Redis.from_url(server.url)
        for m in (a, b, c):
            await Ledger(redis).record_enqueued(m)
        await redis.aclose()

    async def report():
        redis = aioredis.Redis.from_url(server.url)
        out = await Ledger(redis).report(run)
        await redis.aclose()
        return out

    try:
        asyncio.run(enqueue())
        assert blocking.settle(a, "completed", write=True) is True
        assert blocking.settle(a, "completed", write=True) is False  # ran twice
        assert blocking.settle(b, "failed") is True
        assert blocking.settle(b, "completed") is False  # a retry after a failure
        server.stop()
        with pytest.raises(REDIS_DOWN):
            blocking.settle(c, "completed")  # without retry_s
        result = {}
        waiting = threading.Thread(target=lambda: result.update(first=blocking.settle(c, "completed", retry_s=30)))
        waiting.start()
        waiting.join(2)
        assert waiting.is_alive()
        server.start()
        waiting.join(10)
        assert result == {"first": True}
        report = asyncio.run(report())
    finally:
        server.stop()
    row = report["queues"]["arq"]["io/simple"]
    assert {
        k: row[k] for k in ("enqueued", "started", "completed", "failed", "duplicates", "pending", "unfinished", "work")
    } == {
        "enqueued": 3,
        "started": 5,
        "completed": 2,
        "failed": 1,
        "duplicates": 2,
        "pending": 0,
        "unfinished": 0,
        "work": 4,
    }  # a's value twice: once per execution that wrote it


def assert_every_shape_completed_once(report: dict, queue: str, work: int) -> None:
    """Every task shape of `queue` in a run's report: enqueued, started and completed once, its value written."""
    rows = report["queues"][queue]
    assert len(rows) == len(ENDPOINTS)
    for endpoint, row in rows.items():
        assert {k: row[k] for k in ("enqueued", "started", "completed", "duplicates", "pending", "work")} == {
            "enqueued": 1,
            "started": 1,
            "completed": 1,
            "duplicates": 0,
            "pending": 0,
            "work": work,
        }, endpoint


def test_run_blocking_runs_loop_free_bodies_without_the_loop_and_the_rest_on_it(redis_server):
    """Celery's prefork and solo children call TaskRunner.run_blocking: every
    task shape completes once and writes its value, and only the shapes that
    await (io/thread, cpu/process) start the event loop."""
    from lab.runner import TaskRunner

    class CountingLoop(asyncio.SelectorEventLoop):
        runs = 0

        def run_until_complete(self, future):
            self.runs += 1
            return super().run_until_complete(future)

    settings = Settings(redis_url=redis_server.url, cpu_work=1000, process_pool_size=1)
    runner, loop = TaskRunner(settings), CountingLoop()
    run = new_run("unit-run-blocking")
    msgs = [TaskMessage.new(run, Queue.celery, kind, variant, 3) for kind, variant in ENDPOINTS]

    async def enqueue():
        for m in msgs:
            await runner.ledger.record_enqueued(m)

    try:
        loop.run_until_complete(enqueue())
        loop.runs = 0
        for m in msgs:
            runner.run_blocking(m.payload(), lambda: loop)
        assert loop.runs == 2
        report = loop.run_until_complete(runner.ledger.report(run))
        loop.run_until_complete(runner.close())
    finally:
        loop.close()
    assert_every_shape_completed_once(report, "celery", work=3)


def test_a_link_keeps_its_connection_in_step_through_a_restart_and_a_frozen_redis():
    """The ledger's kept connection (Link): a script runs by its SHA; after a
    Redis restart (connection closed, script cache empty) the next call opens a
    new connection and sends the script's body; a call that times out on a
    frozen Redis drops its connection, so the next call reads its own reply,
    never the late one."""
    from lab.redis_clients import Link, async_client

    server = RedisServer().start()

    async def scenario():
        redis = async_client(Settings(redis_url=server.url, redis_timeout_s=0.5))
        link = Link(redis)
        script = redis.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        first = [await link.script(script, ["k"], [2]), await link.execute("GET", "k")]
        conn = link._conn
        server.stop()
        server.start()  # empty: no key, no script
        await asyncio.sleep(0.2)  # the loop sees the close, as a running worker's does during a restart
        after_restart = [await link.script(script, ["k"], [5]), await link.execute("INCRBY", "k", 1)]
        server.freeze()
        try:
            with pytest.raises(REDIS_DOWN):
                await link.execute("INCRBY", "k", 100)
        finally:
            server.thaw()
        late = await link.execute("GET", "k")  # 106: the frozen INCRBY ran on thaw; its reply was not read here
        with pytest.raises(Exception, match="WRONGTYPE|wrong kind"):
            await link.execute("LPUSH", "k", "x")  # an error reply keeps the connection
        kept = link._conn is conn and link._conn.is_connected
        await redis.aclose()
        return first, after_restart, late, kept

    try:
        first, after_restart, late, kept = asyncio.run(scenario())
    finally:
        server.stop()
    assert first == [2, b"2"] and after_restart == [5, 6] and late == b"106" and kept


def test_hueys_thread_workers_start_the_loop_thread_only_for_a_body_that_awaits(redis_server, monkeypatch):
    """Huey's thread workers run a body that never awaits themselves: the
    event loop's thread starts with the first task that awaits, not before,
    and every task shape completes once and writes its value."""
    import threading

    from lab.redis_clients import async_client
    from lab.settings import get_settings

    env = {"REDIS_URL": redis_server.url, "CPU_WORK": "1000", "PROCESS_POOL_SIZE": "1", "HUEY_WORKER_TYPE": "thread"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()  # the worker's loop reads its settings from the environment
    settings = get_settings()
    from workers.huey_queue import _HueyLoop

    def loop_threads() -> int:
        return sum(t.name == "lab-loop" for t in threading.enumerate())

    run, process_loop, before = new_run("unit-huey-threads"), _HueyLoop(), loop_threads()
    msgs = {(kind, variant): TaskMessage.new(run, Queue.huey, kind, variant, 3) for kind, variant in ENDPOINTS}
    awaiting = [(Kind.io, Variant.thread), (Kind.cpu, Variant.process)]

    async def ledger(call):
        redis = async_client(settings)
        try:
            return await call(Ledger(redis))
        finally:
            await redis.aclose()

    async def enqueue(ledger):
        for m in msgs.values():
            await ledger.record_enqueued(m)

    try:
        asyncio.run(ledger(enqueue))
        for shape, m in msgs.items():
            if shape not in awaiting:
                process_loop.run(m.payload())
        assert loop_threads() == before
        for shape in awaiting:
            process_loop.run(msgs[shape].payload())
        assert loop_threads() == before + 1
    finally:
        process_loop.stop()
        # Not kept for later tests: the next get_settings() reads the restored environment.
        get_settings.cache_clear()
    assert_every_shape_completed_once(asyncio.run(ledger(lambda ledger: ledger.report(run))), "huey", work=3)
