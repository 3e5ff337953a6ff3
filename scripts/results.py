"""`make results`: the newest runs (results/*.json) in a few columns, the latest
comparison (`make compare`) and the latest `make bench`; `make results full=1`:
every run, comparison and bench with every column.
`make report run=NAME`: PNG plots of a run from Prometheus, next to its JSON.

    uv run python -m scripts.results table [--full] [--last 10] [--results-dir results]
    uv run python -m scripts.results report --run NAME [--results-dir results]

The report asks Prometheus (query_range over the run's window, the lab's
running Prometheus: its data volume outlives `make down`) for four panels:
throughput (requests sent, tasks enqueued and completed per second), backlog
(queue depth; for the event-loop scenarios the API's loop lag and the probe's
time since its last success), latency (Locust's p50/p95/p99, and the tasks' end
to end p95) and CPU against the limit of each container involved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx

from scripts import bench, compare_report
from scripts import lab_results as R

ROOT = Path(__file__).resolve().parents[1]
RATE = "[10s]"  # five scrapes at the 2 s scrape interval
LATEST_RUNS = 10  # the runs `make results` shows without full=1


def load_records(directory: Path, schema=R.SCHEMA) -> list[dict]:
    records = []
    for path in sorted(directory.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"skipping {path}: {exc}", file=sys.stderr)
            continue
        if isinstance(record, dict) and record.get("schema") == schema and "run" in record:
            records.append(record)
    return records


def settle_draining(directory: Path, records: list[dict]) -> None:
    """Runs whose drain watch ended with a backlog: ask their ledgers (the running
    lab's API) whether they have settled since, and fill their figures in."""
    draining = [r for r in records if R.is_draining(r)]
    if not draining:
        return
    from scripts.lab_api import ledger
    from scripts.swarm import orchestrator

    api = orchestrator().port("api", 8000)
    if not api:
        print(f"{len(draining)} run(s) still draining; the lab is not running to ask their ledgers (make up)")
        return
    for record in draining:
        led = ledger(api, record["run"])
        if led is not None and R.settle_later(record, led):
            (directory / f"{record['run']}.json").write_text(json.dumps(record, indent=2) + "\n")


def _by_time(records: list[dict]) -> list[dict]:
    return sorted(records, key=lambda r: (r.get("time") or "", r.get("run") or ""))


def _print_full(records: list[dict], comparisons: list[dict], benches: list[dict]) -> None:
    """Every record with every column (make results full=1)."""
    if records:
        print(R.table(records))
    for comparison in comparisons:
        print(f"\nComparison {comparison['run']} (make compare)\n{compare_report.markdown(comparison)}")
    if benches:
        print("\nWhat the lab costs (make bench): the lab beside a bare app and worker")
        print(bench.table(benches))


def _print_latest(records: list[dict], comparisons: list[dict], benches: list[dict], last: int) -> None:
    """The newest runs in a few columns, the latest comparison's table and the latest bench's ratios."""
    if records:
        print(R.table(records, R.SHORT_COLUMNS, last=last))
        shown = min(last, len(records))
        print(f"(the newest {shown} of {len(records)} runs; make results full=1: every run and column)")
    if comparisons:
        latest = comparisons[-1]
        print(f"\nLatest comparison (make compare): {latest['run']}, report {latest.get('report') or '-'}")
        print(compare_report.markdown(latest))
    if benches:
        print(f"\nWhat the lab costs (make bench): the lab beside a bare app and worker, {benches[-1]['run']}")
        print(bench.short_table(benches[-1]))


def cmd_table(args) -> int:
    directory = Path(args.results_dir)
    records = load_records(directory)
    settle_draining(directory, records)
    benches = _by_time(load_records(directory, bench.SCHEMA))
    comparisons = _by_time(load_records(directory, compare_report.SCHEMA))
    if not records and not benches and not comparisons:
        print(f"no run recorded in {directory}/ yet: make load worker=..., make compare or make bench (see make help)")
        return 0
    if args.full:
        _print_full(records, comparisons, benches)
    else:
        _print_latest(records, comparisons, benches, args.last)
    return 0


def query_range(prom_url: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    r = httpx.get(
        f"{prom_url}/api/v1/query_range",
        params={"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        timeout=30,
    )
    body = r.json()
    if body.get("status") != "success":
        raise RuntimeError(f"Prometheus rejected {expr!r}: {body.get('error')}")
    return body["data"]["result"]


def _shared_queries(record: dict) -> tuple[tuple, list[tuple], list[tuple]]:
    """The requests sent, Locust's latency quantiles and the CPU against the limits: in both kinds of panels."""
    subjects = record.get("subjects") or ["api"]
    services = "|".join(dict.fromkeys([*subjects, "api"]))
    gen = "locust-master|locust-worker"
    locust_q = [
        ("Locust p50", f"histogram_quantile(0.5, sum by (le) (rate(locust_response_time_seconds_bucket{RATE})))", {}),
        ("Locust p95", f"histogram_quantile(0.95, sum by (le) (rate(locust_response_time_seconds_bucket{RATE})))", {}),
        ("Locust p99", f"histogram_quantile(0.99, sum by (le) (rate(locust_response_time_seconds_bucket{RATE})))", {}),
    ]
    sent = ("requests sent (Locust)", f"sum(rate(locust_requests_total{RATE}))", {"color": "black", "lw": 2})
    cpu = [
        ("{service} CPU", f'sum by (service) (rate(lab_cpu_seconds_total{{service=~"{services}|{gen}"}}{RATE}))', {}),
        ("{service} limit", f'max by (service) (lab_cpu_limit_cores{{service=~"{services}"}})', {"ls": "--", "lw": 1}),
    ]
    return sent, locust_q, cpu


def _queue_panels(record: dict, sent: tuple, locust_q: list[tuple], cpu: list[tuple]) -> list:
    """A queue run's panels: enqueued against completed, the backlog, the tasks' end-to-end latency."""
    queues = "|".join((record.get("tasks") or {}).get("per_queue", {}) or [record.get("worker") or ".*"])
    return [
        (
            "Throughput",
            "per second",
            [
                sent,
                (
                    "{queue} enqueued",
                    f'sum by (queue) (rate(lab_enqueued_total{{queue=~"{queues}"}}{RATE}))',
                    {"ls": ":"},
                ),
                (
                    "{queue} completed",
                    f'sum by (queue) (rate(lab_task_completed_total{{queue=~"{queues}"}}{RATE}))',
                    {},
                ),
            ],
        ),
        (
            "Backlog (tasks waiting)",
            "tasks",
            [
                ("{queue}", f'max by (queue) (lab_queue_depth{{queue=~"{queues}"}})', {}),
            ],
        ),
        (
            "Latency",
            "seconds",
            [
                *locust_q,
                (
                    "{queue} task end-to-end p95",
                    (
                        "histogram_quantile(0.95, sum by (le, queue) "
                        f'(rate(lab_task_latency_seconds_bucket{{queue=~"{queues}"}}{RATE})))'
                    ),
                    {"ls": "--"},
                ),
            ],
        ),
        ("CPU vs limit", "cores", cpu),
    ]


def _api_panels(sent: tuple, locust_q: list[tuple], cpu: list[tuple]) -> list:
    """Any other run's panels: the API's answers, the event loop and the probe."""
    return [
        (
            "Throughput",
            "per second",
            [
                sent,
                (
                    "API {handler} {status}",
                    f'sum by (handler, status) (rate(http_requests_total{{job="api"}}{RATE}))',
                    {},
                ),
                ("probe {outcome}", f"sum by (outcome) (rate(lab_probe_requests_total{RATE}))", {"ls": ":"}),
            ],
        ),
        (
            "Event loop",
            "seconds",
            [
                ("API event-loop lag", 'max(lab_event_loop_lag_seconds{service="api"})', {}),
                ("probe: time since last success", "max(lab_probe_seconds_since_success)", {"ls": "--"}),
            ],
        ),
        ("Latency", "seconds", locust_q),
        ("CPU vs limit", "cores", cpu),
    ]


def panels_for(record: dict) -> list[tuple[str, str, list[tuple[str, str, dict]]]]:
    """(title, y label, [(legend template, PromQL, line style)]) for the run's four panels."""
    sent, locust_q, cpu = _shared_queries(record)
    if record.get("scenario") == "queue":
        return _queue_panels(record, sent, locust_q, cpu)
    return _api_panels(sent, locust_q, cpu)


def _report_window(record: dict, path: Path) -> tuple[float, float] | None:
    """The load's start and the end of the window (tasks settled, or the load's end); None when it has none."""
    start = record.get("load_started_at")
    end = record.get("window_end") or (record.get("tasks") or {}).get("last_settled_at") or record.get("load_ended_at")
    if not start or not end:
        print(f"{path} has no time window", file=sys.stderr)
        return None
    return start, end


def _draw_panel(ax, prom: str, record: dict, panel: tuple, window: tuple[float, float, float, float, float]) -> bool:
    """Plots one panel's series and the load's marks on ax; True when Prometheus had no data for it."""
    title, ylabel, queries = panel
    start, end, t0, t1, step = window
    for legend, expr, style in queries:
        for series in query_range(prom, expr, t0, t1, step):
            xs = [float(t) - start for t, _ in series["values"]]
            ys = [float(v) for _, v in series["values"]]
            label = legend.format_map(_Default(series["metric"]))
            ax.plot(xs, ys, label=label, **{k: v for k, v in style.items() if k in ("ls", "lw", "color")})
    empty = not ax.lines
    if empty:
        ax.text(
            0.5,
            0.5,
            "no data in Prometheus for this window",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="grey",
        )
    ax.axvline(0, color="green", lw=0.8)
    ax.axvline(record["load_ended_at"] - start, color="red", lw=0.8)
    if end > record["load_ended_at"] + 1:
        ax.axvline(end - start, color="purple", lw=0.8, ls="--")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7, loc="upper right")
    return empty


def _report_title(record: dict) -> str:
    """The figure's title: what ran, how hard, how fast, under which limits."""
    limits = record.get("limits") or {}
    return (
        f"{record['run']}: {record.get('worker') or record['scenario']} {record['endpoint']}, "
        f"{record['users']} users, {record['requests']} requests, {record.get('rps')} req/s; "
        f"api {R.limit_text(limits.get('api'))}, workers {R.workers_limit_text(limits.get('workers') or {})}"
    )


def cmd_report(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scripts.swarm import orchestrator

    directory = Path(args.results_dir)
    path = directory / f"{args.run}.json"
    if not path.exists():
        print(f"no record {path}: `make results` lists the runs", file=sys.stderr)
        return 2
    record = json.loads(path.read_text())
    addr = orchestrator().port("prometheus", 9090)
    if not addr:
        print("Prometheus is not running: `make up` (its data survives `make down`)", file=sys.stderr)
        return 1
    prom = f"http://{addr}"
    window = _report_window(record, path)
    if window is None:
        return 1
    start, end = window
    t0, t1 = start - 20, end + 20
    step = max(1.0, round((t1 - t0) / 300))

    fig, axes = plt.subplots(2, 2, figsize=(14, 9), sharex=True)
    empty = [
        panel[0]
        for ax, panel in zip(axes.flat, panels_for(record))
        if _draw_panel(ax, prom, record, panel, (start, end, t0, t1, step))
    ]
    for ax in axes[1]:
        ax.set_xlabel("seconds since the first request (green: load start, red: load end, purple: tasks settled)")
    fig.suptitle(_report_title(record), fontsize=10)
    fig.tight_layout()
    out = directory / f"{args.run}.png"
    fig.savefig(out, dpi=100)
    print(
        f"wrote {out} ({time.strftime('%H:%M:%S', time.localtime(start))} - "
        f"{time.strftime('%H:%M:%S', time.localtime(end))}, step {step:g} s)"
    )
    if empty:
        print(f"no data for: {', '.join(empty)} (scraped? `make up` with Prometheus; the window is {t1 - t0:.0f} s)")
    return 0


class _Default(dict):
    def __missing__(self, key):
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.results", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="the newest runs, comparison and bench as markdown tables")
    table.add_argument("--full", action="store_true", help="every run, comparison and bench, every column")
    table.add_argument(
        "--last", type=int, default=LATEST_RUNS, help=f"runs shown without --full (default {LATEST_RUNS})"
    )
    table.add_argument("--results-dir", default=str(ROOT / "results"))
    report = sub.add_parser("report", help="PNG plots of one run from Prometheus")
    report.add_argument("--run", required=True)
    report.add_argument("--results-dir", default=str(ROOT / "results"))
    args = parser.parse_args(argv)
    return cmd_table(args) if args.command == "table" else cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
