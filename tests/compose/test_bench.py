"""`make bench` against the real compose stack, once, small: it produces its
table and its record, and leaves the lab as it found it. No speed is checked
here (speeds are measured with `make bench` on a quiet machine)."""

import json
import threading
import time

import pytest

from tests.compose.helpers import post_tasks, wait_settled
from tests.lab import new_run

pytestmark = pytest.mark.compose

# The rounds' requests; the drain tops the backlogs up to what its windows
# need, however fast the machine drains them.
REQUESTS, WARMUP, ROUNDS = 500, 20, 2
# What the bench must delete after its drains: the bare worker's backlog. A
# job scheduled for 2100, placed once the bench has emptied the bare queue
# before its rounds, stands for the backlog the drains leave on a long bench
# (a small one leaves only what the bare worker finishes while it is removed).
SENTINEL = ("saq:bench:schedule", "4102444800", "test-bench-sentinel")


def place_sentinel_once_the_bench_runs(stack, stop: threading.Event, placed: list[str]) -> None:
    """The bench starts its bare API after emptying the bare queue: from then on, the sentinel."""
    while not stop.is_set():
        if stack.compose("--profile", "bench", "ps", "-q", "bench-api", check=False).stdout.split():
            added = stack.compose("exec", "-T", "redis", "redis-cli", "ZADD", *SENTINEL, check=False)
            placed.append(added.stdout.strip())
            return
        time.sleep(0.5)


def test_make_bench_records_bare_beside_lab_and_restores_the_lab(stack, tmp_path):
    stop, placed = threading.Event(), []
    sentinel = threading.Thread(target=place_sentinel_once_the_bench_runs, args=(stack, stop, placed))
    sentinel.start()
    try:
        proc = stack.make(
            "bench",
            "worker=saq",
            f"requests={REQUESTS}",
            "users=20",
            f"warmup={WARMUP}",
            f"rounds={ROUNDS}",
            "drain_s=4",
            f"results_dir={tmp_path}",
            timeout=900,
        )
    finally:
        stop.set()
        sentinel.join()
    out = proc.stdout
    assert "| queue | mode | API / worker limits | bare RPS | lab RPS | RPS ratio" in out, out
    [path] = list(tmp_path.glob("bench-*.json"))
    record = json.loads(path.read_text())
    assert record["schema"] == "bench/1" and record["mode"] == "await" and record["requests"] == REQUESTS
    assert record["api_limits"]["cpus"] == 0.2 and record["worker_limits"]["saq"]["cpus"] == 0.2
    [row] = record["rows"]
    assert row["queue"] == "saq" and "| saq | await | 0.2cpu/200M / 0.2cpu/200M |" in out
    for side in ("bare", "lab"):
        # Every request answered: accepted, or refused with the fast 503 a starved API gives
        # when Redis does not answer in time (how many, the machine's speed decides).
        result = row[side]
        statuses = result["statuses"]
        assert result["ok"] > 0 and result["ok"] + result["errors"] == ROUNDS * REQUESTS, result
        assert set(statuses) <= {"202", "503"} and statuses["202"] == result["ok"], statuses
        # Each round met a new process of each API (a fresh draw of its speed).
        assert len(set(result["api_started"])) == ROUNDS and None not in result["api_started"], result
        assert result["rps"] > 0 and result["p50_ms"] <= result["p95_ms"]
        assert result["api_peak_mb"] > 0  # read from the API container's cgroup
        assert result["api_cpu_us_per_request"] > 0  # likewise
        # Windows taken in turns, each worker's tasks and CPU counted in each.
        drain = row[f"{side}_drain"]
        # The rounds' accepted tasks, and what the drain added to make its windows last.
        topped_up = row["drain_topped_up"].get(side, 0)
        assert drain["target"] == result["enqueued"] + topped_up, (drain, result, row["drain_topped_up"])
        assert drain["windows"] and drain["rate"] > 0, drain
        assert all(w["tasks"] > 0 and w["cpu_s"] > 0 for w in drain["windows"]), drain
        # Each window is timed over its side's own pause and unpause (not Prometheus').
        assert all(0 < w["thaw_freeze_s"] < w["s"] for w in drain["windows"]), drain
        assert drain["cpu_us_per_task"] > 0, drain
    # Every ratio judged over its pairs: the rounds, and the drain's pairs of windows.
    judged = row["judged"]
    assert judged["rps"]["n"] == ROUNDS and judged["drain"]["n"] == len(row["lab_drain"]["windows"]), judged
    assert all(judged[name]["low"] <= judged[name]["value"] <= judged[name]["high"] for name in ("rps", "drain"))
    # Prometheus sat frozen through the drain (no scrape of the lab's worker
    # inside it) and runs again.
    began, ended = row["prometheus_paused"]
    assert ended - began > 6, row["prometheus_paused"]
    inside = stack.prometheus(
        "/api/v1/query", query=f'count_over_time(up{{job="saq"}}[{ended - began - 4:.0f}s])', time=f"{ended - 2:.1f}"
    )["result"]
    assert inside == [], inside
    assert stack.compose("ps", "--status", "running", "-q", "prometheus").stdout.split()
    # Every task the lab's API accepted was run by the lab's worker, once.
    report = stack.compose("exec", "-T", "api", "python", "-m", "lab.ledger", "show", row["run"]).stdout
    totals = json.loads(report)["totals"]
    lab_tasks = row["lab_drain"]["target"]
    assert (totals["enqueued"], totals["completed"], totals["pending"]) == (lab_tasks, lab_tasks, 0), totals
    assert totals["duplicates"] == 0, totals  # paused and thawed, no task ran twice

    # The bench services are gone, the lab's saq worker runs again, under its limits.
    left = stack.compose("--profile", "bench", "ps", "-a", "-q", "bench-api", "bench-saq", "bench-client").stdout
    assert left.split() == []
    assert stack.compose("ps", "--status", "running", "-q", "saq").stdout.split()
    assert stack.limits()[("saq", 1)] == ("0.2", "200M")
    # The bare worker's unfinished backlog is not left behind in Redis: the sentinel placed during the bench is gone.
    assert placed == ["1"], placed
    assert stack.compose("exec", "-T", "redis", "redis-cli", "ZSCORE", SENTINEL[0], SENTINEL[2]).stdout.strip() == ""
    assert stack.compose("exec", "-T", "redis", "redis-cli", "EXISTS", "saq:bench:queued").stdout.strip() == "0"

    table = stack.make("results", f"results_dir={tmp_path}").stdout
    assert "What the lab costs (make bench)" in table and record["run"] in table


def test_make_bench_refuses_a_lab_queue_that_holds_earlier_tasks(stack, tmp_path):
    """Tasks an earlier run left in the lab's queue would be drained before the
    bench's own, and its lab drain would read wrong: the bench waits for the
    worker to empty the queue (backlog_wait_s, none here), then gives up,
    records nothing, and says why."""
    run = new_run("compose-backlog")
    # Running, as make bench requires, but taking nothing. arq, because its
    # jobs stay in its queue until done: SAQ's or Celery's blocked fetches
    # would be handed some by Redis while the worker is paused.
    with stack.paused("arq"):
        post_tasks(stack.api_url, run, {"arq": 5})
        proc = stack.make(
            "bench", "worker=arq", "backlog_wait_s=0", f"results_dir={tmp_path}", check=False, timeout=300
        )
    assert proc.returncode != 0, proc.stdout
    assert "the lab's arq queue still holds 5 tasks from before the bench" in proc.stderr, (proc.stdout, proc.stderr)
    assert list(tmp_path.glob("bench-*.json")) == []
    assert stack.compose("ps", "--status", "running", "-q", "arq").stdout.split()
    assert wait_settled(stack.api_url, run, 5, 60)["totals"]["completed"] == 5
