"""`make scale` against the real compose stack, small: two replica counts, each
run twice, in the orders its seed gives; every run exact, each count's figures
over its runs in the record and on its pages, and the worker back at its one
replica. No speed is checked (speeds are measured with `make scale` on a quiet
machine): the counts' verdicts are whatever these few runs show."""

import json

import pytest

from labctl.experiments.scale import run_order
from tests.lab import new_run

pytestmark = pytest.mark.compose

COUNTS, REPS, SEED, REQUESTS = [1, 2], 2, 11, 200
VERDICTS = {"faster", "slower", "no difference shown"}


def test_make_scale_runs_every_count_reps_times_in_its_seeded_order(stack, tmp_path):
    base = new_run("compose-scale")  # a run name of its own on the stack's Redis
    stack.make(
        "scale",
        "worker=saq",
        "replicas=1 2",
        f"reps={REPS}",
        f"seed={SEED}",
        f"requests={REQUESTS}",
        "users=20",
        f"run={base}",
        f"results_dir={tmp_path}",
        timeout=1800,
    )
    record = json.loads((tmp_path / f"{base}.json").read_text())
    assert record["schema"] == "scale/1" and (record["counts"], record["reps"], record["seed"]) == (COUNTS, REPS, SEED)
    assert record["order"] == run_order(COUNTS, REPS, SEED)
    # Each repetition ran every count once, in its order, each run a make load to its last task.
    ran = [(row["rep"], row["replicas"]) for row in record["rows"]]
    assert ran == [(rep, n) for rep, order in enumerate(record["order"], 1) for n in order]
    for row in record["rows"]:
        assert row["run"] == f"{base}-{row['replicas']}r-rep{row['rep']}"
        # Every accepted request enqueued once and run once (a request the loaded API refused is no task).
        assert row["exact"] and 0 < row["completed"] <= REQUESTS, row
        assert row["drain_rate"] > 0 and 1 <= row["busy_replicas"] <= row["replicas"], row
    # Each count over its two runs: a median with an interval, and the second count's speed-up with its verdict.
    one, two = record["by_count"]
    assert (one["count"], one["runs"], one["exact"], two["count"], two["runs"], two["exact"]) == (1, 2, 2, 2, 2, 2)
    for figures in (one, two):
        rate = figures["drain_rate"]
        assert rate["n"] == 2 and rate["low"] <= rate["median"] <= rate["high"], rate
    assert one["speedup"] is None and two["speedup"]["verdict"] in VERDICTS, two
    assert two["speedup"]["low"] <= two["speedup"]["value"] <= two["speedup"]["high"]
    page = (tmp_path / f"{base}.md").read_text()
    assert "## Each count over its runs" in page and f"Order (seed {SEED}): repetition 1: " in page
    assert f" {two['speedup']['verdict']} |" in page
    assert "<svg" in (tmp_path / f"{base}.html").read_text()
    # The worker is back at the replica count it had.
    assert len(stack.compose("ps", "--status", "running", "-q", "saq").stdout.split()) == 1
