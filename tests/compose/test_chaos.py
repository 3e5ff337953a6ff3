"""`make chaos` against the real compose stack: a worker container OOM-killed
in the middle of a load run (its memory limit lowered, a memory hog inside it)
comes back by its restart policy, and the run's record accounts for every
task: nothing lost, the fault, the OOM kill and the recovery recorded; the
restart shows on the Queues dashboard's own restarts query (read from
grafana/dashboards/queues.json). A process the kernel OOM-kills inside a worker
that lives on shows on its OOM-kills query. (`kill-worker` and `stop-worker`
use the same injection and recording with `docker kill` / `docker stop`
instead of the hog.) For `background` the API is the worker: killed while it
runs a task, it loses the tasks it held but no count.
"""

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.compose.helpers import post_tasks, run_report, wait_settled, wait_until
from tests.compose.panel_truth import panel_targets
from tests.lab import new_run

RESTARTS_PANEL = ("Queues", "Restarts, OOM kills and replicas up")

VALUE = 1  # what each of make load's tasks adds to its run's `work` (lab/load_params.py)


def bodies_run(run_ledger: dict) -> tuple[int, int]:
    """(tasks whose body ran at least once, extra runs) from what the task bodies
    really added up (`work`, summed by the bodies themselves) and the counted
    duplicates: never from `pending`, which the ledger derives from its counts."""
    work = sum(row["work"] for endpoints in run_ledger["queues"].values() for row in endpoints.values())
    duplicates = run_ledger["totals"]["duplicates"]
    assert work % VALUE == 0 and work // VALUE >= duplicates, (work, duplicates)
    return work // VALUE - duplicates, duplicates


pytestmark = pytest.mark.compose


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("chaos-results")


def test_make_chaos_oom_kill_loses_nothing_and_shows(stack, results_dir):
    run = new_run("compose-chaos")
    # A timed load, as make chaos's own default: a count of requests can end
    # before the fault, however few, on a fast enough machine.
    proc = stack.make(
        "chaos",
        "worker=saq",
        "fault=oom",
        "duration=10s",
        # The losses are this test's point: wait for SAQ's sweep to hand the tasks
        # back (every TASK_TIMEOUT_S, shortened for the test stack: helpers.TEST_STACK_SETTINGS).
        "wait=1",
        f"run={run}",
        f"results_dir={results_dir}",
        timeout=900,
    )
    out = proc.stdout
    assert "chaos: oom on saq injected" in out and "chaos: oom on saq restored" in out, out
    record = json.loads((results_dir / f"{run}.json").read_text())
    chaos = record["chaos"]
    assert chaos["errors"] == [] and chaos["running"] is True, chaos
    assert record["load_started_at"] < chaos["injected_at"] < record["load_ended_at"], (
        "the fault landed outside the load"
    )
    assert chaos["injected_at"] < chaos["restored_at"], chaos
    # The kernel killed the worker (the engine saw it), the restart policy started it again.
    assert chaos["oom_events"] >= 1 and chaos["oom_killed"] is True, chaos
    assert record["restarts"]["saq"] == {"restarts": 1, "oom_killed": True}, record["restarts"]
    table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout.splitlines()
    assert "saq restarted (OOM)" in next(line for line in table if f"| {run} |" in line), table
    accepted = record["status_codes"]["202"]
    # SAQ re-runs what the dead worker held once its sweep finds it: every task
    # completes, a task cut off after its work may count as a duplicate.
    assert (chaos["enqueued"], chaos["completed"], chaos["failed"], chaos["lost"]) == (accepted, accepted, 0, 0), chaos
    assert chaos["recovered_s"] is not None and chaos["last_settled_after_fault_s"] > 0, chaos
    report = run_report(stack.api_url, run)
    ledger = report["totals"]
    assert ledger["pending"] == 0 and ledger["completed"] == accepted
    # Losses from what was sent (the 202s) and what the bodies did: every accepted
    # task's body ran, and each extra run is a counted duplicate. A task the killed
    # worker had settled but SAQ had not yet taken back runs again when the sweep finds
    # it, which may come after make chaos wrote its record: the record counts the
    # duplicates seen by then.
    ran, extra = bodies_run(report)
    assert ran == accepted and chaos["duplicates"] <= extra, (ran, extra, accepted, chaos)
    # The memory limit is back where `make up` put it.
    (saq_limits,) = [v for (service, _), v in stack.limits().items() if service == "saq"]
    assert saq_limits[1] == stack.env.get("WORKER_MEM", "200M"), saq_limits
    # The Queues dashboard's own restarts query saw the new process: its line for saq
    # rises above 0 at the restart, in the panel as Grafana draws it over the run.
    restarts = panel_targets(*RESTARTS_PANEL)["A"]
    wait_until(
        lambda: panel_peak(stack, restarts, "saq", chaos["injected_at"] - 10) >= 1,
        timeout=90,
        interval=3,
        what=f"the restarts panel's saq line above 0: {restarts}",
    )


def panel_peak(stack, expr: str, job: str, since: float) -> float:
    """The highest value of a panel query's line for `job` since `since`, as Grafana draws it
    (a range query every 2 s, the rules' evaluation interval)."""
    now = time.time()
    result = stack.prometheus("/api/v1/query_range", query=expr, start=f"{since:.3f}", end=f"{now:.3f}", step="2")[
        "result"
    ]
    values = [float(v) for r in result if r["metric"].get("job") == job for _, v in r["values"]]
    return max(values, default=0.0)


def test_a_process_the_kernel_oom_kills_in_a_worker_shows_on_the_oom_panel(stack):
    """A memory hog beside the dramatiq worker, in its container, allocates past the
    container's limit (no swap here): the kernel kills the hog, the biggest process,
    the worker lives on, and the Queues dashboard's OOM-kills query reads the kill."""
    started = time.time()
    proc = stack.compose("exec", "-T", "dramatiq", "python", "-c", "b = bytearray(1 << 30); print(len(b))", check=False)
    assert proc.returncode == 137 and not proc.stdout.strip(), (proc.returncode, proc.stdout, proc.stderr)
    assert stack.compose("ps", "--status", "running", "-q", "dramatiq").stdout.split()  # the worker lived on
    ooms = panel_targets(*RESTARTS_PANEL)["C"]
    wait_until(
        lambda: panel_peak(stack, ooms, "dramatiq", started - 10) >= 1,
        timeout=90,
        interval=3,
        what=f"the OOM-kills panel's dramatiq line above 0: {ooms}",
    )


def test_make_chaos_kill_of_the_api_loses_at_most_what_it_held_and_never_a_count(stack, results_dir):
    """For `background` the worker is the API: SIGKILLed mid-load, it loses tasks it
    held (counted before their 202, not yet run: they stay pending), never the count of
    a task it answered 202 for, and takes tasks again once started. What it held is no
    figure of the users: a user sends its next request as soon as it has its answer,
    while the tasks of the answered ones still wait for the busy event loop. make chaos
    reads it from the run's ledger while the API is down (`held`), and its drain ends once
    only those are pending. The tasks are cpu/simple: each holds the API's event loop for
    a while, so the API is running one when the kill comes, whatever the machine's speed."""
    run = new_run("compose-chaos-bg")
    proc = stack.make(
        "chaos",
        "worker=background",
        "fault=kill-worker",
        "endpoint=cpu/simple",
        # Dead from 3 s into the load for at least 2 s (and while its ledger is read).
        "hold=2",
        "duration=24s",
        "wait=1",
        # The drain ends once only what the dead API held is pending; a stall this long
        # means a restarted API that never ran its tasks (a hang's bound, not a wait).
        "drain_stall=120",
        f"run={run}",
        f"results_dir={results_dir}",
        timeout=900,
        check=False,
    )
    assert "chaos: kill-worker on api injected" in proc.stdout and "chaos: kill-worker on api restored" in proc.stdout
    assert "the rest went with the fault" in proc.stdout, proc.stdout[-3000:]
    record = json.loads((results_dir / f"{run}.json").read_text())
    chaos = record["chaos"]
    assert chaos["service"] == "api" and chaos["errors"] == [] and chaos["running"] is True, chaos
    accepted = record["status_codes"].get("202", 0)
    # Counted before its 202: only requests the kill cut off before their answer may be
    # counted and unanswered, and a Locust user has one request in flight at a time.
    assert accepted <= chaos["enqueued"] <= accepted + record["users"], (accepted, chaos)
    assert chaos["duplicates"] == 0, chaos
    # The restarted API takes tasks and runs them (once it answers, however long its start took).
    wait_until(lambda: api_ready(stack.api_url), timeout=180, interval=1, what="the restarted API ready")
    after = f"{run}-after"
    post_tasks(stack.api_url, after, {"background": 10})
    assert wait_settled(stack.api_url, after, total=10, timeout=120)["totals"]["completed"] == 10
    # Losses from what was sent and what the task bodies did (`work`), not from
    # `pending` (which is enqueued - completed - failed by definition): the record's
    # `lost` must be the tasks counted but never run, at least the one the API was
    # running, at most what it held when it went down.
    report = run_report(stack.api_url, run)
    ran, extra = bodies_run(report)
    lost = chaos["enqueued"] - ran
    assert report["totals"]["enqueued"] == chaos["enqueued"] and extra == 0, (report["totals"], chaos)
    assert chaos["lost"] == lost and chaos["completed"] == ran and chaos["failed"] == 0, (ran, lost, chaos)
    held = chaos["held"]
    assert held is not None and 1 <= lost <= held <= chaos["enqueued"], (lost, held, accepted, chaos)


def api_ready(api_url: str) -> bool:
    try:
        return httpx.get(f"{api_url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_make_chaos_restart_redis_refuses_without_persistence(stack, results_dir):
    """Without REDIS_APPENDONLY=yes a Redis restart would wipe the ledger too."""
    proc = stack.make("chaos", "worker=arq", "fault=restart-redis", f"results_dir={results_dir}", check=False)
    assert proc.returncode != 0
    assert "REDIS_APPENDONLY=yes" in proc.stdout + proc.stderr
