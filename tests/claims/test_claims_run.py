"""`make test-claims`: make claims for real, small (needs the Docker engine and the lab's
image; no compose project: it runs on a Redis and containers of its own):
SAQ's simple.py and RQ's doc benchmark at a tenth of their N, two repetitions,
unlimited and at the lab's limits, and the same jobs through the lab's API and
ledger. Every run ends ok with every job accounted for (enqueued = completed,
none lost), the versions and the machine are recorded, and the report's every
figure, every claim's interval, verdict and scale, and the lab path's table
are the runs', decided again from the record by the doc's rules
(tests/claims_report.py), on the page, in its markdown twin and in what the
command printed. No speed is checked, and no verdict is expected: a verdict is
whatever the runs give."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.claims_report import check_page
from tests.compose.conftest import require_engine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def claims_run(tmp_path_factory):
    require_engine()
    # The compose tests' image when it is built, else the lab's (make claims builds it if missing).
    image = os.environ.get("LAB_TEST_IMAGE", "task-queue-lab:test")
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        image = "task-queue-lab:local"
    results = tmp_path_factory.mktemp("claims")
    proc = subprocess.run(
        # Two repetitions, the least an interval needs, so every claim is decided by its rule.
        ["make", "claims", "scale=0.1", "reps=2", "only=saq_simple,rq_doc,lab_path", f"results_dir={results}"],
        cwd=ROOT,
        env={**os.environ, "CLAIMS_QUIET_WAIT_S": "5", "LAB_IMAGE": image},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [path] = results.glob("claims-*[0-9].json")
    return json.loads(path.read_text()), path, proc.stdout


def test_every_run_ends_with_every_job_accounted_for(claims_run):
    record, _, _ = claims_run
    runs = record["runs"]
    assert {(r["bench"], r["setup"]) for r in runs} == {
        ("saq_simple", "unlimited"), ("saq_simple", "limited"), ("rq_doc", "unlimited"), ("rq_doc", "limited"),
        ("lab_path", "unlimited"),
    }  # fmt: skip
    for r in runs:
        a = r["accounting"]
        assert r["status"] == "ok", (r["bench"], r["queue"], r["status"], r["output"])
        assert a["lost"] == 0 and a["completed"] == a["enqueued"] > 0, (r["bench"], r["queue"], a)
    assert record["setting"]["versions"]["saq"] and record["setting"]["machine"]["cores"]


def test_the_report_shows_what_the_runs_measured_and_the_rules_decide(claims_run):
    record, path, printed = claims_run
    page, markdown = path.with_suffix(".html").read_text(), path.with_suffix(".md").read_text()
    assert check_page(record, page, markdown) > 10
    assert "| C6 |" in markdown and "saq-noop" in markdown
    # What the command printed is the report's claims table, verdicts and scale included.
    table = [line for line in markdown.splitlines() if line.startswith("| C")]
    assert table and all(line in printed for line in table)
    # Two runs a side: every claim has an interval, and rests on runs a tenth of the author's N
    # (the limited setup's N is a quarter of that again).
    for line in table:
        n = 25 if "| limited |" in line else 100
        assert "(n=2/2)" in line and f"scaled: N {n} here, 1,000 published" in line, line
