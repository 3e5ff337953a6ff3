"""`make load`, `make results` and `make report` against the real compose stack:
Locust runs in the compose profile `load` (a master and two workers), ends by
itself at its iteration target, and leaves a record that agrees with the ledger
and with what Prometheus scraped from the Locust containers.

Runs before test_stack.py (file order) on the session stack; puts the lab back
to its defaults when done.
"""

import csv
import json
import statistics
from pathlib import Path

import pytest

from tests.compose.helpers import LOAD_PANEL, by_label, load, run_report, wait_until

pytestmark = pytest.mark.compose

MiB = 1024 * 1024
DEFAULT_REQUESTS = 15000  # make load's default for a queue run (locust/load_params.py)
WATCH_S = 60  # make load's default drain watch (LOAD_DRAIN_WATCH_S)


@pytest.fixture(scope="module")
def results_dir(load_results_dir) -> Path:
    """The records of this module's runs (the session's, where the default run's is)."""
    return load_results_dir


def assert_locust_is_gone(stack):
    for service in ("locust-master", "locust-worker", "probe"):
        left = stack.compose("--profile", "load", "ps", "-a", "-q", service).stdout.split()
        assert left == [], f"{service} containers left behind: {left}"


def test_a_default_arq_run_returns_after_its_drain_watch_and_settles_later(stack, default_arq_run, results_dir):
    run, out, record = default_arq_run["run"], default_arq_run["proc"].stdout, default_arq_run["record"]
    n = DEFAULT_REQUESTS
    # The prompt comes back after the load and a minute of drain, not after arq's whole drain.
    load_s = record["load_ended_at"] - record["load_started_at"]
    assert load_s >= 30, f"a default run is long enough to watch: {load_s:.1f} s"
    assert default_arq_run["wall_s"] <= load_s + WATCH_S + 120, (default_arq_run["wall_s"], load_s, out)
    assert f"/{n}" in out and "ledger enqueued" in out, out  # live progress toward the target
    assert "the drain goes on" in out and "tasks/s" in out and "make results" in out, out
    assert "Grafana, this run:" in out and "&to=now" in out, out  # the link follows the drain
    assert "| arq |" in out and run in out  # the table row at the end

    assert (record["run"], record["worker"], record["endpoint"], record["users"], record["iterations"]) == (
        run,
        "arq",
        "io/simple",
        100,
        n,
    )
    # Exactly `iterations` POSTs, every one accepted; the backlog is still draining.
    assert (record["requests"], record["failures"], record["status_codes"]) == (n, 0, {"202": n})
    tasks = record["tasks"]
    watch = tasks["draining"]
    assert not tasks["settled"] and tasks["lost"] is None and tasks["time_to_execute_all_s"] is None
    assert 0 < watch["backlog"] < n and watch["rate_per_s"] > 0 and watch["projected_empty_s"] > 0, watch
    assert record["knobs"]["arq"]["ARQ_POLL_DELAY"] == "0.5"

    # The ledger keeps counting: drain the rest faster (a worker with a short
    # poll and more CPU takes over the backlog), then make results shows it settled.
    stack.up(ARQ_POLL_DELAY="0.01", ARQ_MAX_JOBS="20", ARQ_CPUS="1")
    try:
        wait_until(
            lambda: run_report(stack.api_url, run)["totals"]["pending"] == 0,
            timeout=300,
            interval=3,
            what=f"the rest of {run}'s backlog drained",
        )
        table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout.splitlines()
    finally:
        stack.up()  # the defaults again, for the tests that follow
    ledger = run_report(stack.api_url, run)
    assert ledger["totals"] == {
        "enqueued": n,
        "started": n,
        "completed": n,
        "failed": 0,
        "duplicates": 0,
        "pending": 0,
        "unfinished": 0,
    }
    row = [c.strip() for c in next(line for line in table if f"| {run} |" in line).strip("|").split("|")]
    settled = round(ledger["last_settled_at"] - ledger["first_enqueued_at"], 2)
    assert row[0] == "arq" and float(row[4]) == settled, row  # "all tasks done s"
    again = json.loads((results_dir / f"{run}.json").read_text())
    assert again["tasks"]["settled"] and again["tasks"]["lost"] == 0 and again["tasks"]["completed"] == n
    assert again["tasks"]["draining"] == watch and again["settled_later_at"] == ledger["last_settled_at"]


def test_a_default_run_records_its_limits_resources_and_generator(stack, default_arq_run, results_dir):
    run, record = default_arq_run["run"], default_arq_run["record"]
    n = DEFAULT_REQUESTS
    assert record["rps"] > 0 and record["median_ms"] <= record["p95_ms"] <= record["p99_ms"]
    assert all("CPU-bound" in w or w.startswith("still draining") for w in record["warnings"]), record["warnings"]
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
    assert arq["cpu_throttled_pct"] is not None and arq["cpu_used_cores"] > 0
    assert record["worker_peak_memory_bytes"] == arq["peak_memory_bytes"]
    assert sorted(p["role"] for p in record["generator"]["processes"]) == ["master", "worker", "worker"]
    assert record["exported_requests"] == n

    # Prometheus scraped the Locust containers: every request counted once across
    # the two workers, the master's user count, the generator's cgroup metrics.
    at = record["load_ended_at"] + 4
    window = f"{int(at - record['load_started_at'] + 20)}s"

    def scraped():
        sent = stack.prometheus(
            "/api/v1/query", query=f"sum(max_over_time(locust_requests_total[{window}]))", time=f"{at:.3f}"
        )["result"]
        return sent if sent and float(sent[0]["value"][1]) == n else None

    wait_until(scraped, timeout=20, interval=2, what=f"Prometheus counting {n} Locust requests")
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


def test_the_load_panel_reads_the_runs_rate_while_it_runs(default_arq_run):
    """At 50 % and 80 % of a default run, the Load dashboard's requests-per-second
    panel (Locust's query and the API's) reads within 15 % of the run's recorded
    req/s, as Prometheus answered then."""
    record, samples = default_arq_run["record"], default_arq_run["samples"]
    start, end, rps = record["load_started_at"], record["load_ended_at"], record["rps"]
    for fraction in (0.5, 0.8):
        at = start + fraction * (end - start)
        near = [values for t, values in samples if abs(t - at) <= 1.5]
        assert near, f"no panel sample near {fraction:.0%} of the load"
        for name in LOAD_PANEL:
            seen = statistics.median(v[name] for v in near)
            assert seen == pytest.approx(rps, rel=0.15), (
                f"{name} query read {seen:.1f}/s at {fraction:.0%} of the load; the record says {rps}/s: {near}"
            )


def test_make_results_and_report_show_the_run(stack, results_dir):
    records = [json.loads(p.read_text()) for p in results_dir.glob("*.json")]
    queue_runs = [r for r in records if r["scenario"] == "queue" and r["worker"] == "arq"]
    if not queue_runs:
        pytest.fail("no arq run recorded: the make load tests must run first (they failed or were deselected)")
    run = queue_runs[0]["run"]
    table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout.splitlines()
    assert table[0].startswith("| worker | RPS | median ms | p95 ms | all tasks done s | errors % |"), table[:2]
    row = next(line for line in table if f"| {run} |" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "arq" and float(cells[1]) == queue_runs[0]["rps"] and cells[5] == "0", cells

    out = stack.make("report", f"run={run}", f"results_dir={results_dir}", timeout=180).stdout
    png = results_dir / f"{run}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000, out
    assert "no data for" not in out, out  # every panel had series over the run's window


@pytest.mark.parametrize(
    "args, endpoint",
    [
        (("scenario=upstream", "variant=async-native", "users=10", "iterations=20"), "upstream/async-native"),
        (("scenario=clients", "mode=prejson", "count=1000", "users=5", "iterations=10"), "clients/prejson-1000"),
        (("scenario=payload", "users=5", "iterations=10"), "payload/1024"),
    ],
)
def test_event_loop_scenarios_leave_a_record_with_the_probe(stack, results_dir, args, endpoint):
    run, proc, record = load(stack, results_dir, *args)
    iterations = int(args[-1].split("=")[1])
    assert (record["scenario"], record["endpoint"], record["worker"], record["tasks"]) == (
        args[0].split("=")[1],
        endpoint,
        None,
        None,
    )
    assert (record["requests"], record["failures"], record["status_codes"]) == (iterations, 0, {"200": iterations})
    probe = record["probe"]
    assert probe["sent"] > 0 and 0 <= probe["success_rate"] <= 1 and probe["worst_gap_s"] is not None, probe
    assert record["resources"]["api"]["peak_memory_bytes"] > 0
    assert "probe:" in proc.stdout and run in proc.stdout
    assert_locust_is_gone(stack)
    table = stack.make("results", f"results_dir={results_dir}", timeout=120).stdout
    row = next(line for line in table.splitlines() if f"| {run} |" in line)
    assert f"| {record['scenario']} | {endpoint} |" in row, row
