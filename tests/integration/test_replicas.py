"""Two replicas of a worker split the work without duplicates; FastStream on
pub/sub (the original experiment's setup) duplicates, and the ledger sees it."""

import os
import signal
from contextlib import contextmanager, nullcontext

import pytest

from tests.lab import (
    ON_REDIS,
    api_process,
    new_run,
    post_tasks,
    start_together,
    start_worker,
    wait_settled,
    wait_until,
    worker_process,
)

COUNT = 100


@pytest.mark.parametrize("queue", ON_REDIS)
def test_two_replicas_never_duplicate(lab, queue):
    first = lab.workers[queue]
    second = start_worker(queue, lab.redis.url, name=f"{queue}-replica-2")
    replicas = (first, second)
    labels = {"queue": queue, "kind": "io", "variant": "simple"}

    def completed(p) -> float:
        return p.metrics().value("lab_task_completed_total", **labels)

    try:
        before = [completed(p) for p in replicas]
        sent, done = 0, [0.0, 0.0]
        for batch in range(3):
            # A replica can take a whole batch of instant tasks before the other
            # polls again (Dramatiq's idle consumer backs off to a poll a second):
            # then the next batch is sent while that one is paused, until the
            # other has run some of it (a replica that cannot take tasks times
            # out). A paused replica's pending blocking pop may hold a message.
            idle = done.index(0) if batch and 0 in done else None
            run = new_run(f"replicas-{queue}-{batch}")
            with paused(replicas[1 - idle]) if idle is not None else nullcontext():
                assert all(r.status_code == 202 for r in post_tasks(lab.api.url, run, queue, "io/simple", COUNT))
                if idle is not None:
                    replica, base = replicas[idle], before[idle]
                    wait_until(
                        lambda replica=replica, base=base: completed(replica) > base,
                        60,
                        f"{replica.name} to run tasks while the other is paused",
                    )
            totals = wait_settled(lab.api.url, run, COUNT)["totals"]
            assert totals == {
                "enqueued": COUNT,
                "started": COUNT,
                "completed": COUNT,
                "failed": 0,
                "duplicates": 0,
                "purged": 0,
                "pending": 0,
                "unfinished": 0,
            }
            sent += COUNT

            def added_up(sent: int = sent) -> list | None:
                done = [completed(p) - b for p, b in zip(replicas, before)]
                return done if sum(done) == sent else None

            done = wait_until(added_up, 10, "replica metrics to add up")
            if all(n > 0 for n in done):
                break
        # Split, not merely summed: a replica that took nothing would pass the sum.
        assert all(n > 0 for n in done), f"{queue}: tasks per replica {done} over {batch + 1} batch(es)"
    finally:
        second.stop()


@contextmanager
def paused(process):
    """`process` and every process it started (its session) stopped with
    SIGSTOP, then continued."""
    os.killpg(process.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(process.proc.pid, signal.SIGCONT)


@pytest.fixture
def pubsub_lab(lab):
    """FastStream on pub/sub: its own API and two subscribers on the shared Redis."""
    extra = {"FASTSTREAM_CHANNEL": "pubsub"}
    api = api_process(lab.redis.url, name="api-pubsub", **extra)
    subscribers = [worker_process("faststream", lab.redis.url, name=f"faststream-pubsub-{i}", **extra) for i in (1, 2)]
    start_together(api, *subscribers)
    try:
        yield api
    finally:
        for p in [*subscribers, api]:
            p.stop()


def test_faststream_pubsub_duplicates_are_counted(pubsub_lab):
    api = pubsub_lab
    run = new_run("pubsub")
    count = 50
    assert all(r.status_code == 202 for r in post_tasks(api.url, run, "faststream", "io/simple", count))
    assert wait_settled(api.url, run, count)["totals"]["completed"] == count
    # Both subscribers got every message: each task ran twice.
    report = wait_until(
        lambda: (r := wait_settled(api.url, run, count))["totals"]["duplicates"] == count and r,
        20,
        "every message's second delivery to be counted",
    )
    # Read once the duplicates are counted: each of the 2 x count executions
    # added its value (1) to the run's work.
    cell = report["queues"]["faststream"]["io/simple"]
    assert (cell["completed"], cell["duplicates"], cell["work"]) == (count, count, 2 * count), cell
