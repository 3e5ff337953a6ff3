"""`make scale`: how a queue's throughput follows its number of workers.

    make scale worker=celery replicas="1 2 4 8" [requests=3000 users=100 endpoint=io/simple run=NAME]

For each replica count, in the order given: the queue's worker service is scaled
to it (on compose `docker compose up --scale`, on a Swarm stack `docker service
scale`: whichever `make load` drives, scripts/swarm.py's orchestrator) and waits
until every replica is healthy and scraped by Prometheus; then the same `make
load` runs with wait=1 (the next count starts with an empty backlog) as the run
<base>-<n>r. From its record and Prometheus, each count gives:

  API req/s     Locust's requests over the load (the record's RPS), and its p95
  drain rate    tasks completed per second, from the first enqueue to the last
                completion (the ledger): the pool's throughput
  Redis CPU     the cores Redis used over the run, mean and peak (a 6 s rate): a
                single-threaded Redis is the ceiling once it nears 1
  workers' CPU  the replicas' cores summed; and how many replicas ran tasks

The table goes to results/<base>.md and .json, the plots (inline SVG, no network
needed) to results/<base>.html. The worker is scaled back to its replica count
at the start. Every knob of the make line reaches the runs as for `make load`.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import math
import sys
import time
from pathlib import Path

from lab.queues import BROKER_NAMES
from scripts.compose import Compose, LoadError
from scripts.load import parser as load_parser
from scripts.load import run_load
from scripts.locust_run import raw_params
from scripts.params import load_params
from scripts.prometheus import Prometheus
from scripts.swarm import Swarm, orchestrator

SCHEMA = "scale/1"
SCRAPE_WAIT_S = 60

# (key, column title) of the table, in order.
COLUMNS = (
    ("replicas", "replicas"),
    ("rps", "API req/s"),
    ("p95_ms", "p95 ms"),
    ("drain_rate", "drain rate tasks/s"),
    ("all_done_s", "all tasks done s"),
    ("redis_cpu_mean", "Redis CPU mean"),
    ("redis_cpu_peak", "Redis CPU peak"),
    ("workers_cpu", "workers' CPU"),
    ("busy_replicas", "replicas that ran tasks"),
    ("enqueued", "enqueued"),
    ("completed", "completed"),
    ("duplicates", "dup"),
    ("lost", "lost"),
    ("run", "run"),
)


# -- Each count -----------------------------------------------------------------------------
def wait_scraped(prom: Prometheus, worker: str, replicas: int, since: float) -> None:
    """Until Prometheus scrapes exactly `replicas` targets of the worker's job, each
    up and scraped after `since` (a removed replica's target goes with its DNS record)."""
    deadline = time.monotonic() + SCRAPE_WAIT_S
    while True:
        fresh = prom.fresh_targets(worker, since)
        if fresh == (replicas, replicas):
            return
        if time.monotonic() > deadline:
            raise LoadError(f"Prometheus scrapes {fresh[0]} {worker} target(s) ({fresh[1]} fresh), not {replicas}")
        time.sleep(1)


def step_queries(worker: str, window: str) -> dict[str, str]:
    """The PromQL of a count's figures over its run's window."""
    return {
        "redis_cpu_mean": (
            f"sum(rate(redis_cpu_sys_seconds_total[{window}])) + sum(rate(redis_cpu_user_seconds_total[{window}]))"
        ),
        # the highest 6 s rate (three scrapes) in the window, every 2 s
        "redis_cpu_peak": (
            "max_over_time((sum(rate(redis_cpu_sys_seconds_total[6s])) + sum(rate(redis_cpu_user_seconds_total[6s])))"
            f"[{window}:2s])"
        ),
        "workers_cpu": f'sum(rate(lab_cpu_seconds_total{{service="{worker}"}}[{window}]))',
        "busy_replicas": (
            f'count(sum by (instance) (increase(lab_task_completed_total{{job="{worker}", queue="{worker}"}}'
            f"[{window}])) > 0)"
        ),
    }


def step_row(replicas: int, record: dict, prom: Prometheus | None, worker: str) -> dict:
    """One count's row, from its run's record and Prometheus."""
    tasks = record.get("tasks") or {}
    done_s = tasks.get("time_to_execute_all_s")
    row = {
        "replicas": replicas,
        "run": record["run"],
        "rps": record.get("rps"),
        "median_ms": record.get("median_ms"),
        "p95_ms": record.get("p95_ms"),
        "all_done_s": done_s,
        "drain_rate": round(tasks["completed"] / done_s, 1) if done_s else None,
        **{k: tasks.get(k) for k in ("enqueued", "completed", "failed", "duplicates", "lost")},
        "exact": exact(record),
        "warnings": record.get("warnings", []),
    }
    start, end = record.get("load_started_at"), tasks.get("last_settled_at") or record.get("load_ended_at")
    if prom is None or not start or not end:
        return row
    time.sleep(max(0.0, end + 4 - time.time()))  # the scrape after the last completion
    window = f"{max(10, math.ceil(end - start))}s"
    for key, expr in step_queries(worker, window).items():
        values = list(prom.by("", expr, at=min(end + 4, time.time())).values())
        row[key] = round(values[0], 3) if values else (0 if key == "busy_replicas" else None)
    return row


def exact(record: dict) -> bool:
    """Every request answered 202 was enqueued once and completed once."""
    tasks = record.get("tasks") or {}
    accepted = (record.get("status_codes") or {}).get("202")
    return bool(
        tasks.get("settled")
        and tasks.get("enqueued") == tasks.get("completed") == accepted
        and not tasks.get("failed")
        and not tasks.get("duplicates")
        and not tasks.get("lost")
    )


def run_step(args: argparse.Namespace, platform: Compose | Swarm, replicas: int, run: str) -> dict:
    """Scale, wait until scraped, run the load to the end of its drain; the count's row."""
    print(f"\n== {args.worker}: {replicas} replica(s)", flush=True)
    since = time.time()
    platform.scale(args.worker, replicas)
    prom_addr = platform.port("prometheus", 9090)
    prom = Prometheus(prom_addr) if prom_addr else None
    if prom is not None:
        wait_scraped(prom, args.worker, replicas, since)
    one = argparse.Namespace(**{**vars(args), "run": run, "wait": True})
    code = run_load(one, platform)
    record = json.loads((Path(args.results_dir) / f"{run}.json").read_text())
    row = step_row(replicas, record, prom, args.worker)
    if code != 0 or not row["exact"]:
        row["warnings"] = [*row["warnings"], "the run did not settle exactly"]
    return row


# -- The table and the plots ------------------------------------------------------------------
def cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def markdown(summary: dict) -> str:
    lines = [
        f"# make scale worker={summary['worker']}: {summary['base']}",
        "",
        f"{summary_line(summary)}",
        "",
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "|".join("---" if key == "run" else "---:" for key, _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(cell(row.get(key)) for key, _ in COLUMNS) + " |" for row in summary["rows"]]
    notes = [f"- {row['replicas']} replica(s): {w}" for row in summary["rows"] for w in row.get("warnings", [])]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def summary_line(summary: dict) -> str:
    platform, p = summary["platform"], summary["params"]
    where = (
        f"Swarm stack {platform.get('stack')}, {platform.get('nodes')} node(s)"
        if platform.get("orchestrator") == "swarm"
        else f"compose project {platform.get('project')}"
    )
    return (
        f"{p['requests']} requests of {p['endpoint']} from {p['users']} users per count, on the {where}; "
        f"worker limits {summary.get('worker_limits') or '-'}, API {summary.get('api_limits') or '-'}."
    )


PANELS = (
    ("API req/s", (("rps", "API req/s (Locust)"),)),
    ("drain rate, tasks/s", (("drain_rate", "tasks completed per second"),)),
    ("p95 latency, ms", (("p95_ms", "p95 of the enqueue requests"),)),
    (
        "CPU, cores",
        (("redis_cpu_mean", "Redis, mean"), ("redis_cpu_peak", "Redis, peak"), ("workers_cpu", "workers, summed")),
    ),
)


def svg_plot(summary: dict) -> str:
    """The four panels against the replica count, as an SVG document (text kept as text)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    rows = summary["rows"]
    xs = [r["replicas"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (title, series) in zip(axes.flat, PANELS):
        for key, label in series:
            points = [(x, r.get(key)) for x, r in zip(xs, rows) if r.get(key) is not None]
            if points:
                ax.plot(*zip(*points), marker="o", label=label)
        if title.startswith("drain") and rows and rows[0].get("drain_rate"):
            base = rows[0]["drain_rate"] / rows[0]["replicas"]
            ax.plot(xs, [base * x for x in xs], ls="--", color="grey", label="linear from the first count")
        if title.startswith("CPU"):
            ax.axhline(1.0, ls=":", color="red", label="one core (Redis's ceiling)")
        ax.set_title(title)
        ax.set_xlabel("replicas")
        ax.set_xticks(xs)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"make scale worker={summary['worker']} ({summary['base']})", fontsize=10)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def html_page(summary: dict) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(row.get(key)))}</td>" for key, _ in COLUMNS) + "</tr>"
        for row in summary["rows"]
    )
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(summary['base'])}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>\n"
        f"<h1>make scale worker={html.escape(summary['worker'])}</h1>\n<p>{html.escape(summary_line(summary))}</p>\n"
        f"<table><tr>{head}</tr>{body}</table>\n{svg_plot(summary)}\n</body></html>\n"
    )


def write_outputs(summary: dict, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / summary["base"]
    outputs = {".json": json.dumps(summary, indent=2) + "\n", ".md": markdown(summary), ".html": html_page(summary)}
    for suffix, text in outputs.items():
        base.with_suffix(suffix).write_text(text)
    return [base.with_suffix(s) for s in outputs]


# -- The command ---------------------------------------------------------------------------
def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[int]]:
    parser = load_parser()
    parser.prog = "python -m scripts.scale"
    parser.description = __doc__
    parser.add_argument("--replicas", default="1 2 4 8", help='replica counts, e.g. "1 2 4 8"')
    args = parser.parse_args(argv)
    if args.worker not in BROKER_NAMES:
        raise load_params.ParamError(f"worker={args.worker or '?'}: one broker queue ({', '.join(BROKER_NAMES)})")
    counts = [int(n) for n in args.replicas.split() if n.isdigit() and int(n) > 0]
    if not counts or len(counts) != len(args.replicas.split()):
        raise load_params.ParamError(f'replicas="{args.replicas}": whole numbers above 0, e.g. "1 2 4 8"')
    params = load_params.parse_params(raw_params(args))  # fail before scaling anything
    args.run = args.run or f"scale-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{args.worker}"
    args.params = {"requests": params.iterations, "endpoint": params.endpoint_label, "users": params.users}
    return args, counts


def main(argv: list[str] | None = None) -> int:
    try:
        args, counts = parse(argv)
    except load_params.ParamError as exc:
        print(f"make scale: {exc}", file=sys.stderr)
        return 2
    platform = orchestrator()
    base, params = args.run, args.params
    del args.params
    summary = {"schema": SCHEMA, "base": base, "worker": args.worker, "params": params, "rows": []}
    summary["platform"] = platform.describe()
    before = platform.replicas(args.worker)
    try:
        for n in counts:
            summary["rows"].append(run_step(args, platform, n, f"{base}-{n}r"))
    except LoadError as exc:
        print(f"\nmake scale: {exc}", file=sys.stderr)
    finally:
        if before:
            print(f"\nscaling {args.worker} back to {before} replica(s)", flush=True)
            platform.scale(args.worker, before)
    if not summary["rows"]:
        return 1
    limits = json.loads((Path(args.results_dir) / f"{summary['rows'][0]['run']}.json").read_text())["limits"]
    summary["api_limits"] = f"{limits['api'].get('cpus')}cpu/{limits['api'].get('memory')}"
    worker = limits["workers"].get(args.worker, {})
    summary["worker_limits"] = f"{worker.get('cpus')}cpu/{worker.get('memory')} each"
    paths = write_outputs(summary, Path(args.results_dir))
    print("\n" + markdown(summary))
    print("written: " + ", ".join(str(p) for p in paths))
    return 0 if len(summary["rows"]) == len(counts) and all(r["exact"] for r in summary["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
