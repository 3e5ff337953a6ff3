"""`make compare`: every chosen queue under the same limits and the same load,
in turn, each several times; one report to share.

    uv run python -m scripts.compare [--workers "arq saq"] [--requests 1000] [--reps 2] [--users 100]
                                     [--spawn 100] [--endpoint io/simple] [--locust-workers 2]
                                     [--backlog-wait-s 600] [--results-dir results]

Under the limits of the running stack (read from the engine, never changed:
`make up WORKER_CPUS=0.5 WORKER_MEM=500M` first for others), for rep 1..reps and
each queue in turn (q1 q2 ... q1 q2 ...: the machine's drift spreads over the
queues):
  1. waits until no queue holds a backlog (lab_queue_depth 0 everywhere: this
     run's tasks must not wait behind others, and no other drain may share the CPU);
  2. runs `make load worker=Q iterations=N wait=1` (scripts/load.py), which
     returns once every task settled, and keeps its record, results/<run>.json;
  3. reads from Prometheus the run's throughput, backlog and completed tasks
     over time, and the CPU seconds its worker and the API used.
Then writes results/compare-<time>.json (the record), .md (the table) and
.html (the report: scripts/compare_report.py), and prints the table.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx

from scripts import bench, compare_report, published
from scripts import lab_results as R
from scripts.compose import ROOT, Compose, LoadError
from scripts.load import parser as load_parser
from scripts.load import run_load
from scripts.locust_run import raw_params
from scripts.params import load_params
from scripts.prometheus import Prometheus
from scripts.results import load_records, query_range
from scripts.swarm import Swarm, orchestrator

DEFAULT_REQUESTS = 1000
DEFAULT_REPS = 2
SERIES_STEP_S = 2  # the scrape interval
# The series go on this long after a run's last task: until the 10 s rates
# have seen it (a rule evaluation and a scrape included). The next run of the
# same queue starts later than that (Locust's start alone takes longer).
SERIES_AFTER_S = 14
LIBRARIES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "redis",
    "arq",
    "saq",
    "faststream",
    "celery",
    "kombu",
    "taskiq",
    "taskiq-redis",
    "dramatiq",
    "streaq",
    "rq",
    "huey",
    "prometheus-client",
    "locust",
)


# -- What is compared ---------------------------------------------------------------------------
def parse_workers(text: str) -> list[str]:
    """`"arq saq"` or `arq,saq`; empty or `all`: every queue of lab/queues.py and `background`."""
    names = [w for w in text.replace(",", " ").split() if w]
    if not names or names == ["all"]:
        return list(R.QUEUES)
    unknown = [w for w in names if w not in R.QUEUES]
    if unknown:
        raise load_params.ParamError(f"workers: unknown {', '.join(unknown)}; one or more of {', '.join(R.QUEUES)}")
    return list(dict.fromkeys(names))


def run_args(args: argparse.Namespace, queue: str, run: str) -> argparse.Namespace:
    """`make load worker=Q iterations=N wait=1 ...` as scripts/load.py parses it."""
    argv = ["--worker", queue, "--endpoint", args.endpoint, "--users", str(args.users), "--run", run]
    argv += ["--iterations", str(args.requests), "--wait", "--results-dir", args.results_dir]
    argv += ["--locust-workers", str(args.locust_workers), "--drain-timeout", str(args.drain_timeout)]
    if args.spawn:
        argv += ["--spawn", str(args.spawn)]
    return load_parser().parse_args(argv)


def check_params(args: argparse.Namespace, queues: list[str]) -> None:
    """The load's parameters as `make load` checks them, before anything runs (ParamError)."""
    if args.reps < 1 or args.requests < 1:
        raise load_params.ParamError("reps and requests must be at least 1")
    if "," in args.endpoint or args.endpoint == "all":
        raise load_params.ParamError("endpoint: one task shape (io/simple, io/thread, ...), the same for every queue")
    for queue in queues:
        # A run name as long as the comparison's longest.
        load_params.parse_params(raw_params(run_args(args, queue, f"compare-00000000-000000-{queue}-r{args.reps}")))


# -- Prometheus: the backlog before a run, the series and CPU of a run -------------------------
def wait_for_empty(prom: Prometheus, queue: str, timeout_s: float, say) -> str | None:
    """Wait until no queue holds a task; a note when only other queues still did at the timeout.
    LoadError when the queue under test still holds tasks then."""
    deadline, told = time.monotonic() + timeout_s, False
    while True:
        depths = {q: d for q, d in prom.by("queue", "max by (queue) (lab_queue_depth)").items() if d > 0}
        if not depths:
            return None
        if time.monotonic() >= deadline:
            if queue in depths:
                raise LoadError(f"{queue}'s queue still holds {depths[queue]:.0f} task(s) after {timeout_s:.0f} s")
            return f"before {queue}'s run, other queues still held tasks: " + ", ".join(
                f"{q} {d:.0f}" for q, d in sorted(depths.items())
            )
        if not told:
            say("waiting for an empty backlog: " + ", ".join(f"{q} {d:.0f}" for q, d in sorted(depths.items())))
            told = True
        time.sleep(2)


def run_series(prom_url: str, record: dict, queue: str) -> dict:
    """The run's throughput, backlog and completed share over time, t from its first request."""
    start = record["load_started_at"]
    end = min(time.time(), (record.get("window_end") or record["load_ended_at"]) + SERIES_AFTER_S)
    begin = start - 2 * SERIES_STEP_S
    sel = f'queue="{queue}"'
    exprs = {
        "throughput": f"sum(queue_kind_variant:lab_task_completed:rate10s{{{sel}}})",
        "backlog": f"max(lab_queue_depth{{{sel}}})",
        "done_pct": f"sum(lab_task_completed_total{{{sel}}})",
    }
    out: dict = {}
    for key, expr in exprs.items():
        result = query_range(prom_url, expr, begin, end, SERIES_STEP_S)
        values = result[0]["values"] if result else []
        out[key] = [[round(float(t) - start, 1), float(v)] for t, v in values]
    enqueued = (record.get("tasks") or {}).get("enqueued") or 0
    done = out["done_pct"]
    # The counter's value before the run (0 if the series did not exist yet):
    # the run's completions are what it gained since.
    base = done[0][1] if done and done[0][0] < 0 else 0.0
    out["done_pct"] = [[t, round(100 * (v - base) / enqueued, 2)] for t, v in done] if enqueued else []
    for key in ("throughput", "backlog"):
        out[key] = [[t, round(v, 3)] for t, v in out[key]]
    return out


def cpu_seconds(prom: Prometheus, services: list[str], start: float, end: float) -> dict[str, float | None]:
    """CPU seconds each service's containers used between two instants (their cgroup counters)."""
    out: dict[str, float | None] = {}
    for service in services:
        expr = f'sum(max by (instance) (lab_cpu_seconds_total{{service="{service}"}}))'
        before, after = prom.by("", expr, start).get(""), prom.by("", expr, end).get("")
        # A restarted container starts its counter again: no figure then.
        out[service] = (
            round(after - before, 3) if before is not None and after is not None and after >= before else None
        )
    return out


# -- The setting: versions, machine, limits and knobs --------------------------------------------
def versions(lab: Compose | Swarm) -> dict[str, str]:
    """The libraries' versions as uv.lock pins them (the image installs exactly these), and the image's Python."""
    try:
        packages = tomllib.loads((ROOT / "uv.lock").read_text()).get("package", [])
    except (OSError, tomllib.TOMLDecodeError):
        packages = []
    pinned = {p.get("name"): p.get("version") for p in packages}
    if isinstance(lab, Swarm):
        proc = lab.exec("api", "python", "-V")
    else:
        proc = lab("exec", "-T", "api", "python", "-V", check=False, timeout=60)
    out = {"python (image)": proc.stdout.strip().removeprefix("Python ") if proc.returncode == 0 else "-"}
    out.update({name: pinned[name] for name in LIBRARIES if pinned.get(name)})
    return out


def machine() -> dict[str, str]:
    """The Docker engine's host as the engine describes it, and the CPU's model."""
    out = {"host": f"{platform.system()} {platform.machine()}"}
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{json .}}"], capture_output=True, text=True, timeout=30, check=False
        )
        info = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, ValueError):
        info = {}
    for key, name in (
        ("NCPU", "cores"),
        ("MemTotal", "memory"),
        ("OperatingSystem", "OS"),
        ("KernelVersion", "kernel"),
        ("ServerVersion", "Docker engine"),
        ("CgroupVersion", "cgroup version"),
    ):
        if info.get(key):
            out[name] = f"{info[key] / (1 << 30):.1f} GiB" if key == "MemTotal" else str(info[key])
    try:
        models = [
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ]
    except OSError:
        models = []
    if models:
        out["CPU"] = models[0]
    return out


def setting_of(records: list[dict], lab: Compose | Swarm) -> tuple[dict, list[str]]:
    """The limits and knobs the runs recorded (the first run of each queue's), and notes where runs disagree."""
    limits: dict = {"api": None, "workers": {}}
    knobs: dict = {}
    notes = []
    for record in records:
        queue = record["worker"]
        if limits["api"] is None:
            limits["api"] = record["limits"]["api"]
        elif R.limit_text(record["limits"]["api"]) != R.limit_text(limits["api"]):
            notes.append(f"{record['run']}: the API ran under {R.limit_text(record['limits']['api'])}")
        worker = record["limits"]["workers"].get(queue)
        first = limits["workers"].setdefault(queue, worker)
        if R.limit_text(worker) != R.limit_text(first):
            notes.append(f"{record['run']}: {queue} ran under {R.limit_text(worker)}, not {R.limit_text(first)}")
        for service, values in (record.get("knobs") or {}).items():
            knobs.setdefault(service, values)
    return {"limits": limits, "knobs": knobs, "versions": versions(lab), "machine": machine()}, notes


# -- Other records beside the comparison: make bench, make chaos --------------------------------
def latest_bench(directory: Path, queues: list[str]) -> dict[str, dict]:
    """Each queue's row of its latest bench."""
    out: dict[str, dict] = {}
    for record in sorted(load_records(directory, bench.SCHEMA), key=lambda r: r.get("time") or ""):
        for row in bench.ratios(record):
            if row["queue"] in queues:
                out[row["queue"]] = row
    return {q: out[q] for q in queues if q in out}


def latest_chaos(directory: Path, queues: list[str]) -> list[dict]:
    """Each queue's latest fault run per fault: what it lost and duplicated, and when work resumed."""
    latest: dict[tuple[str, str], dict] = {}
    for record in sorted(load_records(directory), key=lambda r: r.get("time") or ""):
        chaos = record.get("chaos")
        if chaos and record.get("worker") in queues:
            latest[(record["worker"], chaos.get("fault"))] = {
                "queue": record["worker"],
                "fault": chaos.get("fault"),
                "lost": chaos.get("lost"),
                "duplicates": chaos.get("duplicates"),
                "recovered_s": chaos.get("recovered_s"),
                "limits": f"{R.limit_text((record.get('limits') or {}).get('api'))} / "
                f"{R.workers_limit_text((record.get('limits') or {}).get('workers') or {})}",
                "run": record["run"],
            }
    return sorted(latest.values(), key=lambda c: (queues.index(c["queue"]), c["fault"] or ""))


def published_beside(setting: dict, params: dict) -> tuple[dict | None, str]:
    """The article's rows when the comparison ran its setting, and why not otherwise."""
    texts = {R.limit_text(setting["limits"]["api"])} | {
        R.limit_text(lim) for lim in setting["limits"]["workers"].values()
    }
    if len(texts) != 1:
        return None, f"the API and the workers ran under different limits ({', '.join(sorted(texts))})"
    (text,) = texts
    rows = published.beside(text, params["endpoint"], params["users"])
    if rows is not None:
        return rows, ""
    if text in published.SETTINGS and params["endpoint"] == published.ENDPOINT and params["users"] == published.USERS:
        return None, f"its table for {text} is not transcribed in scripts/published.py"
    return None, f"this comparison ran {text}, {params['endpoint']}, {params['users']} users"


# -- The comparison ------------------------------------------------------------------------------
class Comparison:
    """The runs of one comparison, on the compose project or the Swarm stack (scripts/swarm.py's orchestrator)."""

    def __init__(self, args: argparse.Namespace, queues: list[str], lab: Compose | Swarm, say=print):
        self.args, self.queues, self.lab, self.say = args, queues, lab, say
        self.name = f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
        self.directory = Path(args.results_dir)
        addr = lab.port("prometheus", 9090)
        if not addr:
            raise LoadError(
                "Prometheus is not running: make compare reads the backlog and the charts from it (make up)"
            )
        self.prom_url = f"http://{addr}"
        self.prom = Prometheus(addr)
        self.rows: list[dict] = []
        self.records: list[dict] = []
        self.series: list[dict] = []
        self.notes: list[str] = []

    def one(self, queue: str, rep: int) -> None:
        """One load run of a queue, waited for to the last task, and what Prometheus saw of it."""
        run = f"{self.name}-{queue}-r{rep}"
        if note := wait_for_empty(self.prom, queue, self.args.backlog_wait_s, self.say):
            self.notes.append(note)
        code = run_load(run_args(self.args, queue, run), self.lab)
        record = json.loads((self.directory / f"{run}.json").read_text())
        if code != 0:
            self.notes.append(f"{run}: not every task settled ({'; '.join(record.get('warnings') or [])})")
        start = record["load_started_at"]
        end = min(time.time(), (record.get("window_end") or record["load_ended_at"]) + 3)
        cpu = cpu_seconds(self.prom, list(dict.fromkeys([R.service_of(queue), "api"])), start, end)
        self.records.append(record)
        self.rows.append(compare_report.run_row(record, queue, rep, cpu))

    def collect_series(self) -> None:
        """Every run's series, read once all ran: by then the 10 s rates after each run's end are in
        (the last run's after a short wait)."""
        if self.records:
            last = self.records[-1]
            until = (last.get("window_end") or last["load_ended_at"]) + SERIES_AFTER_S + SERIES_STEP_S
            time.sleep(max(0.0, min(until - time.time(), SERIES_AFTER_S + SERIES_STEP_S)))
        for row, record in zip(self.rows, self.records):
            try:
                series = run_series(self.prom_url, record, row["queue"])
            except (httpx.HTTPError, RuntimeError) as exc:
                self.notes.append(f"{row['run']}: no series from Prometheus ({exc})")
                continue
            self.series.append({"queue": row["queue"], "rep": row["rep"], "run": row["run"], **series})

    def run_all(self) -> float:
        """Every rep of every queue, interleaved; the wall time."""
        started = time.monotonic()
        order = [(rep, queue) for rep in range(1, self.args.reps + 1) for queue in self.queues]
        for i, (rep, queue) in enumerate(order, 1):
            self.say(f"\n== make compare {self.name}: run {i}/{len(order)}, {queue}, rep {rep}/{self.args.reps}")
            try:
                self.one(queue, rep)
            except (LoadError, httpx.HTTPError) as exc:
                self.say(f"{queue} rep {rep} failed: {exc}")
                self.notes.append(f"{queue} rep {rep} failed: {exc}")
        self.collect_series()
        return time.monotonic() - started

    def record(self, wall_s: float) -> dict:
        a = self.args
        params = {"workers": self.queues, "requests": a.requests, "reps": a.reps, "users": a.users}
        params.update({"spawn": a.spawn or None, "endpoint": a.endpoint, "locust_workers": a.locust_workers})
        setting, notes = setting_of(self.records, self.lab)
        beside, why_not = published_beside(setting, params) if self.records else (None, "no run")
        return {
            "schema": compare_report.SCHEMA,
            "run": self.name,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": command_line(self.queues, a),
            "wall_s": round(wall_s, 1),
            "params": params,
            "summary": compare_report.summarise(self.rows, self.queues),
            "runs": self.rows,
            "series": self.series,
            "series_step_s": SERIES_STEP_S,
            "setting": setting,
            "bench": latest_bench(self.directory, self.queues),
            "chaos": latest_chaos(self.directory, self.queues),
            "published": beside,
            "published_note": why_not,
            "notes": self.notes + notes,
        }

    def write(self, record: dict) -> dict[str, Path]:
        paths = {ext: self.directory / f"{self.name}.{ext}" for ext in ("json", "md", "html")}
        record["report"] = str(paths["html"])
        paths["json"].write_text(json.dumps(record, indent=2) + "\n")
        paths["md"].write_text(compare_report.markdown(record) + "\n")
        paths["html"].write_text(compare_report.page(record))
        return paths


def command_line(queues: list[str], args: argparse.Namespace) -> str:
    """The make line that repeats this comparison."""
    workers = "" if queues == list(R.QUEUES) else f' workers="{" ".join(queues)}"'
    extra = f" spawn={args.spawn}" if args.spawn else ""
    return (
        f"make compare{workers} requests={args.requests} reps={args.reps} users={args.users} "
        f"endpoint={args.endpoint}{extra}"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--workers", default="", help=f"queues, space- or comma-separated (default: all: {' '.join(R.QUEUES)})"
    )
    p.add_argument(
        "--requests", type=int, default=DEFAULT_REQUESTS, help=f"requests per run (default {DEFAULT_REQUESTS})"
    )
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help=f"runs per queue (default {DEFAULT_REPS})")
    p.add_argument("--users", type=int, default=100, help="Locust users (default 100, the article's)")
    p.add_argument("--spawn", default="", help="users started per second (default: make load's)")
    p.add_argument("--endpoint", default="io/simple", help="the task shape, one for every queue (default io/simple)")
    defaults = load_parser().parse_args([])
    p.add_argument("--locust-workers", type=int, default=defaults.locust_workers, help="Locust worker containers")
    p.add_argument(
        "--drain-timeout", type=float, default=defaults.drain_timeout, help="seconds a run may wait for its tasks"
    )
    p.add_argument(
        "--backlog-wait-s",
        type=float,
        default=600,
        help="how long to wait for every queue to be empty before a run (default 600 s)",
    )
    p.add_argument("--results-dir", default=str(ROOT / "results"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        queues = parse_workers(args.workers)
        check_params(args, queues)
    except load_params.ParamError as exc:
        print(f"make compare: {exc}", file=sys.stderr)
        return 2
    Path(args.results_dir).mkdir(parents=True, exist_ok=True)
    try:
        comparison = Comparison(args, queues, orchestrator())
        comparison.say(
            f"make compare {comparison.name}: {', '.join(queues)}, {args.reps} rep(s) each, "
            f"{args.requests} requests of {args.endpoint} from {args.users} users, under the stack's limits"
        )
        wall_s = comparison.run_all()
    except LoadError as exc:
        print(f"\nmake compare: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: no comparison written (the runs done so far have their records)", file=sys.stderr)
        return 130
    if not comparison.rows:
        print("make compare: no run finished; nothing to report", file=sys.stderr)
        return 1
    record = comparison.record(wall_s)
    paths = comparison.write(record)
    print(f"\n{compare_report.markdown(record)}\n")
    for note in record["notes"]:
        print(f"NOTE: {note}")
    print(f"report: {paths['html']}  (table: {paths['md']}, record: {paths['json']}); {wall_s:.0f} s in all")
    failed = len(comparison.rows) < len(queues) * args.reps
    return 1 if failed or any(not r["settled"] for r in comparison.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
