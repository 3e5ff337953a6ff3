"""Small pieces on their own: cgroup reading, settings, the ledger's rules."""

import asyncio
import os
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from lab.cgroup import read_cgroup
from lab.ledger import Ledger
from lab.ledger.executions import SettleCommands, executions_call
from lab.protocol import _VALIDATOR, ENDPOINTS, Kind, Queue, TaskMessage, Variant
from lab.queues import BROKERS
from lab.redis_clients import REDIS_DOWN, _pack
from lab.settings import Settings
from tests.lab import ROOT, RedisServer


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_cgroup_v2_with_limits(tmp_path):
    root = write(
        tmp_path,
        {
            "cgroup.controllers": "cpu memory",
            "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\nnr_throttled 4\nthrottled_usec 750000\n",
            "cpu.max": "20000 100000",
            "memory.current": "104857600",
            "memory.stat": "anon 73400320\nfile 31457280\nactive_file 10485760\ninactive_file 20971520\n",
            "memory.max": "209715200",
            "memory.events": "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n",
        },
    )
    s = read_cgroup(root)
    assert (s.cpu_seconds, s.throttled_seconds, s.cpu_limit_cores) == (2.5, 0.75, 0.2)
    # the working set leaves out inactive page cache; the raw usage keeps it
    assert (s.memory_bytes, s.memory_usage_bytes) == (104857600 - 20971520, 104857600)
    assert (s.memory_limit_bytes, s.oom_kills) == (209715200, 2)


def test_cgroup_v2_without_limits_reports_the_host(tmp_path):
    root = write(
        tmp_path,
        {
            "cgroup.controllers": "",
            "cpu.stat": "usage_usec 1\n",
            "cpu.max": "max 100000",
            "memory.current": "1",
            "memory.max": "max",
        },
    )
    s = read_cgroup(root)
    assert s.cpu_limit_cores >= 1 and s.memory_limit_bytes > 1024**2


def test_cgroup_v1_with_limits(tmp_path):
    root = write(
        tmp_path,
        {
            "cpuacct/cpuacct.usage": "3000000000",
            "cpu/cpu.stat": "nr_periods 10\nnr_throttled 2\nthrottled_time 500000000\n",
            "cpu/cpu.cfs_quota_us": "50000",
            "cpu/cpu.cfs_period_us": "100000",
            "memory/memory.usage_in_bytes": "1048576",
            "memory/memory.stat": "cache 524288\ninactive_file 4096\ntotal_inactive_file 262144\n",
            "memory/memory.limit_in_bytes": "524288000",
            "memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        },
    )
    s = read_cgroup(root)
    assert (s.cpu_seconds, s.throttled_seconds, s.cpu_limit_cores) == (3.0, 0.5, 0.5)
    assert (s.memory_bytes, s.memory_usage_bytes) == (1048576 - 262144, 1048576)
    assert (s.memory_limit_bytes, s.oom_kills) == (524288000, 3)


def test_cgroup_v1_unlimited_memory_is_the_host(tmp_path):
    root = write(
        tmp_path,
        {
            "cpu/cpu.cfs_quota_us": "-1",
            "cpu/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": "9223372036854771712",
        },
    )
    s = read_cgroup(root)
    assert s.memory_limit_bytes < 9223372036854771712 and s.cpu_limit_cores >= 1


def test_concurrency_knob_and_overrides(monkeypatch):
    monkeypatch.setenv("CONCURRENCY", "5")
    for broker in BROKERS:
        monkeypatch.delenv(broker.concurrency_knob, raising=False)
    monkeypatch.setenv("SAQ_CONCURRENCY", "7")
    s = Settings(_env_file=None)
    assert {b.name: s.concurrency_for(b.name) for b in BROKERS} == {
        b.name: 7 if b.name == "saq" else 5 for b in BROKERS
    }


def test_bad_knob_is_refused(monkeypatch):
    monkeypatch.setenv("ENQUEUE_MODE", "sometimes")
    with pytest.raises(ValueError):
        Settings(_env_file=None)


@pytest.mark.parametrize(("reclaim_s", "poll_ms"), [(60, 5000), (24, 2000), (5, 1000), (0.5, 1000), (600, 5000)])
def test_faststream_reclaimer_looks_every_twelfth_of_the_reclaim_delay_within_1_to_5_s(reclaim_s, poll_ms):
    from workers.faststream_queue import reclaim_poll_ms

    assert reclaim_poll_ms(Settings(_env_file=None, faststream_reclaim_s=reclaim_s)) == poll_ms


@pytest.fixture
def ledger_redis(redis_server):
    return redis_server.url


def msg(run: str, queue=Queue.arq, value=2) -> TaskMessage:
    return TaskMessage.new(run, queue, Kind.io, Variant.simple, value)


def _outcome(validate, payload):
    """What a validator makes of a payload: the message, or where the fields it rejects are."""
    try:
        return validate(payload)
    except ValidationError as exc:
        return sorted(str(e["loc"]) for e in exc.errors())


def _validated(payload):
    return _outcome(TaskMessage.validate, payload)


def _validated_by_pydantic(payload):
    return _outcome(_VALIDATOR.validate_python, payload)


def test_a_message_is_checked_by_the_few_lines_exactly_as_pydantic_checks_it():
    ok = TaskMessage.new("run-1", Queue.saq, Kind.cpu, Variant.process, 7)
    wrong = [
        {},
        {"run": "x y"},
        {"run": "a\n"},
        {"run": "-a"},
        {"run": "r" * 65},
        {"run": 5},
        {"task_id": 1},
        {"queue": "nope"},
        {"queue": ["saq"]},
        {"kind": "IO"},
        {"variant": None},
        {"value": "3"},
        {"value": 2.0},
        {"value": 2.5},
        {"value": True},
        {"value": None},
        {"enqueued_at": 3},
        {"enqueued_at": "3.5"},
        {"enqueued_at": None},
        {"extra": 1},
    ]
    assert TaskMessage.validate(ok.payload()) == ok
    assert TaskMessage.validate({**ok.payload(), "extra": 1}) == ok  # unknown keys are ignored
    for change in wrong:
        payload = {**ok.payload(), **change}
        assert _validated(payload) == _validated_by_pydantic(payload), change
    for payload in ({k: v for k, v in ok.payload().items() if k != "value"}, None, [1], "text"):
        assert _validated(payload) == _validated_by_pydantic(payload), payload
    assert isinstance(_validated({**ok.payload(), "value": "x"}), list)  # rejected, naming the field


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
    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        a, b, c = msg("unit-1"), msg("unit-1"), msg("unit-1")
        for m in (a, b, c):
            await ledger.record_enqueued(m)
        for m in (a, a, b, b, c):  # c's execution is cut off: it never settles
            await ledger.record_started(m)
        assert await ledger.settle(a, "completed") is True
        assert await ledger.settle(a, "completed") is False  # ran twice
        assert await ledger.settle(b, "failed") is True
        assert await ledger.settle(b, "completed") is False  # a retry after a failure
        row = (await ledger.report("unit-1"))["queues"]["arq"]["io/simple"]
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

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        for m in (msg("unit-idem"), msg("unit-idem", value=5)):
            await ledger.record_enqueued(m)
        row = ["unit-idem", "lab:run:unit-idem:ledger", "arq:io/simple", 2, 7, "1.5"]
        applied = [
            await ledger.enqueues._script(keys=["lab:enqueue-write:unit-idem-token"], args=row) for _ in range(2)
        ]
        report = (await ledger.report("unit-idem"))["queues"]["arq"]["io/simple"]
        await redis.delete("lab:enqueue-write:unit-idem-token")
        await redis.aclose()
        return applied, report

    applied, row = asyncio.run(scenario())
    assert applied == [1, 0]
    assert (row["enqueued"], row["value"], row["pending"]) == (2 + 2, 2 + 5 + 7, 4)


def test_a_taken_back_enqueue_count_write_counts_nothing_whichever_lands_first(ledger_redis):
    """A failed write is taken back: if it had landed, its counts are subtracted;
    if it lands after the take-back (a frozen Redis), it is refused."""

    async def scenario():
        redis = aioredis.Redis.from_url(ledger_redis)
        ledger = Ledger(redis)
        await ledger.record_enqueued(msg("unit-undo"))
        row = ["unit-undo", "lab:run:unit-undo:ledger", "arq:io/simple", 2, 7, "1.5"]
        write, undo = ledger.enqueues._script, ledger.enqueues._undo_script
        landed_first = [
            await write(keys=["lab:enqueue-write:unit-undo-a"], args=row),
            await undo(keys=["lab:enqueue-write:unit-undo-a"], args=row),
        ]
        taken_first = [
            await undo(keys=["lab:enqueue-write:unit-undo-b"], args=row),
            await write(keys=["lab:enqueue-write:unit-undo-b"], args=row),
        ]
        report = (await ledger.report("unit-undo"))["queues"]["arq"]["io/simple"]
        await redis.delete("lab:enqueue-write:unit-undo-a", "lab:enqueue-write:unit-undo-b")
        await redis.aclose()
        return landed_first, taken_first, report

    landed_first, taken_first, row = asyncio.run(scenario())
    assert landed_first == [1, 1] and taken_first == [0, 0]
    assert (row["enqueued"], row["value"], row["pending"]) == (1, 2, 1)


def test_reset_of_one_run_touches_nothing_else():
    # A Redis of its own: the suite's arq worker would take the job from lab:arq:queue.
    server = RedisServer().start()

    async def scenario():
        redis = aioredis.Redis.from_url(server.url)
        ledger = Ledger(redis)
        await redis.set("someone-elses-key", "keep")
        await redis.zadd("lab:arq:queue", {"job": 1})
        for run in ("unit-keep", "unit-drop"):
            m = msg(run)
            await ledger.record_enqueued(m)
            await ledger.settle(m, "completed")
        await ledger.reset("unit-drop")
        result = (
            await ledger.report("unit-drop"),
            await ledger.report("unit-keep"),
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


def test_every_setting_is_documented_in_env_example():
    text = (Path(__file__).resolve().parents[1] / ".env.example").read_text()
    missing = [name.upper() for name in Settings.model_fields if f"{name.upper()}=" not in text]
    assert missing == []


def test_queue_and_delivery_tables_have_a_row_for_every_queue():
    """A queue added to lab/queues.py must be described where users read
    about the queues: its row in docs/queues.md's queue table and in its
    delivery table (tests/test_docs.py checks every other list of queues)."""
    from lab.queues import BROKER_NAMES

    readme = (Path(__file__).resolve().parents[1] / "docs" / "queues.md").read_text()

    def first_cells(header: str) -> set[str]:
        table = readme[readme.index(header) :].split("\n\n")[0].splitlines()[2:]
        return {row.split("|")[1].strip().strip("`") for row in table}

    assert first_cells("| queue | how tasks travel |") == {"background", *BROKER_NAMES}
    assert first_cells("| queue | a task is taken back when |") == {"background", *BROKER_NAMES}


def test_a_settle_waits_for_redis_to_come_back_and_counts_once():
    """A task that ran while Redis was away is settled once Redis returns, not
    left pending for ever."""
    server = RedisServer(persist=True).start()

    async def scenario():
        redis = aioredis.Redis.from_url(server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
        ledger = Ledger(redis)
        a, b = msg("unit-retry"), msg("unit-retry")
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
        row = (await ledger.report("unit-retry"))["queues"]["arq"]["io/simple"]
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
    a, b, c = (msg("unit-blocking") for _ in range(3))

    async def enqueue():
        redis = aioredis.Redis.from_url(server.url)
        for m in (a, b, c):
            await Ledger(redis).record_enqueued(m)
        await redis.aclose()

    async def report():
        redis = aioredis.Redis.from_url(server.url)
        out = await Ledger(redis).report("unit-blocking")
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


def test_run_blocking_runs_loop_free_bodies_without_the_loop_and_the_rest_on_it(redis_server):
    """Celery's prefork and solo children call TaskRunner.run_blocking: every
    task shape completes once and writes its value, and only the shapes that
    await (io/thread, cpu/process) start the event loop."""
    from lab.protocol import ENDPOINTS
    from lab.runner import TaskRunner

    class CountingLoop(asyncio.SelectorEventLoop):
        runs = 0

        def run_until_complete(self, future):
            self.runs += 1
            return super().run_until_complete(future)

    settings = Settings(redis_url=redis_server.url, cpu_work=1000, process_pool_size=1)
    runner, loop = TaskRunner(settings), CountingLoop()
    msgs = [TaskMessage.new("unit-run-blocking", Queue.celery, kind, variant, 3) for kind, variant in ENDPOINTS]

    async def enqueue():
        for m in msgs:
            await runner.ledger.record_enqueued(m)

    try:
        loop.run_until_complete(enqueue())
        loop.runs = 0
        for m in msgs:
            runner.run_blocking(m.payload(), loop)
        assert loop.runs == 2
        report = loop.run_until_complete(runner.ledger.report("unit-run-blocking"))
        loop.run_until_complete(runner.close())
    finally:
        loop.close()
    for endpoint, row in report["queues"]["celery"].items():
        assert {k: row[k] for k in ("enqueued", "started", "completed", "duplicates", "pending", "work")} == {
            "enqueued": 1,
            "started": 1,
            "completed": 1,
            "duplicates": 0,
            "pending": 0,
            "work": 3,
        }, endpoint
    assert len(report["queues"]["celery"]) == len(ENDPOINTS)


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


def test_the_hot_paths_metric_updates_expose_what_prometheus_clients_own_calls_do():
    """Count and Observe add up in plain Python and flush() hands the totals to
    prometheus_client's children through their private parts
    (lab/metrics.py): the same updates through the public calls give the
    same exposition, bucket by bucket, however many flushes come between."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    from lab.metrics import LATENCY_BUCKETS, Count, Observe, flush

    def exposition(fast: bool) -> bytes:
        registry = CollectorRegistry()
        counter, gauge = Counter("c", "c", ("q",), registry=registry), Gauge("g", "g", ("q",), registry=registry)
        histogram = Histogram("h", "h", ("q",), buckets=LATENCY_BUCKETS, registry=registry)
        amounts = [0.0, 0.0005, 0.001, 0.0011, 0.05, 0.7, 2.5, 599.0, 600.0, 1200.0, 5000.0, float("inf")]
        c, g, h = counter.labels(q="a"), gauge.labels(q="a"), histogram.labels(q="a")
        if fast:
            inc, up, observe = Count(c), Count(g), Observe(h)
            for i, amount in enumerate(amounts):
                inc.value += 1
                up.value += 1
                observe(amount)
                if i % 5 == 4:
                    flush()
            up.value -= 1
            flush()
        else:
            for amount in amounts:
                c.inc(), g.inc(), h.observe(amount)
            g.dec()
        return b"\n".join(line for line in generate_latest(registry).splitlines() if b"_created" not in line)

    assert exposition(fast=True) == exposition(fast=False)
    assert b'h_bucket{le="0.001",q="a"} 3.0' in exposition(fast=True)  # a bound is inclusive


def test_dramatiqs_metrics_counted_by_the_lab_read_as_dramatiqs_own_middleware_counts_them(monkeypatch):
    """LabPrometheus (workers/dramatiq_queue.py) counts Dramatiq's series
    through Count and Observe, each worker thread into series of its own:
    the same hooks, called from three threads, give the samples Dramatiq's
    own middleware gives from one, bucket by bucket."""
    import threading

    import dramatiq.middleware.prometheus as dramatiq_prometheus
    from dramatiq import Message

    import workers.dramatiq_queue as dq
    from lab.metrics import LibraryMetrics, flush, library_exporter

    clock = threading.local()  # each thread's "now", in ms
    for module in (dramatiq_prometheus, dq):
        monkeypatch.setattr(module, "current_millis", lambda: clock.now)

    def samples(middleware) -> list:
        with library_exporter():
            middleware.after_process_boot(None)

        def messages(thread: int) -> None:
            for i in range(40):
                message = Message(
                    queue_name="lab",
                    actor_name="lab_task" if i % 3 else "other",
                    args=(),
                    kwargs={},
                    options={"retries": 1} if i % 11 == 0 else {},
                    message_id=f"{thread}-{i}",
                )
                clock.now = 1000 * i
                if i % 7 == 0 or i % 19 == 18:
                    middleware.before_delay_message(None, message)
                if i % 19 == 18:
                    continue  # delayed, not run yet
                middleware.before_process_message(None, message)
                if i % 13 == 0:
                    continue  # still in progress
                clock.now += 9 * i  # 0 to 351 ms: several buckets
                middleware.after_process_message(None, message, exception=ValueError() if i % 5 == 0 else None)
                if i % 5 == 0:
                    middleware.after_nack(None, message)
                middleware.after_enqueue(None, message, None)
                middleware.after_skip_message(None, message)

        if isinstance(middleware, dq.LabPrometheus):
            threads = [threading.Thread(target=messages, args=(t,)) for t in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            flush()
        else:
            for t in range(3):
                messages(t)
        return sorted(
            (s.name, sorted(s.labels.items()), s.value)
            for metric in LibraryMetrics(middleware).collect()
            for s in metric.samples
            if not s.name.endswith("_created")
        )

    lab, dramatiqs = samples(dq.LabPrometheus()), samples(dramatiq_prometheus.Prometheus())
    assert lab == dramatiqs
    names = {name for name, _, value in lab if value}
    assert {
        "dramatiq_messages_inprogress",
        "dramatiq_delayed_messages_inprogress",
        "dramatiq_message_errors_total",
        "dramatiq_message_rejects_total",
        "dramatiq_message_retries_total",
    } <= names
    buckets = {dict(labels)["le"] for name, labels, value in lab if name.endswith("_bucket") and value}
    assert {"5.0", "100.0", "500.0"} <= buckets


def test_a_scrape_of_the_registry_sees_every_update_made_before_it():
    """No update waits for the flusher thread: collecting REGISTRY flushes first."""
    from prometheus_client import REGISTRY, generate_latest

    from lab.metrics import ENQUEUE_SECONDS, ENQUEUED, Count, Observe

    labels = {"queue": "arq", "kind": "cpu", "variant": "process"}
    count, seconds = Count(ENQUEUED.labels(**labels)), Observe(ENQUEUE_SECONDS.labels("arq"))
    before = ENQUEUED.labels(**labels)._value.get()
    count.value += 3
    seconds(0.0042)
    text = generate_latest(REGISTRY).decode()
    assert f'lab_enqueued_total{{kind="cpu",queue="arq",variant="process"}} {before + 3}' in text
    assert ENQUEUE_SECONDS.labels("arq")._sum.get() >= 0.0042


def test_a_forked_child_flushes_its_own_updates_and_not_its_parents():
    """Celery's prefork children are forked: each flushes (within FLUSH_S, by a
    thread of its own) what it added, never what its parent had not flushed yet."""
    import time

    from lab.metrics import ENQUEUED, FLUSH_S, Count, flush

    child_value = ENQUEUED.labels(queue="saq", kind="cpu", variant="process")._value
    count = Count(ENQUEUED.labels(queue="saq", kind="cpu", variant="process"))
    before = child_value.get()
    count.value += 5  # not flushed yet: the parent's
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            count.value += 2
            time.sleep(FLUSH_S * 1.5)
            os.write(write, repr(child_value.get()).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    seen_by_child = float(os.read(read, 100))
    os.close(read)
    flush()
    assert seen_by_child == before + 2
    assert child_value.get() == before + 5


def test_every_adapter_in_workers_has_its_row_in_the_queue_table():
    """lab/queues.py against what exists: an adapter module without its row
    would be a queue the API, the monitor and the tests silently leave out."""
    adapters = {p.name.removesuffix("_queue.py") for p in (ROOT / "workers").glob("*_queue.py")}
    assert adapters == {b.name for b in BROKERS}
    assert all(b.module == f"workers.{b.name}_queue" for b in BROKERS)


def test_the_enqueue_route_documents_and_accepts_exactly_the_enums_values():
    """The route types its path as Literals of the enums' values (services/api/routes/tasks.py):
    its schema still lists each enum, and what it hands on are the enums' members."""
    from services.api.app import create_app
    from services.api.routes.tasks import _KINDS, _QUEUES, _VARIANTS

    params = create_app().openapi()["paths"]["/api/v1/incr/{kind}/{variant}/{queue}"]["post"]["parameters"]
    schemas = {p["name"]: p["schema"] for p in params if p["in"] == "path"}
    # What the route must take, from the sources the rest of the lab reads: the
    # queue table (lab/queues.py) and the task shapes, not the enums themselves.
    expected = {
        "kind": ["io", "cpu"],
        "variant": ["simple", "sync", "thread", "process"],
        "queue": ["background", *(b.name for b in BROKERS)],
    }
    assert {k for k, _ in ENDPOINTS} == set(Kind) and {v for _, v in ENDPOINTS} == set(Variant)
    for name, enum, members in (("kind", Kind, _KINDS), ("variant", Variant, _VARIANTS), ("queue", Queue, _QUEUES)):
        assert schemas[name]["enum"] == expected[name], name
        assert sorted(members) == sorted(expected[name]), name
        assert all(members[value] is enum(value) for value in expected[name])


def test_the_api_routes_sit_in_the_apps_own_table_under_one_prefix():
    """services/api/app.py joins each route module's routes to the app's own
    table, under API_V1 (health and metrics at the root), with no included
    router between: FastAPI matches an included router through a layer of its
    own on every request. The enqueue route is matched first."""
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    from services.api.app import API_V1, create_app

    app = create_app()
    assert all(type(route) in (APIRoute, Route) for route in app.routes), [type(r) for r in app.routes]
    paths = [route.path for route in app.routes if isinstance(route, APIRoute)]
    assert paths[0] == f"{API_V1}/incr/{{kind}}/{{variant}}/{{queue}}"
    assert {p for p in paths if not p.startswith(f"{API_V1}/")} == {"/healthz", "/readyz", "/metrics"}
    assert {"/api/v1/runs", "/api/v1/runs/{run}", "/api/v1/clients", "/api/v1/payload"} <= set(paths)
