"""A worker killed (SIGKILL) in the middle of a batch loses nothing: the tasks it
held, running or fetched ahead, come back to another worker once its lease
runs out, and the ledger ends exact (a task cut off mid-run may run twice: a
counted duplicate, never a second completion).

The leases are shortened (TASK_TIMEOUT_S=5, the stream queues' reclaim 5 s),
so each queue shows its own way back within the test: arq's in-progress key,
SAQ's sweep, Celery's visibility timeout, the stream groups' XAUTOCLAIM,
Dramatiq's heartbeat housekeeping."""

import signal

import pytest

from services.protocol import BROKER_QUEUES
from tests.lab import RedisServer, ledger, new_run, post_tasks, start_api, start_worker, wait_settled, wait_until

BATCH = 60
LATENCY_MS = 200  # every task is still running, or waiting in the worker, when the kill comes
LEASES = {"TASK_TIMEOUT_S": 5, "FASTSTREAM_RECLAIM_S": 5, "TASKIQ_RECLAIM_S": 5, "STREAQ_IDLE_TIMEOUT_S": 5}


@pytest.fixture(scope="module")
def isolated():
    redis = RedisServer().start()
    api = start_api(redis.url, name="api-sigkill")
    yield redis, api
    api.stop()
    redis.stop()


@pytest.mark.parametrize("queue", [q.value for q in BROKER_QUEUES])
def test_sigkill_mid_batch_loses_nothing(isolated, queue):
    redis, api = isolated
    run = new_run(f"sigkill-{queue}")
    worker = start_worker(queue, redis.url, name=f"{queue}-sigkill-1", IO_LATENCY_MS=LATENCY_MS, **LEASES)
    try:
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, queue, "io/simple", BATCH))
        wait_until(lambda: ledger(api.url, run)["totals"]["completed"] >= 6, 60, "the batch to be under way")
        worker.signal(signal.SIGKILL)
        worker.proc.wait(10)
    finally:
        worker.stop()
    at_kill = ledger(api.url, run)["totals"]
    assert at_kill["pending"] > 0, "the batch finished before the kill: the test proved nothing"

    again = start_worker(queue, redis.url, name=f"{queue}-sigkill-2", IO_LATENCY_MS=LATENCY_MS, **LEASES)
    try:
        # SAQ's sweep runs once a minute: the slowest way back here.
        totals = wait_settled(api.url, run, BATCH, timeout=150)["totals"]
    finally:
        again.stop()
    assert totals["completed"] == BATCH and totals["failed"] == 0 and totals["pending"] == 0, totals
    assert totals["enqueued"] == BATCH, totals
