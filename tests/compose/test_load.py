"""`make load`, `make results` and `make report` against the real compose stack:
Locust runs in the compose profile `load` (a master and two workers), ends by
itself at its target (a length here, a request count in the event-loop run),
and leaves a record that agrees with the ledger
and with what Prometheus scraped from the Locust containers.

Every test here finds what it checks itself (the session's `make load worker=arq`
through the `arq_queue_run` fixture, whichever test asks first), in any order, on
the session stack, and leaves it as it found it.
"""

import csv
import json
import re
from pathlib import Path

import httpx
import pytest

from lab import load_params
from labctl.records.run import RunRecord
from tests.compose import panel_truth
from tests.compose.helpers import (
    QUEUE_RUN_SECONDS,
    by_label,
    load,
    run_report,
    wait_until,
)
from tests.lab import new_run

pytestmark = pytest.mark.compose

MiB = 1024 * 1024
# The words of a run's warnings that tell a fault of the lab, not of the machine
# (labctl/records/run_build.py, labctl/load_run/steps.py's wait_notes).


@pytest.fixture(scope="module")
def results_dir(load_results_dir) -> Path:
    """The records of this module's runs (the session's, where the arq queue run's is)."""
    return load_results_dir


def refused(record: dict) -> dict[str, int]:
    """The run's fast 503s (Redis slow to answer a starved API), if any: nothing else may fail."""
    return {"503": record["status_codes"]["503"]} if "503" in record["status_codes"] else {}


def assert_locust_is_gone(stack):
    for service in ("locust-master", "locust-worker", "probe"):
        left = stack.compose("--profile", "load", "ps", "-a", "-q", service).stdout.split()
        assert left == [], f"{service} containers left behind: {left}"


def test_an_arq_run_returns_after_its_drain_watch_and_settles_later(stack, arq_queue_run, results_dir):
    run, out, record = arq_queue_run["run"], arq_queue_run["proc"].stdout, arq_queue_run["record"]
    n = record["requests"]
    # Sent, and accepted: on a starved machine the API may answer a request with the fast
    # 503 it gives when Redis does not answer in time; such a request enqueues nothing.
    accepted = record["status_codes"].get("202", 0)
    # The load lasts the length asked from Locust's start (its first request follows once its
    # users are spawned, later on a slower machine), then lets its requests in flight finish
    # (each within the run's longest response; 2 s for Locust's stop and the clocks' grain).
    began, start, end = record["locust_started_at"], record["load_started_at"], record["load_ended_at"]
    assert began <= start and QUEUE_RUN_SECONDS - 2 <= end - began, record
    assert end - start <= QUEUE_RUN_SECONDS + record["max_ms"] / 1000 + 2, (end - start, record)
    # The prompt came back after the drain watch, not after arq's whole drain: tasks were still queued.
    assert arq_queue_run["ledger_at_return"]["totals"]["pending"] > 0, arq_queue_run["ledger_at_return"]
    assert re.search(r"\d+ requests +\d+\.\ds", out) and "ledger enqueued" in out, out  # live progress
    assert "the drain goes on" in out and "tasks/s" in out and "make results" in out, out
    # It ends with the run in a dozen lines (render/run_summary.py), the Grafana link last,
    # following the drain ("to=now").
    summary = out[out.rindex(f"\nrun {run}: worker=arq endpoint=io/simple, 100 users") + 1 :].splitlines()
    assert len(summary) <= 13 and summary[-1].startswith("  Grafana  http") and "&to=now" in summary[-1], summary
    assert any(line.startswith("  tasks    ") and " pending" in line for line in summary), summary
    assert any(line.startswith("  drain    still draining at ") for line in summary), summary
    assert any(
        line.startswith("  record   ") and f"{run}.json (every column: make results full=1)" in line for line in summary
    )

    assert (record["run"], record["worker"], record["endpoint"], record["users"], record["iterations"]) == (
        run,
        "arq",
        "io/simple",
        100,
        None,
    )
    assert record["duration_target_s"] == QUEUE_RUN_SECONDS
    # Every POST accepted or refused with a fast 503 (nothing else), the ledger counting the
    # accepted (below); the backlog was still draining.
    assert accepted > 0 and record["status_codes"] == {"202": accepted, **refused(record)}, record["status_codes"]
    assert record["failures"] == n - accepted, record["errors"]
    tasks = record["tasks"]
    watch = tasks["draining"]
    assert not tasks["settled"] and tasks["lost"] is None and tasks["time_to_execute_all_s"] is None
    assert 0 < watch["backlog"] < accepted and watch["rate_per_s"] > 0 and watch["projected_empty_s"] > 0, watch
    assert record["knobs"]["arq"]["ARQ_POLL_DELAY"] == "0.5"

    # The ledger kept counting: a one-off arq worker took the rest of the backlog
    # over (arq_queue_run), and make results shows the run settled.
    table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout.splitlines()
    ledger = run_report(stack.api_url, run)
    assert ledger["totals"] == {
        "enqueued": accepted,
        "started": accepted,
        "completed": accepted,
        "failed": 0,
        "duplicates": 0,
        "purged": 0,
        "pending": 0,
        "unfinished": 0,
    }
    row = [c.strip() for c in next(line for line in table if f"| {run} |" in line).strip("|").split("|")]
    settled = round(ledger["last_settled_at"] - ledger["first_enqueued_at"], 2)
    assert row[0] == "arq" and float(row[4]) == settled, row  # "all tasks done s"
    again = json.loads((results_dir / f"{run}.json").read_text())
    assert again["tasks"]["settled"] and again["tasks"]["lost"] == 0 and again["tasks"]["completed"] == accepted
    assert again["tasks"]["draining"] == watch and again["settled_later_at"] == ledger["last_settled_at"]


def test_a_queue_run_records_its_limits_resources_and_generator(stack, arq_queue_run, results_dir):
    run, record = arq_queue_run["run"], arq_queue_run["record"]
    n = record["requests"]
    assert record["rps"] > 0 and record["median_ms"] <= record["p95_ms"] <= record["p99_ms"]
    # A starved machine adds warnings of its own (Locust or its generator busy, a late
    # scrape); none of the run's figures may say that a task was lost, doubled or
    # miscounted, or a service restarted.
    typed = RunRecord.model_validate(record)
    assert typed.is_draining() and not typed.unsettled() and not typed.ledger_mismatch(), record["warnings"]
    assert typed.tasks is not None and (typed.tasks.duplicates, typed.restarts) == (0, {}), record
    # The limits the engine applied and the knobs the worker ran with.
    assert record["limits"]["api"] == {"cpus": 0.2, "memory": "200M", "memory_bytes": 200 * MiB, "replicas": 1}
    assert record["limits"]["workers"]["arq"] == {
        "cpus": 0.2,
        "memory": "200M",
        "memory_bytes": 200 * MiB,
        "replicas": 1,
        "concurrency": 3,
    }
    # Prometheus over the run: the worker's memory and throttling; the generator's own CPU.
    arq = record["resources"]["arq"]
    assert 0 < arq["peak_memory_bytes"] <= 200 * MiB and arq["cpu_limit_cores"] == pytest.approx(0.2)
    assert 0 <= arq["cpu_throttled_periods_pct"] <= 100 and arq["cpu_used_cores"] > 0

    # The worker's peak, read here from Prometheus on its own: at least the peak over the
    # load alone, at most the peak over a window reaching a minute past the record's.
    def peak(start: float, end: float) -> float:
        window = f"{int(end - start) + 1}s"
        query = f'max(max_over_time(lab_memory_bytes{{service="arq"}}[{window}]))'
        return float(stack.prometheus("/api/v1/query", query=query, time=f"{end:.3f}")["result"][0]["value"][1])

    low = peak(record["load_started_at"], record["load_ended_at"])
    high = peak(record["load_started_at"] - 5, record["window_end"] + 60)
    assert low <= record["worker_peak_memory_bytes"] <= high, (low, record["worker_peak_memory_bytes"], high)
    assert sorted(p["role"] for p in record["generator"]["processes"]) == ["master", "worker", "worker"]
    assert record["exported_requests"] == n

    # Prometheus scraped the Locust containers: every request counted once across
    # the two workers, the master's user count, the generator's cgroup metrics.
    # Read when make load returned: the Locust processes were gone, no other run had begun.
    # The window starts within a second before the users did: an earlier run's Locust
    # series (another test's) end before this run's processes were even scraped.
    at = arq_queue_run["returned_at"]
    window = f"{int(at - record['load_started_at']) + 1}s"

    def counted() -> dict[str, float]:
        query = f"sum by (instance) (max_over_time(locust_requests_total[{window}]))"
        return by_label(stack.prometheus("/api/v1/query", query=query, time=f"{at:.3f}")["result"], "instance")

    try:
        wait_until(lambda: sum(counted().values()) == n, timeout=20, interval=2, what=f"Prometheus counting {n}")
    except AssertionError:
        raise AssertionError(f"Prometheus counted {counted()} requests per Locust process, not {n} in all") from None
    assert len(counted()) == 2, counted()  # each of the two workers
    users = stack.prometheus("/api/v1/query", query=f"max(max_over_time(locust_users[{window}]))", time=f"{at:.3f}")
    assert float(users["result"][0]["value"][1]) == 100
    cpu = by_label(
        stack.prometheus(
            "/api/v1/query",
            query=f'max by (service) (max_over_time(lab_cpu_seconds_total{{service=~"locust-.*"}}[{window}]))',
            time=f"{at:.3f}",
        )["result"],
        "service",
    )
    assert set(cpu) == {"locust-master", "locust-worker"}, cpu
    # Locust's own report beside the record: the HTML page and the CSVs, the stats
    # counting the same requests.
    assert {f"{run}.html", f"{run}_stats.csv", f"{run}_failures.csv"} <= set(record["locust_report"])
    assert "<html" in (results_dir / f"{run}.html").read_text().lower()
    with (results_dir / f"{run}_stats.csv").open() as f:
        aggregated = next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    assert int(aggregated["Request Count"]) == n
    assert_locust_is_gone(stack)


def test_the_dashboards_read_the_runs_truth_at_half_and_four_fifths_of_it(stack, arq_queue_run):
    """The Load dashboard's requests-per-second panel (Locust's query and the
    API's) and the Queues dashboard's enqueue rate, completion rate and backlog,
    their queries read from grafana/dashboards/*.json and evaluated at 50 % and
    80 % of the load, as the panels showed them then: each single reading
    within 15 % of the run's truth, the ledger's (its timeline, each row at the
    time it was read), taken over the very scrapes the rate was computed from,
    give or take what the ledger did between two of its reads
    (tests/compose/panel_truth.py): a busy machine's missed scrapes and slow
    reads widen what is allowed, never fail the reading. A query counting twice
    or reading the wrong label misses by far more."""
    record = arq_queue_run["record"]
    readings = panel_truth.readings(stack.prometheus_url, record)
    assert {r.what for r in readings} == {
        "Load: Locust",
        "Load: API",
        "Queues: enqueue rate",
        "Queues: completion rate",
        "Queues: backlog",
    }, readings
    wrong = [r.line() for r in readings if not r.ok]
    assert not wrong, "\n".join([f"{record['run']}: {record['rps']} req/s over {record['duration_s']} s", *wrong])


WAIT_PANELS = (
    "Wait from enqueue to start: p50, p95, p99 per queue",
    "End-to-end latency, enqueue to completion: p50, p95, p99 per queue",
)


@pytest.mark.parametrize("title", WAIT_PANELS)
def test_the_wait_panels_rise_with_a_runs_backlog(stack, arq_queue_run, title):
    """The Queues dashboard's wait and latency quantiles per queue, read as the panel
    shows them at the first full 10 s window of the session's arq run and at four
    fifths of it. arq's worker runs far fewer tasks a second than the API accepts
    (its poll and job limits), so a backlog builds and a task started later has
    waited for it: each reading has p50 <= p95 <= p99, the later p95 is above a
    second, and no quantile fell. The histograms' buckets (10 s to 30 s, ...) may
    hold both readings of one quantile: equal is allowed, lower is not."""
    record = arq_queue_run["record"]
    start, end = record["load_started_at"], record["load_ended_at"]
    assert record["tasks"]["completed"] < record["tasks"]["enqueued"] / 2, record["tasks"]  # the backlog was there
    targets = panel_truth.panel_targets("Queues", title, "arq")
    assert len(targets) == 3, targets

    def reading(at: float) -> dict[str, float]:
        out = {}
        for expr in targets.values():
            q = next(p for p in ("0.5", "0.95", "0.99") if f"histogram_quantile({p}," in expr)
            for labels, value, _ in panel_truth.instant(stack.prometheus_url, expr, at):
                assert labels.get("queue") == "arq", labels  # per queue, filtered by the variable
                out[q] = value
        return out

    first, later = reading(start + 12), reading(start + 0.8 * (end - start))
    for r in (first, later):
        assert set(r) == {"0.5", "0.95", "0.99"} and 0 < r["0.5"] <= r["0.95"] <= r["0.99"], (first, later)
    assert later["0.95"] > 1 and all(later[q] >= first[q] for q in first), (first, later)


def test_make_results_and_report_show_the_run(stack, arq_queue_run, results_dir):
    run, record = arq_queue_run["run"], arq_queue_run["record"]
    table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout.splitlines()
    assert table[0].startswith("| worker | RPS | median ms | p95 ms | all tasks done s | errors % |"), table[:2]
    row = next(line for line in table if f"| {run} |" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "arq" and float(cells[1]) == record["rps"], cells
    assert float(cells[5]) == record["failures_pct"] == round(100 * record["failures"] / record["requests"], 3), cells

    out = stack.make("report", f"run={run}", f"results_dir={results_dir}", timeout=180).stdout
    png = results_dir / f"{run}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000, out
    assert "no data for" not in out, out  # every panel had series over the run's window


def test_an_event_loop_scenario_leaves_a_record_with_the_probe(stack, results_dir):
    """make load's event-loop path once (the upstream scenario, which also goes
    through the upstream stand-in): the liveness probe, the record, the table.
    Every scenario's requests are checked against the stack below."""
    iterations, endpoint = 20, "upstream/async-native"
    run, proc, record = load(
        stack, results_dir, "scenario=upstream", "variant=async-native", "users=10", f"iterations={iterations}"
    )
    assert (record["scenario"], record["endpoint"], record["worker"], record["tasks"]) == (
        "upstream",
        endpoint,
        None,
        None,
    )
    assert (record["requests"], record["failures"], record["status_codes"]) == (iterations, 0, {"200": iterations})
    probe = record["probe"]
    # async-native keeps the event loop free: the probe was answered during the run, its longest
    # gap shorter than the run, and the rate is what it counted.
    assert probe["sent"] > 0 and probe["ok"] > 0 and probe["success_rate"] == round(probe["ok"] / probe["sent"], 4), (
        probe
    )
    assert probe["worst_gap_s"] is not None and probe["worst_gap_s"] < probe["window_s"], probe
    assert record["resources"]["api"]["peak_memory_bytes"] > 0
    # The run's summary names the run and says what the probe saw.
    assert f"\nrun {run}: scenario=upstream, 10 users" in proc.stdout, proc.stdout
    assert f"\n  probe    {probe['ok']}/{probe['sent']} answered ok " in proc.stdout, proc.stdout
    assert_locust_is_gone(stack)
    table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout
    row = next(line for line in table.splitlines() if f"| {run} |" in line)
    assert f"| {record['scenario']} | {endpoint} |" in row, row


def test_a_rate_run_sends_on_its_schedule_through_the_stack(stack, results_dir):
    """make load rate=: the open model through the containers (LOAD_RATE reaches both
    Locust workers), its target in the live line, the record and the summary; every
    request it sent counted, every task it enqueued settled. No speed is asserted:
    the rate reached is the machine's (the record warns when it fell short)."""
    run, proc, record = load(stack, results_dir, "worker=huey", "rate=40", "duration=8s", "wait=1")
    assert record["target_rate"] == 40.0 and record["users"] == 80, record  # one send every 2 s a user
    assert record["late_sends_pct"] is not None, record
    assert re.search(r"\d+\.\d of 40 req/s", proc.stdout), proc.stdout
    assert "of 40 asked (open model, latency from each scheduled time" in proc.stdout, proc.stdout
    accepted = record["status_codes"].get("202", 0)
    assert accepted > 0 and record["status_codes"] == {"202": accepted, **refused(record)}, record["status_codes"]
    tasks = record["tasks"]
    assert tasks["settled"] and tasks["enqueued"] == tasks["completed"] == accepted, tasks
    # Its tasks' wait and latency from the lab's histograms: a task waits before it ends.
    times = record["task_times"]["huey"]
    assert 0 <= times["wait"]["p50"] <= times["wait"]["p95"] <= times["wait"]["p99"], times
    assert times["latency"]["p95"] >= times["wait"]["p50"], times
    assert "\n  wait     huey to start p50 " in proc.stdout, proc.stdout
    assert_locust_is_gone(stack)


EVENT_LOOP_RUNS = [
    *(({"scenario": "upstream", "variant": v}, f"upstream/{v}") for v in load_params.UPSTREAM_VARIANTS),
    *(({"scenario": "clients", "mode": m}, f"clients/{m}-1000") for m in load_params.CLIENT_MODES),
    ({"scenario": "payload"}, "payload/1024"),
]


@pytest.mark.parametrize("raw, endpoint", EVENT_LOOP_RUNS, ids=[label for _, label in EVENT_LOOP_RUNS])
def test_each_event_loop_scenarios_requests_are_answered_as_make_load_expects(stack, raw, endpoint):
    """The requests a run of each scenario sends (lab/load_params.py's calls,
    which Locust's users send and judge the same way: status, and the payload's
    whole body), answered by the stack's API, under the endpoint label its
    record and table show."""
    params = load_params.parse_params(raw)
    assert params.endpoint_label == endpoint and params.calls
    run = new_run("compose-calls")
    with httpx.Client(base_url=stack.api_url, timeout=30) as client:
        for call in params.calls:
            r = client.request(call.method, call.path, json=call.body, headers={"X-Lab-Run": run})
            assert r.status_code == call.expect_status, (call.path, r.status_code, r.text[:300])
            if call.expect_length is not None:
                assert len(r.content) == call.expect_length, (call.path, len(r.content))
