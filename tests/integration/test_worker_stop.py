"""A worker stopped in the middle of a batch loses nothing.

SIGTERM: it finishes the tasks it is running (none is cut off), stops
cleanly, and once a worker runs again every task of the batch is completed,
each once. SIGKILL: the tasks it held, running or fetched ahead, come
back to another worker once its lease runs out, and the ledger ends exact (a
task cut off mid-run may run twice: a counted duplicate, never a second
completion). The leases are shortened through the libraries' own settings
(TASK_TIMEOUT_S=5, for the API too, since SAQ's and RQ's job timeouts are the
enqueuer's; it also sets SAQ's sweep to 10 s; the stream queues' reclaim is
5 s in every test, tests/lab.py), so each queue shows its own way back within
the test: arq's in-progress key, SAQ's sweep, Celery's visibility timeout, the
stream groups' XAUTOCLAIM (docket's on a timer at a quarter of its redelivery
timeout), Dramatiq's heartbeat housekeeping, RQ's abandoned
job (its started-job registry entry outlives the job's timeout by RQ's fixed
60 s: the longest test here), which a worker killed in its maintenance pass
would hold off for RQ's 15 minutes but for the lab's shorter lock."""

import signal
import time

import pytest
import redis

from lab.queues import BY_NAME, RQ_MAINTENANCE_LOCK_S, RQ_WORKER_TTL_S
from tests.lab import (
    ON_REDIS,
    SHORTENED,
    RedisServer,
    ledger,
    new_run,
    post_tasks,
    queue_depth,
    start_api,
    start_worker,
    wait_settled,
    wait_until,
)

QUEUES = list(ON_REDIS)
AT_LEAST_ONCE = [q for q in QUEUES if not BY_NAME[q].at_most_once]
AT_MOST_ONCE = [q for q in QUEUES if BY_NAME[q].at_most_once]


TASK_TIMEOUT_S = 5
REPLACEMENT_DELAY_S = {"celery": 2 * TASK_TIMEOUT_S}
# How long after a SIGKILL each library hands the dead worker's tasks back, at
# most (test_sigkill_mid_batch_loses_nothing says how each does it). The
# replacement must settle the batch within that and a margin for a busy
# machine: a task acknowledged too early, and so never coming back, fails the
# test after about a minute, not after the slowest queue's wait.
COME_BACK_S = {
    "arq": TASK_TIMEOUT_S + 10,
    "saq": 10 + TASK_TIMEOUT_S,
    "faststream": float(SHORTENED["FASTSTREAM_RECLAIM_S"]),
    "celery": 2 * TASK_TIMEOUT_S,
    "taskiq": float(SHORTENED["TASKIQ_RECLAIM_S"]),
    "dramatiq": 2 * TASK_TIMEOUT_S,
    "streaq": float(SHORTENED["STREAQ_IDLE_TIMEOUT_S"]),
    "rq": TASK_TIMEOUT_S + 60 + 10,
    # its sweep's jittered timer (a quarter of the timeout) adds up to a third
    "docket": 1.5 * float(SHORTENED["DOCKET_REDELIVERY_TIMEOUT_S"]),
}
SETTLE_MARGIN_S = 45


@pytest.fixture(scope="module")
def isolated():
    redis = RedisServer().start()
    api = start_api(redis.url, name="api-worker-stop", TASK_TIMEOUT_S=TASK_TIMEOUT_S)
    yield redis, api
    api.stop()
    redis.stop()


def stop_under_way(
    redis, api, queue: str, run: str, sig: signal.Signals, batch: int, exit_s: float, **env
) -> tuple[int, dict]:
    """Start a worker, send it the batch, and once a task is running send it
    `sig`; its exit code and the ledger's totals then.

    Running: the ledger shows an execution that started and has not ended
    (`unfinished`), which it shows about a second into a task (Ledger.start_later's
    half second, then the write's own linger): a condition, not a count of
    completed tasks, so a faster machine cannot finish the batch before the
    signal. The tasks must last well beyond that second (IO_LATENCY_MS)."""
    worker = start_worker(queue, redis.url, name=f"{queue}-{sig.name.lower()}-1", **env)
    try:
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, queue, "io/simple", batch))
        wait_until(lambda: running(api.url, run), 60, "a task of the batch to be running", interval=0.05)
        worker.signal(sig)
        code = worker.proc.wait(exit_s)
    finally:
        worker.stop()
    at_stop = ledger(api.url, run)["totals"]
    assert at_stop["pending"] > 0, f"the batch finished before {sig.name}: the test proved nothing"
    return code, at_stop


def running(api_url: str, run: str) -> bool:
    totals = (ledger(api_url, run) or {"totals": {}})["totals"]
    return totals.get("unfinished", 0) > 0


def settle_with_another_worker(
    redis, api, queue: str, run: str, sig: signal.Signals, batch: int, timeout: float, **env
) -> dict:
    worker = start_worker(queue, redis.url, name=f"{queue}-{sig.name.lower()}-2", **env)
    try:
        return wait_settled(api.url, run, batch, timeout=timeout)["totals"]
    finally:
        worker.stop()


@pytest.mark.parametrize("queue", QUEUES)
def test_sigterm_mid_batch_loses_nothing(isolated, queue):
    redis, api = isolated
    # More tasks than a worker runs and fetches ahead (Celery's prefetch: 4 x 3).
    run, batch = new_run(f"sigterm-{queue}"), 30
    # Each task sleeps 4 s: those running at SIGTERM have seconds left, which
    # the worker must give them (SHUTDOWN_GRACE_S, 20 s here). One that cuts
    # them off leaves executions that started and never ended.
    env = {"IO_LATENCY_MS": 4000}
    code, at_stop = stop_under_way(redis, api, queue, run, signal.SIGTERM, batch, exit_s=40, **env)
    assert code in (0, -signal.SIGTERM), f"{queue} worker exited with {code}"
    assert at_stop["unfinished"] == 0, f"{queue} cut off the tasks it was running at SIGTERM: {at_stop}"
    assert at_stop["failed"] == 0 and at_stop["duplicates"] == 0, at_stop

    # The next worker's tasks need not sleep: what is tested is that it gets them all.
    totals = settle_with_another_worker(redis, api, queue, run, signal.SIGTERM, batch, timeout=120)
    assert totals["completed"] == batch and totals["failed"] == 0 and totals["pending"] == 0, totals
    # Nothing was cut off, so nothing runs twice.
    assert totals["duplicates"] == 0 and totals["unfinished"] == 0, totals


@pytest.mark.parametrize("queue", AT_LEAST_ONCE)
def test_sigkill_mid_batch_loses_nothing(isolated, queue):
    redis, api = isolated
    run, batch = new_run(f"sigkill-{queue}"), 60
    # Tasks are running, and others wait in the worker, when the kill comes;
    # each lasts well under its lease (TASK_TIMEOUT_S). The kill comes about a
    # second into tasks of 2.5 s, with the worker's prefetch full: no fetch is
    # under way, so Celery's gap between kombu's pop and its record
    # (lost_in_fetch, lab/queues.py) is not at stake and nothing may be lost.
    env = {"IO_LATENCY_MS": 2500, "TASK_TIMEOUT_S": TASK_TIMEOUT_S}
    stop_under_way(redis, api, queue, run, signal.SIGKILL, batch, exit_s=10, **env)

    # Each library takes the dead worker's tasks back once their lease has run
    # out, at its own pace: SAQ's sweep every 10 s, arq's in-progress key after
    # TASK_TIMEOUT_S + 10 s, Dramatiq's housekeeping after a heartbeat that old,
    # RQ's maintenance once an abandoned job's registry entry has expired
    # (TASK_TIMEOUT_S + 60 s after it started). kombu restores at a worker's
    # start, then only every 100 s: Celery's replacement starts once its
    # visibility timeout (2 x TASK_TIMEOUT_S) has passed, so that first restore
    # takes every task back; the other replacements start at once. Their tasks
    # need not sleep.
    time.sleep(REPLACEMENT_DELAY_S.get(queue, 0))
    totals = settle_with_another_worker(
        redis,
        api,
        queue,
        run,
        signal.SIGKILL,
        batch,
        COME_BACK_S[queue] + SETTLE_MARGIN_S,
        TASK_TIMEOUT_S=TASK_TIMEOUT_S,
    )
    assert totals["completed"] == batch and totals["failed"] == 0 and totals["pending"] == 0, totals
    assert totals["enqueued"] == batch, totals


@pytest.mark.parametrize("queue", AT_MOST_ONCE)
def test_sigkill_loses_at_most_the_running_tasks_and_no_other(isolated, queue):
    """A queue that delivers at most once (Huey: a message leaves the list as
    a worker starts it, with no acknowledgement) loses what the killed worker
    was running, at most one task per concurrent slot, and nothing else: the
    rest of the batch is completed by the next worker, each task once."""
    redis, api = isolated
    run, batch, concurrency = new_run(f"sigkill-{queue}"), 60, 3
    env = {"TASK_TIMEOUT_S": TASK_TIMEOUT_S, "CONCURRENCY": concurrency}
    stop_under_way(redis, api, queue, run, signal.SIGKILL, batch, exit_s=10, IO_LATENCY_MS=2500, **env)
    # With no consumer alive, Huey's list holds exactly what is left to run,
    # and the ledger no longer moves: the replacement must complete those, each once.
    queued, done = queue_depth(redis.url, queue), ledger(api.url, run)["totals"]["completed"]

    worker = start_worker(queue, redis.url, name=f"{queue}-sigkill-2", **env)
    try:

        def the_rest_done() -> bool:
            completed = ledger(api.url, run)["totals"]["completed"]
            idle = queue_depth(redis.url, queue) == 0 and worker.metrics().value("lab_tasks_in_progress") == 0
            return completed >= done + queued and idle

        wait_until(the_rest_done, 90, f"the {queued:.0f} queued tasks of the batch to be done")
        totals = ledger(api.url, run)["totals"]
    finally:
        worker.stop()
    lost = batch - totals["completed"]
    assert 0 < lost <= concurrency, totals
    assert totals["pending"] == lost and totals["failed"] == 0 and totals["duplicates"] == 0, totals


def test_rqs_maintenance_lock_outlives_a_killed_holder_by_a_minute_not_a_quarter_hour(lab):
    """RQ's worker takes its maintenance lock for each pass and deletes it as the pass
    ends; one killed in its pass (its node's death) leaves the lock to expire, and no
    worker's maintenance, which brings back the dead worker's job, runs meanwhile.
    The lab's rq worker takes it for RQ_MAINTENANCE_LOCK_S, not RQ's 899 s: read here
    from the command the running worker sends Redis (MONITOR)."""
    key = b"rq:clean_registries:lab"
    client = redis.Redis.from_url(lab.redis.url)
    with client.monitor() as monitor:
        # An idle worker takes the lock between two dequeues (every RQ_WORKER_TTL_S - 15 s).
        deadline = time.monotonic() + 4 * RQ_WORKER_TTL_S + 60  # a bound for a hung worker, not a speed
        seen = None
        for event in monitor.listen():
            words = event["command"].encode().split()
            if words[:2] == [b"SET", key]:
                seen = words
                break
            assert time.monotonic() < deadline, "the rq worker took no maintenance lock"
    assert seen is not None and b"EX" in seen, seen
    assert int(seen[seen.index(b"EX") + 1]) == RQ_MAINTENANCE_LOCK_S, seen
