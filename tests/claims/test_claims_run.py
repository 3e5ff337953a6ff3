"""`make test-claims`: make claims for real, quick and small (needs the Docker engine and the lab's
image; no compose project: it runs on a Redis and containers of its own):
SAQ's simple.py and RQ's doc benchmark unlimited and at the lab's limits, and
the same jobs through the lab's API and ledger. Every run ends ok with every
job accounted for (enqueued = completed, none lost), the versions and the
machine are recorded, and the report's every figure is the runs'
(tests/claims_report.py). No speed is checked."""

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
        ["make", "claims", "quick=1", "only=saq_simple,rq_doc,lab_path", f"results_dir={results}"],
        cwd=ROOT,
        env={**os.environ, "CLAIMS_QUIET_WAIT_S": "5", "LAB_IMAGE": image},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [path] = results.glob("claims-*[0-9].json")
    return json.loads(path.read_text()), path


def test_every_run_ends_with_every_job_accounted_for(claims_run):
    record, _ = claims_run
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


def test_the_report_shows_what_the_runs_measured(claims_run):
    record, path = claims_run
    page = path.with_suffix(".html").read_text()
    assert check_page(record, page) > 10
    markdown = path.with_suffix(".md").read_text()
    assert "| C6 |" in markdown and "saq-noop" in markdown
