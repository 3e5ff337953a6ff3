"""`make compare`: every chosen queue under the same limits and the same load,
in turn, each several times; one report to share.

    uv run python -m labctl compare [--workers "arq saq"] [--requests 1000] [--reps 2] [--users 100]
                                    [--spawn 100] [--endpoint io/simple] [--locust-workers 2]
                                    [--backlog-wait-s 600] [--results-dir results]

Under the limits of the running stack (read from the engine, never changed:
`make up WORKER_CPUS=0.5 WORKER_MEM=500M` first for others), for rep 1..reps and
each queue in turn (q1 q2 ... q1 q2 ...: the machine's drift spreads over the
queues):
  1. waits until no queue holds a backlog (lab_queue_depth 0 everywhere: this
     run's tasks must not wait behind others, and no other drain may share the CPU);
  2. runs `make load worker=Q iterations=N wait=1` (labctl/load_run), which
     returns once every task settled, and keeps its record, results/<run>.json;
  3. reads from Prometheus the run's throughput, backlog and completed tasks
     over time, and the CPU seconds its worker and the API used.
Then writes results/compare-<time>.json (the record), .md (the table) and
.html (the report: labctl/render/compare_page.py), and prints the table.
"""

from __future__ import annotations

import platform
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from labctl.clients.prometheus import Prometheus
from labctl.config import RESULTS_DIR, ROOT, setting
from labctl.errors import EXIT_FAILED, EXIT_OK, LabError, LabNotRunning, ParamError
from labctl.load_run.backlog import wait_for_empty
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load
from labctl.platform.containers import limit_text, workers_limit_text
from labctl.platform.docker import engine_info
from labctl.platform.lab import Lab
from labctl.queues import QUEUES, service_of
from labctl.records import published
from labctl.records.bench import ratios
from labctl.records.compare import CompareRecord, run_row, summarise
from labctl.records.run import RunRecord
from labctl.records.store import Store
from labctl.render import compare_page
from labctl.render.console import Console

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


@dataclass
class CompareOptions:
    workers: str = ""
    requests: int = DEFAULT_REQUESTS
    reps: int = DEFAULT_REPS
    users: int = 100
    spawn: str = ""
    endpoint: str = "io/simple"
    locust_workers: int = field(default_factory=lambda: int(setting("LOCUST_WORKERS", "2")))
    drain_timeout: float = field(default_factory=lambda: float(setting("LOAD_DRAIN_TIMEOUT_S", "1200")))
    backlog_wait_s: float = 600
    results_dir: Path = RESULTS_DIR


# -- What is compared ---------------------------------------------------------------------------
def parse_workers(text: str) -> list[str]:
    """`"arq saq"` or `arq,saq`; empty or `all`: every queue of lab/queues.py and `background`."""
    names = [w for w in text.replace(",", " ").split() if w]
    if not names or names == ["all"]:
        return list(QUEUES)
    unknown = [w for w in names if w not in QUEUES]
    if unknown:
        raise ParamError(f"workers: unknown {', '.join(unknown)}; one or more of {', '.join(QUEUES)}")
    return list(dict.fromkeys(names))


def run_options(options: CompareOptions, queue: str, run: str) -> LoadOptions:
    """`make load worker=Q iterations=N wait=1 ...`: one run of the comparison."""
    return LoadOptions(
        worker=queue,
        endpoint=options.endpoint,
        users=str(options.users),
        spawn=str(options.spawn or ""),
        run=run,
        iterations=str(options.requests),
        wait=True,
        locust_workers=options.locust_workers,
        drain_timeout=options.drain_timeout,
        results_dir=Path(options.results_dir),
    )


def check_params(options: CompareOptions, queues: list[str]) -> None:
    """The load's parameters as `make load` checks them, before anything runs (ParamError)."""
    if options.reps < 1 or options.requests < 1:
        raise ParamError("reps and requests must be at least 1")
    if "," in options.endpoint or options.endpoint == "all":
        raise ParamError("endpoint: one task shape (io/simple, io/thread, ...), the same for every queue")
    for queue in queues:
        # A run name as long as the comparison's longest.
        run_options(options, queue, f"compare-00000000-000000-{queue}-r{options.reps}").parse()


# -- Prometheus: the series and CPU of a run -----------------------------------------------------
def run_series(prom: Prometheus, record: RunRecord, queue: str) -> dict:
    """The run's throughput, backlog and completed share over time, t from its first request."""
    start = record.load_started_at or 0.0
    end = min(time.time(), (record.window_end or record.load_ended_at or start) + SERIES_AFTER_S)
    begin = start - 2 * SERIES_STEP_S
    sel = f'queue="{queue}"'
    exprs = {
        "throughput": f"sum(queue_kind_variant:lab_task_completed:rate10s{{{sel}}})",
        "backlog": f"max(lab_queue_depth{{{sel}}})",
        "done_pct": f"sum(lab_task_completed_total{{{sel}}})",
    }
    out: dict = {}
    for key, expr in exprs.items():
        result = prom.query_range(expr, begin, end, SERIES_STEP_S)
        values = result[0]["values"] if result else []
        out[key] = [[round(float(t) - start, 1), float(v)] for t, v in values]
    enqueued = record.tasks.enqueued if record.tasks else 0
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
def versions(lab: Lab) -> dict[str, str]:
    """The libraries' versions as uv.lock pins them (the image installs exactly these), and the image's Python."""
    try:
        packages = tomllib.loads((ROOT / "uv.lock").read_text()).get("package", [])
    except (OSError, tomllib.TOMLDecodeError):
        packages = []
    pinned = {p.get("name"): p.get("version") for p in packages}
    proc = lab.exec("api", "python", "-V")
    out = {"python (image)": proc.stdout.strip().removeprefix("Python ") if proc.returncode == 0 else "-"}
    out.update({name: pinned[name] for name in LIBRARIES if pinned.get(name)})
    return out


def machine() -> dict[str, str]:
    """The Docker engine's host as the engine describes it, and the CPU's model."""
    out = {"host": f"{platform.system()} {platform.machine()}"}
    info = engine_info()
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


def setting_of(records: list[RunRecord], lab: Lab) -> tuple[dict, list[str]]:
    """The limits and knobs the runs recorded (the first run of each queue's), and notes where runs disagree."""
    limits: dict = {"api": None, "workers": {}}
    knobs: dict = {}
    notes = []
    for record in records:
        queue = record.worker or ""
        if limits["api"] is None:
            limits["api"] = record.limits["api"]
        elif limit_text(record.limits["api"]) != limit_text(limits["api"]):
            notes.append(f"{record.run}: the API ran under {limit_text(record.limits['api'])}")
        worker = record.limits["workers"].get(queue)
        first = limits["workers"].setdefault(queue, worker)
        if limit_text(worker) != limit_text(first):
            notes.append(f"{record.run}: {queue} ran under {limit_text(worker)}, not {limit_text(first)}")
        for service, values in record.knobs.items():
            knobs.setdefault(service, values)
    return {"limits": limits, "knobs": knobs, "versions": versions(lab), "machine": machine()}, notes


# -- Other records beside the comparison: make bench, make chaos --------------------------------
def latest_bench(store: Store, queues: list[str]) -> dict[str, dict]:
    """Each queue's row of its latest bench."""
    out: dict[str, dict] = {}
    for record in store.benches():
        for row in ratios(record.as_json()):
            if row["queue"] in queues:
                out[row["queue"]] = row
    return {q: out[q] for q in queues if q in out}


def latest_chaos(store: Store, queues: list[str]) -> list[dict]:
    """Each queue's latest fault run per fault: what it lost and duplicated, and when work resumed."""
    latest: dict[tuple[str, str], dict] = {}
    for record in store.runs():
        chaos = record.chaos
        if chaos and record.worker in queues:
            latest[(record.worker, chaos.fault or "")] = {
                "queue": record.worker,
                "fault": chaos.fault,
                "lost": chaos.lost,
                "duplicates": chaos.duplicates,
                "recovered_s": chaos.recovered_s,
                "limits": f"{limit_text(record.limits.get('api'))} / "
                f"{workers_limit_text(record.limits.get('workers') or {})}",
                "run": record.run,
            }
    return sorted(latest.values(), key=lambda c: (queues.index(c["queue"]), c["fault"] or ""))


def published_beside(setting: dict, params: dict) -> tuple[dict | None, str]:
    """The article's rows when the comparison ran its setting, and why not otherwise."""
    texts = {limit_text(setting["limits"]["api"])} | {limit_text(lim) for lim in setting["limits"]["workers"].values()}
    if len(texts) != 1:
        return None, f"the API and the workers ran under different limits ({', '.join(sorted(texts))})"
    (text,) = texts
    rows = published.beside(text, params["endpoint"], params["users"])
    if rows is not None:
        return rows, ""
    if text in published.SETTINGS and params["endpoint"] == published.ENDPOINT and params["users"] == published.USERS:
        return None, f"its table for {text} is not transcribed in labctl/records/published.py"
    return None, f"this comparison ran {text}, {params['endpoint']}, {params['users']} users"


# -- The comparison ------------------------------------------------------------------------------
class Comparison:
    """The runs of one comparison, on the compose project or the Swarm stack."""

    def __init__(self, options: CompareOptions, queues: list[str], lab: Lab, ui: Console):
        self.options, self.queues, self.lab, self.ui = options, queues, lab, ui
        self.name = f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
        self.store = Store(options.results_dir)
        addr = lab.port("prometheus", 9090)
        if not addr:
            raise LabNotRunning(
                "Prometheus is not running: make compare reads the backlog and the charts from it (make up)"
            )
        self.prom = Prometheus(addr)
        self.rows: list[dict] = []
        self.records: list[RunRecord] = []
        self.series: list[dict] = []
        self.notes: list[str] = []

    def one(self, queue: str, rep: int) -> None:
        """One load run of a queue, waited for to the last task, and what Prometheus saw of it."""
        run = f"{self.name}-{queue}-r{rep}"
        if note := wait_for_empty(self.prom.queue_depths, queue, self.options.backlog_wait_s, self.ui.say):
            self.notes.append(note)
        record = run_load(run_options(self.options, queue, run), self.lab, self.ui)
        if record.unsettled():
            self.notes.append(f"{run}: not every task settled ({'; '.join(record.warnings)})")
        start = record.load_started_at or 0.0
        end = min(time.time(), (record.window_end or record.load_ended_at or start) + 3)
        cpu = cpu_seconds(self.prom, list(dict.fromkeys([service_of(queue), "api"])), start, end)
        self.records.append(record)
        self.rows.append(run_row(record.as_json(), queue, rep, cpu))

    def collect_series(self) -> None:
        """Every run's series, read once all ran: by then the 10 s rates after each run's end are in
        (the last run's after a short wait)."""
        if self.records:
            last = self.records[-1]
            until = (last.window_end or last.load_ended_at or 0.0) + SERIES_AFTER_S + SERIES_STEP_S
            time.sleep(max(0.0, min(until - time.time(), SERIES_AFTER_S + SERIES_STEP_S)))
        for row, record in zip(self.rows, self.records):
            try:
                series = run_series(self.prom, record, row["queue"])
            except (httpx.HTTPError, LabError) as exc:
                self.notes.append(f"{row['run']}: no series from Prometheus ({exc})")
                continue
            self.series.append({"queue": row["queue"], "rep": row["rep"], "run": row["run"], **series})

    def run_all(self) -> float:
        """Every rep of every queue, interleaved; the wall time."""
        started = time.monotonic()
        order = [(rep, queue) for rep in range(1, self.options.reps + 1) for queue in self.queues]
        for i, (rep, queue) in enumerate(order, 1):
            self.ui.say(f"\n== make compare {self.name}: run {i}/{len(order)}, {queue}, rep {rep}/{self.options.reps}")
            try:
                self.one(queue, rep)
            except (LabError, httpx.HTTPError) as exc:
                self.ui.say(f"{queue} rep {rep} failed: {exc}")
                self.notes.append(f"{queue} rep {rep} failed: {exc}")
        self.collect_series()
        return time.monotonic() - started

    def record(self, wall_s: float) -> CompareRecord:
        o = self.options
        params = {"workers": self.queues, "requests": o.requests, "reps": o.reps, "users": o.users}
        params.update({"spawn": o.spawn or None, "endpoint": o.endpoint, "locust_workers": o.locust_workers})
        setting, notes = setting_of(self.records, self.lab)
        beside, why_not = published_beside(setting, params) if self.records else (None, "no run")
        return CompareRecord(
            run=self.name,
            time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            command=command_line(self.queues, o),
            wall_s=round(wall_s, 1),
            params=params,
            summary=summarise(self.rows, self.queues),
            runs=self.rows,
            series=self.series,
            series_step_s=SERIES_STEP_S,
            setting=setting,
            bench=latest_bench(self.store, self.queues),
            chaos=latest_chaos(self.store, self.queues),
            published=beside,
            published_note=why_not,
            notes=self.notes + notes,
        )

    def write(self, record: CompareRecord) -> dict[str, Path]:
        record.report = str(self.store.path(self.name, ".html"))
        return {
            "json": self.store.save(record),
            "md": self.store.write_text(self.name, ".md", compare_page.markdown(record) + "\n"),
            "html": self.store.write_text(self.name, ".html", compare_page.page(record)),
        }


def command_line(queues: list[str], options: CompareOptions) -> str:
    """The make line that repeats this comparison."""
    workers = "" if queues == list(QUEUES) else f' workers="{" ".join(queues)}"'
    extra = f" spawn={options.spawn}" if options.spawn else ""
    return (
        f"make compare{workers} requests={options.requests} reps={options.reps} users={options.users} "
        f"endpoint={options.endpoint}{extra}"
    )


def compare(options: CompareOptions, lab: Lab, ui: Console) -> int:
    queues = parse_workers(options.workers)
    check_params(options, queues)
    comparison = Comparison(options, queues, lab, ui)
    ui.say(
        f"make compare {comparison.name}: {', '.join(queues)}, {options.reps} rep(s) each, "
        f"{options.requests} requests of {options.endpoint} from {options.users} users, under the stack's limits"
    )
    wall_s = comparison.run_all()
    if not comparison.rows:
        raise LabError("no run finished; nothing to report")
    record = comparison.record(wall_s)
    paths = comparison.write(record)
    ui.say(f"\n{compare_page.markdown(record)}\n")
    for note in record.notes:
        ui.say(f"NOTE: {note}")
    ui.say(f"report: {paths['html']}  (table: {paths['md']}, record: {paths['json']}); {wall_s:.0f} s in all")
    failed = len(comparison.rows) < len(queues) * options.reps
    return EXIT_FAILED if failed or any(not r["settled"] for r in comparison.rows) else EXIT_OK
