"""`make purge` against the real compose stack: a backlog emptied, every task
still counted, the workers as they were. Its tasks are sent with arq's worker
scaled to none, so the backlog is whole whatever the machine's speed;
tests/integration/test_purge.py covers the libraries' in-flight structures."""

import pytest

from tests.compose.helpers import post_tasks, run_report, wait_settled
from tests.lab import new_run

pytestmark = pytest.mark.compose

TASKS = 200


def scale_arq(stack, replicas: int) -> None:
    stack.compose("up", "--detach", "--no-deps", "--no-recreate", "--wait", "--scale", f"arq={replicas}", "arq")


def arq_replicas(stack) -> int:
    return len(stack.compose("ps", "-q", "--status", "running", "arq").stdout.split())


def test_make_purge_empties_arqs_backlog_and_counts_each_task_as_purged(stack):
    run, after = new_run("compose-purge"), new_run("compose-after-purge")
    scale_arq(stack, 0)
    try:
        post_tasks(stack.api_url, run, {"arq": TASKS, "saq": 5})
        out = stack.make("purge", "worker=arq", timeout=600).stdout
        assert f"arq: {TASKS} task(s) purged ({run} {TASKS})" in out, out
        assert "starting" not in out, out  # none ran before: none is started
        ledger = run_report(stack.api_url, run)
        row = ledger["queues"]["arq"]["io/simple"]
        assert (row["enqueued"], row["completed"], row["purged"], row["pending"]) == (TASKS, 0, TASKS, 0), row
        assert ledger["queues"]["saq"]["io/simple"]["purged"] == 0  # another queue's tasks are its own
    finally:
        scale_arq(stack, 1)

    # With the worker running, make purge stops it, finds nothing left, and starts it again.
    out = stack.make("purge", "worker=arq", timeout=600).stdout
    assert "arq: stopping its 1 worker(s)" in out and "arq: starting 1 worker(s) again" in out, out
    assert "arq: 0 task(s) purged, " in out, out
    assert arq_replicas(stack) == 1
    post_tasks(stack.api_url, after, {"arq": 20})
    totals = wait_settled(stack.api_url, after, 20, timeout=300, interval=1)["totals"]
    assert (totals["completed"], totals["purged"]) == (20, 0), totals
    assert run_report(stack.api_url, run)["queues"]["arq"]["io/simple"] == row  # the purged run, as it was


def test_make_purge_refuses_what_has_no_broker(stack):
    proc = stack.make("purge", "worker=background", check=False, timeout=120)
    assert proc.returncode == 2 and "`background`'s tasks live in the API process" in proc.stderr, proc
