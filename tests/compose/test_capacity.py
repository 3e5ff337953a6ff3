"""`make capacity` through the stack: a short search of arq (its rate set by
ARQ_MAX_JOBS and ARQ_POLL_DELAY more than by the machine), then its 0.8x and
1.3x checks. No rate is asserted, only what holds at any speed: the record
and its page, every step's verdict the one its own run record gives again, every
step's tasks counted, the rate sustained under the rate above it, the worker's
completions at the rate it did not sustain, and the checks run at 0.8x and 1.3x
of what was found."""

import json
import re

import pytest

from labctl.records.capacity import judge
from labctl.records.run import RunRecord
from tests.lab import new_run

pytestmark = pytest.mark.compose

ARGS = ("worker=arq", "start=4", "step=20s", "precision=50", "check=1", "check_s=30s", "max_wait=5s")


def test_a_short_capacity_search_of_arq_and_its_checks(stack, tmp_path):
    run = new_run("compose-capacity")  # a run name of its own on the stack's Redis
    proc = stack.make("capacity", *ARGS, f"run={run}", f"results_dir={tmp_path}", timeout=1800)
    record = json.loads((tmp_path / f"{run}.json").read_text())
    assert record["schema"] == "capacity/1" and record["queues_asked"] == ["arq"], record
    arq = record["queues"]["arq"]
    lo, hi = arq["bracket"]
    assert arq["limited_by"] in ("api", "worker", "errors"), arq  # never the generator: the search would have ended
    assert lo is not None and hi is not None and lo < hi <= 1.5 * lo * 1.0001, arq  # within precision=50
    assert arq["sustained_rate"]["median"] == lo and arq["sustained_rate"]["n"] == 1, arq

    steps = record["steps"]
    search = [s for s in steps if s["phase"] == "search"]
    assert [s["rate"] for s in search][:2] == [4.0, 8.0] or not search[0]["sustained"], search
    for step in steps:
        again = judge(
            RunRecord.model_validate_json((tmp_path / f"{step['run']}.json").read_text()),
            "arq",
            step["rate"],
            5.0,
            phase=step["phase"],
        )
        assert (again.sustained, again.limited_by) == (step["sustained"], step["limited_by"]), (step, again)
        tasks = json.loads((tmp_path / f"{step['run']}.json").read_text())["tasks"]
        assert tasks["settled"] and tasks["enqueued"] == tasks["completed"] and not tasks["lost"], (step["run"], tasks)
    assert all(s["rate"] < hi for s in search if s["sustained"]) and lo in [s["rate"] for s in search if s["sustained"]]
    saturated = arq["saturated_rate"]
    if arq["limited_by"] == "worker" and saturated["median"] is not None:
        # The worker completed tasks at the rate it did not sustain, and no faster than
        # they came. Not "no slower than the rate it sustained": arq, bound by its poll,
        # has completed less a second under a growing backlog than at the rate below.
        unsustained = min(s["rate"] for s in search if not s["sustained"])
        assert 0 < saturated["median"] <= 1.1 * unsustained, arq

    checks = [s for s in steps if s["phase"] == "check"]
    assert [(s["factor"], s["rate"]) for s in checks] == [(0.8, round(0.8 * lo, 2)), (1.3, round(1.3 * lo, 2))], checks
    assert arq["checks"] == {
        "0.8x": checks[0]["sustained"],
        "1.3x": checks[1]["sustained"],
        "passed": checks[0]["sustained"] and not checks[1]["sustained"],
    }, arq

    page = (tmp_path / f"{run}.html").read_text()
    samples = json.loads(re.search(r"data-queue='arq' data-samples='([^']+)'", page).group(1))
    assert sorted(samples) == sorted([s["rate"], s["wait_p95_s"]] for s in steps if s["wait_p95_s"] is not None)
    assert re.search(r"^\| arq \| [\d.]+ \(n=1\) \| ", proc.stdout, re.M), proc.stdout
