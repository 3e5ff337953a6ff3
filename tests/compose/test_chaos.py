"""`make chaos` against the real compose stack: a worker container killed
(SIGKILL) in the middle of a load run is started again, and the run's record
accounts for every task: nothing lost, the fault and its recovery recorded.
"""

import json
import secrets
from pathlib import Path

import pytest

from tests.compose.helpers import run_report

pytestmark = pytest.mark.compose


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("chaos-results")


def test_make_chaos_kill_worker_loses_nothing(stack, results_dir):
    run = f"compose-chaos-{secrets.token_hex(4)}"
    proc = stack.make("chaos", "worker=saq", "fault=kill-worker", "iterations=600", f"run={run}",
                      f"results_dir={results_dir}", timeout=900)
    out = proc.stdout
    assert "chaos: kill-worker on saq injected" in out and "chaos: kill-worker on saq restored" in out, out
    record = json.loads((results_dir / f"{run}.json").read_text())
    chaos = record["chaos"]
    assert chaos["errors"] == [] and chaos["running"] is True, chaos
    assert record["load_started_at"] < chaos["injected_at"] < chaos["restored_at"], "the fault landed outside the load"
    accepted = record["status_codes"]["202"]
    # SAQ re-runs what the dead worker held once its sweep finds it: every task
    # completes, a task cut off after its work may count as a duplicate.
    assert (chaos["enqueued"], chaos["completed"], chaos["failed"], chaos["lost"]) == (accepted, accepted, 0, 0), chaos
    assert chaos["recovered_s"] is not None and chaos["last_settled_after_fault_s"] > 0, chaos
    ledger = run_report(stack.api_url, run)["totals"]
    assert ledger["pending"] == 0 and ledger["completed"] == accepted


def test_make_chaos_restart_redis_refuses_without_persistence(stack, results_dir):
    """Without REDIS_APPENDONLY=yes a Redis restart would wipe the ledger too."""
    proc = stack.make("chaos", "worker=arq", "fault=restart-redis", f"results_dir={results_dir}", check=False)
    assert proc.returncode != 0
    assert "REDIS_APPENDONLY=yes" in proc.stdout + proc.stderr
