"""`make load`, `make results` and `make report` against the real compose stack:
Locust runs in the compose profile `load` (a master and two workers), ends by
itself at its iteration target, and leaves a record that agrees with the ledger
and with what Prometheus scraped from the Locust containers.

Runs before test_stack.py (file order) on the session stack; puts the lab back
to its defaults when done.
"""

import csv
import json
import secrets
import statistics
import threading
import time
from pathlib import Path

import pytest

from tests.compose.helpers import by_label, run_report, wait_until

pytestmark = pytest.mark.compose

ARQ_ITERATIONS = 2000
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory) -> Path:
    """The records of this module's runs: not the developer's results/."""
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def fast_arq(stack):
    """arq at its default ARQ_POLL_DELAY=0.5 settles about 6 tasks/s: 2000 tasks
    would drain for 5+ minutes. 0.05 s lets it run near its CPU limit instead."""
    stack.up(ARQ_POLL_DELAY="0.05")
    try:
        yield
    finally:
        stack.up()  # the defaults again, for the tests that follow


def load(stack, results_dir: Path, *args: str, timeout: float = 900):
    run = f"compose-load-{secrets.token_hex(4)}"
    started = time.monotonic()
    proc = stack.make("load", *args, f"run={run}", f"results_dir={results_dir}", timeout=timeout)
    stack.timings[f"make load {' '.join(args)}"] = time.monotonic() - started
    return run, proc, json.loads((results_dir / f"{run}.json").read_text())


def assert_locust_is_gone(stack):
    for service in ("locust-master", "locust-worker", "probe"):
        left = stack.compose("--profile", "load", "ps", "-a", "-q", service).stdout.split()
        assert left == [], f"{service} containers left behind: {left}"


def test_make_load_arq_ends_by_itself_and_its_record_matches_the_ledger(stack, fast_arq, results_dir):
    run, proc, record = load(
        stack, results_dir, "worker=arq", "endpoint=io/simple", "users=20", f"iterations={ARQ_ITERATIONS}"
    )
    out = proc.stdout
    assert f"/{ARQ_ITERATIONS}" in out and "ledger enqueued" in out, out  # live progress toward the target
    assert "all tasks settled" in out and "Grafana is not running" in out, out
    assert "| arq |" in out and run in out  # the table row at the end

    n = ARQ_ITERATIONS
    assert (record["run"], record["worker"], record["endpoint"], record["users"], record["iterations"]) == (
        run,
        "arq",
        "io/simple",
        20,
        n,
    )
    # Exactly `iterations` POSTs, every one accepted, every task completed once.
    assert (record["requests"], record["failures"], record["status_codes"]) == (n, 0, {"202": n})
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
    tasks = record["tasks"]
    assert (tasks["enqueued"], tasks["completed"], tasks["failed"], tasks["duplicates"], tasks["lost"]) == (
        n,
        n,
        0,
        0,
        0,
    )
    assert tasks["settled"] and tasks["first_enqueued_at"] == ledger["first_enqueued_at"]
    assert tasks["time_to_execute_all_s"] == round(ledger["last_settled_at"] - ledger["first_enqueued_at"], 2)
    assert 0 <= tasks["drain_s"] <= tasks["time_to_execute_all_s"]
    assert record["rps"] > 0 and record["median_ms"] <= record["p95_ms"] <= record["p99_ms"]
    assert record["warnings"] == [] or all("CPU-bound" in w for w in record["warnings"]), record["warnings"]

    # The limits the engine applied and the knobs the worker ran with.
    assert record["limits"]["api"] == {"cpus": 0.2, "memory": "200M", "memory_bytes": 200 * MiB, "replicas": 1}
    assert record["limits"]["workers"]["arq"] == {
        "cpus": 0.2,
        "memory": "200M",
        "memory_bytes": 200 * MiB,
        "replicas": 1,
        "concurrency": 3,
    }
    assert record["knobs"]["arq"]["ARQ_POLL_DELAY"] == "0.05"
    # Prometheus over the run: the worker's memory and throttling; the generator's own CPU.
    arq = record["resources"]["arq"]
    assert 0 < arq["peak_memory_bytes"] <= 200 * MiB and arq["cpu_limit_cores"] == pytest.approx(0.2)
    assert arq["cpu_throttled_pct"] is not None and arq["cpu_used_cores"] > 0
    assert record["worker_peak_memory_bytes"] == arq["peak_memory_bytes"]
    assert sorted(p["role"] for p in record["generator"]["processes"]) == ["master", "worker", "worker"]
    assert record["exported_requests"] == n

    # Prometheus scraped the Locust containers: every request counted once across
    # the two workers, the master's user count, the generator's cgroup metrics.
    at = record["load_ended_at"] + 6
    window = f"{int(at - record['load_started_at'] + 20)}s"

    def scraped():
        sent = stack.prometheus(
            "/api/v1/query", query=f"sum(max_over_time(locust_requests_total[{window}]))", time=f"{at:.3f}"
        )["result"]
        return sent if sent and float(sent[0]["value"][1]) == n else None

    wait_until(scraped, timeout=20, interval=2, what=f"Prometheus counting {n} Locust requests")
    users = stack.prometheus("/api/v1/query", query=f"max(max_over_time(locust_users[{window}]))", time=f"{at:.3f}")[
        "result"
    ]
    assert float(users[0]["value"][1]) == 20
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
    stats = (results_dir / f"{run}_stats.csv").read_text().splitlines()
    header, aggregated = stats[0].split(","), next(line for line in stats if ",Aggregated," in line).split(",")
    assert (
        int(
            aggregated[
                header.index('"Request Count"') if '"Request Count"' in header else header.index("Request Count")
            ]
        )
        == n
    )
    assert_locust_is_gone(stack)


STEADY_S = 60  # the panels need 15-25 s to fill; this leaves 35 s (seven rule evaluations) of steady reading


def locust_rate(history: Path, start: float, end: float) -> float:
    """Requests per second Locust itself counted between two instants (its
    per-second stats history, the "Aggregated" rows' running total)."""
    with history.open() as f:
        points = [
            (int(r["Timestamp"]), int(r["Total Request Count"])) for r in csv.DictReader(f) if r["Name"] == "Aggregated"
        ]

    def count_at(t: float) -> int:
        return max((n for at, n in points if at <= t), default=0)

    return (count_at(end) - count_at(start)) / (end - start)


def test_throughput_panels_agree_with_the_record_during_a_steady_load(stack, results_dir):
    """During a 60 s load, what the Load dashboard's requests-per-second panel
    and the Queues dashboard's enqueue-rate panel plot (their own queries) is
    within 10 % of what Locust counted over the window those panels read,
    once their 15 s windows are full of load; and about the run's recorded
    RPS (within 20 %: a run's pace may drift, and its record is its mean)."""
    panels = {
        "Load: requests per second": "sum(name_method:locust_requests:rate10s)",
        "Queues: enqueue rate": 'sum(queue_kind_variant:lab_enqueued:rate10s{queue="background"})',
    }
    samples: list[tuple[float, dict]] = []
    outcome: dict = {}

    def run_load():
        # The background queue: its tasks run in the API, so no worker's drain
        # takes CPU from the API as a backlog grows.
        outcome["run"], _, outcome["record"] = load(
            stack, results_dir, "worker=background", "endpoint=io/simple", "users=20", f"duration={STEADY_S}s"
        )

    thread = threading.Thread(target=run_load)
    thread.start()
    while thread.is_alive():
        now = time.time()
        samples.append((now, {name: sum(float(r["value"][1]) for r in stack.query(q)) for name, q in panels.items()}))
        thread.join(2)
    record = outcome["record"]
    history = results_dir / f"{outcome['run']}_stats_history.csv"
    # Steady state: the windows (15 s, evaluated every 5 s, of 5 s scrapes) full
    # of load, and the load not yet ended.
    first, last = record["load_started_at"] + 25, record["load_ended_at"] - 1
    steady = [(at, values) for at, values in samples if first <= at <= last]
    assert len(steady) >= 2, f"no sample in the steady window {first:.0f}-{last:.0f}: {samples}"
    for name in panels:
        # A panel's value at `at` is a 15 s rate over scrapes 0-5 s old, evaluated 0-5 s ago.
        pairs = [(values[name], locust_rate(history, at - 22.5, at - 7.5)) for at, values in steady]
        # The median, over seven evaluations: a scrape of the 0.2-CPU API that
        # waited long for the GIL reads its counter late and bends the two
        # 15 s windows it opens and closes, not the steady reading.
        seen = statistics.median(p for p, _ in pairs)
        truth = statistics.median(t for _, t in pairs)
        assert seen == pytest.approx(truth, rel=0.10), (
            f"{name} read {seen:.1f}/s at steady state, Locust counted {truth:.1f}/s then: {pairs}"
        )
        assert seen == pytest.approx(record["rps"], rel=0.20), (
            f"{name} read {seen:.1f}/s at steady state, the record says {record['rps']}/s: {pairs}"
        )


def test_make_results_and_report_show_the_run(stack, results_dir):
    records = [json.loads(p.read_text()) for p in results_dir.glob("*.json")]
    queue_runs = [r for r in records if r["scenario"] == "queue" and r["worker"] == "arq"]
    if not queue_runs:
        pytest.fail("no arq run recorded: the make load test must run first (it failed or was deselected)")
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
