"""A load run's record (results/<run>.json), computed from what the run produced:
Locust's summary (the master's LAB-RESULT line), the ledger, the limits the
engine applied (docker inspect) and Prometheus. `build_run_record` is pure: the
load run (labctl/load_run) gathers its inputs, the store writes it.

`schema` changes when a field changes meaning; schema 1 is the only one so far.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import Field

from labctl.records.base import AsRead, Figure, Record
from labctl.records.chaos import ChaosSection, chaos_totals

SCHEMA = 1
# A Locust process runs on one core (gevent: one thread). Above this share of a
# core, or of its container's limit, its numbers measure Locust, not the lab.
GENERATOR_BUSY = 0.85
# rate= runs: below this share of its target the load did not keep its schedule;
# above this share of sends late (locust/locustfile.py, LATE_S) the schedule slipped.
RATE_KEPT = 0.95
LATE_SHARE = 0.05


class DrainWatch(Record):
    """The watch of a run's tasks that ended before its queue was empty: the backlog
    left, the rate it drained at while watched, and when it should be empty."""

    backlog: int | None = None
    rate_per_s: float | None = None
    projected_empty_s: float | None = None
    watch_ended_at: float | None = None


class QueueCounts(AsRead):
    """One queue and endpoint's counts in the ledger."""

    enqueued: int | None = None
    completed: int | None = None
    failed: int | None = None
    duplicates: int | None = None
    purged: int | None = None
    pending: int | None = None
    unfinished: int | None = None


class TaskFigures(Record):
    """The ledger's part of a queue run."""

    enqueued: int = 0
    completed: int = 0
    failed: int = 0
    duplicates: int = 0
    purged: int = 0  # still pending when `make purge` emptied the queue: never run, never lost
    lost: int | None = None  # still pending when the wait ended; None while the run drains
    unfinished: int | None = None  # executions that began and never ended; None in ledgers before `started`
    settled: bool = False
    draining: DrainWatch | None = None  # the watch's backlog, rate and projection when it ended first
    first_enqueued_at: float | None = None
    last_settled_at: float | None = None
    time_to_execute_all_s: float | None = None
    drain_s: float | None = None
    per_queue: dict[str, dict[str, QueueCounts]] = {}  # queue -> endpoint -> its counts
    # Who ran the rest of a backlog the run's queue drained too slowly to wait for
    # (make compare's one-off worker): its counts are whole, its times not the queue's.
    emptied_by: str | None = None


class Timeline(Record):
    """A queue run's ledger once a second through its load and its wait for the tasks:
    `rows` of `fields` (at: unix time, enqueued, completed, failed, pending). What the
    dashboards' task panels are checked against (tests/compose/panel_truth.py)."""

    fields: list[str] = []
    rows: list[list[float]] = []


class MachineSpeed(Record):
    """The machine's speed through the load (platform/machine_speed.py): `rows` of
    [unix time, milliseconds] for one fixed unit of work (`unit`)."""

    unit: str = ""
    rows: list[list[float]] = []

    def units_per_s(self, start: float, end: float) -> float | None:
        """Units a second from the median timing between `start` and `end`: the median
        leaves out the moments the probe's thread waited for a core. None without
        three timings there."""
        inside = [ms for at, ms in self.rows if start <= at <= end and ms > 0]
        return round(1000 / statistics.median(inside), 1) if len(inside) >= 3 else None


def counter_rate(rows: Iterable[Sequence[float]], start: float, end: float) -> float | None:
    """A counter's increase a second from its [time, value] rows, between the first row
    at or after `start` and the last at or before `end`; None without two rows a second
    or more apart there."""
    inside = [row for row in rows if start <= row[0] <= end]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] < 1:
        return None
    (t0, v0), (t1, v1) = inside[0][:2], inside[-1][:2]
    return round((v1 - v0) / (t1 - t0), 1)


class Scrapes(Record):
    """A counter as Prometheus scraped it through the run (`source`): `rows` of
    [scrape time, value]. Scraped from a thread of the process every 2 s, whatever
    its event loop is doing: regular where a request to the loaded API is not."""

    source: str = ""
    rows: list[list[float]] = []

    def rate(self, start: float, end: float) -> float | None:
        """Its increase a second between the first scrape from `start` and the last to `end` (counter_rate)."""
        return counter_rate(self.rows, start, end)


class ServiceLimits(AsRead):
    """A service's limits as the engine applied them (platform.containers.limits_of)."""

    cpus: Figure | None = None
    memory: str | None = None
    memory_bytes: int | None = None
    replicas: int | None = None
    concurrency: int | None = None  # a queue worker's, per process

    @property
    def text(self) -> str:
        """`0.2cpu/200M`, as the run annotations write it; `-` when unknown."""
        if not self.replicas:
            return "-"
        return f"{f'{self.cpus:g}' if self.cpus else '-'}cpu/{self.memory or '-'}"


def limit_text(limits: ServiceLimits | Mapping[str, Any] | None) -> str:
    """A service's limits as text (ServiceLimits.text), from the model or its JSON."""
    lim = ServiceLimits.model_validate(limits) if isinstance(limits, Mapping) else limits
    return lim.text if lim is not None else "-"


def workers_limit_text(workers: Mapping[str, ServiceLimits | Mapping[str, Any] | None]) -> str:
    """One text for the workers of a run: theirs if they agree, else per queue."""
    texts = {q: limit_text(lim) for q, lim in workers.items()}
    if not texts:
        return "-"
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return ",".join(f"{q}:{t}" for q, t in texts.items())


class Limits(AsRead):
    """A run's limits: its API's, and its workers' per queue."""

    api: ServiceLimits | None = None
    workers: dict[str, ServiceLimits] = {}

    @property
    def api_text(self) -> str:
        return limit_text(self.api)

    @property
    def workers_text(self) -> str:
        return workers_limit_text(self.workers)


class GeneratorProcess(AsRead):
    """One Locust process's CPU over the run, and the most it can use (cores)."""

    role: str | None = None
    cpu_cores: Figure | None = None
    ceiling_cores: Figure = 1.0


class Generator(AsRead):
    """Locust's own processes (generator_check): whether one was busy enough to set the pace."""

    processes: list[GeneratorProcess] = []
    cpu_bound: bool = False
    warning: str | None = None


class Restarts(AsRead):
    """A service's container restarts during the run (containers.restarts_during)."""

    restarts: int = 0
    oom_killed: bool = False


class Resources(AsRead):
    """A service's memory and CPU over the run's window, from Prometheus (Prometheus.resources)."""

    peak_memory_bytes: Figure | None = None
    cpu_used_cores: Figure | None = None
    cpu_limit_cores: Figure | None = None
    cpu_used_pct_of_limit: Figure | None = None
    cpu_throttled_periods_pct: Figure | None = None  # the share of its CPU periods its limit held back


class Quantiles(AsRead):
    """The p50, p95 and p99 of a queue's task times, seconds."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class TaskTimes(AsRead):
    """A queue's task wait (enqueue to start) and latency (enqueue to done), from the lab's histograms."""

    wait: Quantiles | None = None
    latency: Quantiles | None = None


class Probe(AsRead):
    """The liveness probe's report over the run (services/probe.py)."""

    sent: int | None = None
    ok: int | None = None
    success_rate: Figure | None = None
    worst_gap_s: Figure | None = None


class Platform(AsRead):
    """Lab.describe(): where a run ran; on a Swarm, its nodes' roles and each service's nodes."""

    orchestrator: str = "compose"
    project: str | None = None  # compose
    stack: str | None = None  # a Swarm
    nodes: int | None = None
    node_roles: list[str] = []
    placement: dict[str, list[str]] = {}


class RunRecord(Record):
    """Everything a load run leaves (results/<run>.json)."""

    schema_version: int = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    scenario: str = "queue"
    worker: str | None = None
    endpoint: str = ""
    users: int = 0
    spawn_rate: float = 0.0
    iterations: int | None = None
    duration_target_s: float | None = None
    target_rate: float | None = None  # rate= (the open model): the requests a second it was to send
    late_sends_pct: float | None = None  # ...and the share of them sent late (latency counts from the schedule)
    late_sends_steady_pct: float | None = None  # ...over the schedule's second half (make capacity's steady part)
    locust_workers: int | None = None
    duration_s: float | None = None
    limits: Limits = Limits()
    knobs: dict[str, dict[str, str]] = {}  # per service, the settings that change its numbers: env var -> value
    requests: int = 0
    failures: int = 0
    failures_pct: float | None = None
    status_codes: dict[str, int] = {}
    rps: float | None = None
    median_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    avg_ms: float | None = None
    max_ms: float | None = None
    errors: list[dict[str, Any]] = []
    load_started_at: float | None = None
    load_ended_at: float | None = None
    tasks: TaskFigures | None = None
    subjects: list[str] = []
    resources: dict[str, Resources] | None = None
    worker_peak_memory_bytes: int | None = None
    cpu_throttled_periods_pct: float | None = None  # the subjects' share of CPU periods held back by their limit
    cpu_throttled_pct: float | None = None  # older records: throttled seconds per second x 100, summed over CPUs
    generator: Generator = Field(default_factory=Generator)
    exported_requests: int | None = None
    restarts: dict[str, Restarts] = {}
    probe: Probe | None = None
    warnings: list[str] = []
    platform: Platform | None = None
    window_end: float | None = None  # the end of the run's window for Prometheus
    locust_report: list[str] = []  # Locust's HTML and CSV files beside the record
    settled_later_at: float | None = None  # a draining run found settled by `make results`
    chaos: ChaosSection | None = None  # make chaos: the fault and what it cost
    timeline: Timeline | None = None  # queue runs: the ledger once a second
    machine_speed: MachineSpeed | None = None  # the machine's speed through the load
    enqueued_scrapes: Scrapes | None = None  # queue runs: the API's enqueue counter, as Prometheus scraped it
    # Queue runs: per queue, the p50/p95/p99 seconds of its tasks' wait (enqueue to start) and
    # latency (enqueue to done) over the run's window, from the lab's histograms (Prometheus.task_times).
    task_times: dict[str, TaskTimes] | None = None

    def is_draining(self) -> bool:
        """The run's watch ended before its tasks did, and no later look found it settled."""
        return bool(self.tasks and self.tasks.draining and not self.tasks.settled)

    def unsettled(self) -> bool:
        """Some of the run's tasks are not coming: the wait for them stalled or timed out."""
        return bool(self.tasks and not self.tasks.settled and not self.is_draining())

    def emptied(self, ledger: Mapping[str, Any], by: str) -> None:
        """The run's backlog was run by another worker (`by`) once its watch had measured
        the queue's own drain: the counts from the ledger, whole and exact, with no time
        to execute all tasks (it would be that worker's); the watch's rate and projection stay."""
        assert self.tasks is not None
        watch = self.tasks.draining
        self.tasks = task_figures(ledger, self.load_ended_at, backlog_of(ledger) == 0)
        self.tasks.time_to_execute_all_s = self.tasks.drain_s = None
        self.tasks.draining, self.tasks.emptied_by = watch, by
        self.warnings = [w for w in self.warnings if not w.startswith("still draining")]

    def settle_later(self, ledger: Mapping[str, Any]) -> bool:
        """Fill in a draining run's task figures from its ledger once nothing is
        pending (`make results` asks); True when the record changed."""
        if not self.is_draining() or not ledger.get("totals") or backlog_of(ledger) > 0:
            return False
        assert self.tasks is not None
        watch = self.tasks.draining
        self.tasks = task_figures(ledger, self.load_ended_at, True)
        self.tasks.draining = watch
        self.settled_later_at = ledger.get("last_settled_at")
        self.warnings = [w for w in self.warnings if not w.startswith("still draining")]
        if self.chaos is not None:
            self.chaos = self.chaos.model_copy(update=chaos_totals(ledger, self.chaos.injected_at))
        return True


@dataclass
class RunInputs:
    """What a load run gathered for its record.

    params: run, scenario, worker, endpoint, users, spawn_rate, iterations, duration_target_s
    locust: the master's LAB-RESULT
    ledger: GET /api/v1/runs/{run} at the end (queue runs), settled: pending reached 0
    draining: the drain watch's backlog, rate and projection when it ended before the drain
    limits: {"api": {...}, "workers": {queue: {...}}} (platform.containers.limits_of)
    resources: per service from Prometheus: peak_memory_bytes, cpu_throttled_periods_pct (the share of the
      CPU periods in which it ran that its limit held it back), cpu_used_cores, cpu_limit_cores
    subjects: the services under test (the queues' workers; the API for `background`
      and the event-loop scenarios): the record's worker memory and throttling are theirs.
    """

    params: Mapping[str, Any]
    locust: Mapping[str, Any]
    ledger: Mapping[str, Any] | None
    settled: bool
    limits: Limits
    knobs: Mapping[str, Mapping[str, str]]
    resources: Mapping[str, Any] | None
    probe: Mapping[str, Any] | None
    locust_workers: int
    subjects: Iterable[str]
    draining: Mapping[str, Any] | None = None
    notes: Iterable[str] = ()
    restarts: Mapping[str, Mapping[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # platform, window_end, locust_report


# -- The generator's own CPU ------------------------------------------------------------
def generator_check(processes: Iterable[Mapping[str, Any]]) -> Generator:
    """Each Locust process's CPU over the run (cores), and whether any was busy
    enough that the load generator, not the lab, set the pace."""
    rows, busy = [], []
    for p in processes:
        interval = p.get("interval_s") or 0
        cores = (p.get("cpu_seconds") or 0) / interval if interval > 0 else None
        # One process cannot use more than one core; its container may allow less.
        ceiling = min(1.0, p.get("cpu_limit_cores") or 1.0)
        row = GeneratorProcess(
            role=p.get("role"), cpu_cores=round(cores, 3) if cores is not None else None, ceiling_cores=ceiling
        )
        rows.append(row)
        if cores is not None and cores >= GENERATOR_BUSY * ceiling:
            busy.append(row)
    warning = None
    if busy:
        warning = (
            "load generator CPU-bound: "
            + ", ".join(f"{r.role} {r.cpu_cores:.2f}/{r.ceiling_cores:g} core" for r in busy)
            + " - the numbers measure Locust, not the lab: raise locust_workers"
        )
    return Generator(processes=rows, cpu_bound=bool(busy), warning=warning)


# -- The ledger's part ----------------------------------------------------------------------
def _round(x: Any, digits: int = 2) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, digits)


def _share(part: int | None, whole: int | None) -> float | None:
    """part of whole in %, none without a whole."""
    return _round(100 * (part or 0) / whole, 2) if whole else None


def backlog_of(led: Mapping[str, Any] | None) -> int:
    """Tasks pending, counted queue by queue and endpoint by endpoint: a cell
    with more settled than enqueued (pending < 0) must not hide another's
    backlog in the totals."""
    cells = [c for endpoints in (led or {}).get("queues", {}).values() for c in endpoints.values()]
    if not cells:
        return max(0, cast(int, (led or {}).get("totals", {}).get("pending", 0)))
    return sum(max(0, c.get("pending", 0)) for c in cells)


def task_figures(
    ledger: Mapping[str, Any], load_ended_at: float | None, settled: bool, draining: Mapping[str, Any] | None = None
) -> TaskFigures:
    """The ledger part of a queue run: counts, time to execute all tasks (first
    enqueue to last completion) and the drain after the load stopped. `draining`:
    the watch ended with a backlog, which is not lost: the run settles later
    (RunRecord.settle_later)."""
    totals = ledger.get("totals", {})
    first, last = ledger.get("first_enqueued_at"), ledger.get("last_settled_at")
    done = settled and backlog_of(ledger) == 0
    # A purged run settled without running every task: it has no time to execute them all.
    ran_all = done and not totals.get("purged")
    return TaskFigures(
        enqueued=totals.get("enqueued", 0),
        completed=totals.get("completed", 0),
        failed=totals.get("failed", 0),
        duplicates=totals.get("duplicates", 0),
        purged=totals.get("purged", 0),
        lost=None if draining is not None else backlog_of(ledger),
        unfinished=totals.get("unfinished") if "started" in totals else None,
        settled=done,
        draining=DrainWatch.model_validate(draining) if draining is not None else None,
        first_enqueued_at=first,
        last_settled_at=last,
        time_to_execute_all_s=_round(last - first) if ran_all and first and last else None,
        drain_s=_round(max(0.0, last - load_ended_at)) if ran_all and last and load_ended_at else None,
        per_queue={
            q: {
                e: QueueCounts.model_validate({k: row.get(k) for k in QueueCounts.model_fields})
                for e, row in cells.items()
            }
            for q, cells in ledger.get("queues", {}).items()
        },
    )


# -- Warnings ------------------------------------------------------------------------------
def _run_warnings(inputs: RunInputs, generator: Generator, requests: int, rps: float | None) -> list[str]:
    """The warnings about the load itself: the caller's notes, the generator, restarts, the count."""
    warnings = list(inputs.notes)
    if generator.warning:
        warnings.append(generator.warning)
    if inputs.locust.get("locust_cpu_warning"):
        warnings.append("Locust itself warned that a process used over 90 % CPU")
    for service, r in (inputs.restarts or {}).items():
        warnings.append(
            f"{service} restarted {r['restarts']} time(s) during the run"
            + (" (OOM killed)" if r.get("oom_killed") else "")
        )
    iterations = inputs.params.get("iterations")
    if iterations is not None and requests != iterations:
        warnings.append(f"{requests} requests recorded, not the {iterations} asked for")
    warnings += _schedule_warnings(inputs.params.get("target_rate"), inputs.locust, rps)
    return warnings


def _schedule_warnings(target: float | None, locust: Mapping[str, Any], rps: float | None) -> list[str]:
    """rate= runs: the load fell short of its rate, or many requests left late."""
    if not target:
        return []
    warnings = []
    if rps is not None and rps < RATE_KEPT * target:
        warnings.append(
            f"the load sent {rps:g} requests/s of the {target:g} asked for: the schedule was not kept "
            "(a slow answer held its user past its next send, or the generator was busy; latency counts "
            "from each scheduled time)"
        )
    sends, late = locust.get("scheduled_sends") or 0, locust.get("late_sends") or 0
    if sends and late / sends > LATE_SHARE:
        warnings.append(f"{100 * late / sends:.1f} % of the requests left over 100 ms after their scheduled time")
    return warnings


def _task_warnings(tasks: TaskFigures | None, inputs: RunInputs, accepted: int | None) -> list[str]:
    """The warnings about the ledger's tasks (queue runs only: none when tasks is None)."""
    if tasks is None:
        return []
    warnings = []
    draining = inputs.draining
    if draining is not None and not tasks.settled:
        warnings.append(
            f"still draining: {draining['backlog']} task(s) pending when the watch ended; "
            "`make results` shows the run settled once it has"
        )
    elif not tasks.settled:
        warnings.append(f"not settled: {tasks.lost} task(s) still pending when the wait ended")
    if accepted is not None and tasks.enqueued != accepted:
        warnings.append(f"ledger enqueued {tasks.enqueued} != {accepted} requests answered 202")
    if tasks.duplicates:
        warnings.append(f"{tasks.duplicates} duplicate execution(s)")
    pending = (inputs.ledger or {}).get("totals", {}).get("pending", 0)
    if pending < 0:
        warnings.append(
            f"ledger inconsistent: {-pending} more task(s) settled than enqueued "
            "(an enqueue was taken back although the broker had the task)"
        )
    return warnings


# -- The record -------------------------------------------------------------------------------
def _subject_fields(subjects: list[str], resources: Mapping[str, Any] | None) -> dict[str, Any]:
    """The subjects, every service's resources, and the subjects' worst memory peak and throttling."""
    res = resources or {}
    peaks = [res[s]["peak_memory_bytes"] for s in subjects if res.get(s, {}).get("peak_memory_bytes") is not None]
    throttles = [
        res[s]["cpu_throttled_periods_pct"]
        for s in subjects
        if res.get(s, {}).get("cpu_throttled_periods_pct") is not None
    ]
    return {
        "subjects": subjects,
        "resources": dict(res) if resources is not None else None,
        "worker_peak_memory_bytes": max(peaks) if peaks else None,
        "cpu_throttled_periods_pct": _round(max(throttles), 1) if throttles else None,
    }


def _params_fields(params: Mapping[str, Any], locust: Mapping[str, Any], start: float | None) -> dict[str, Any]:
    """What the run asked for, and when its load started."""
    return {
        "schema": SCHEMA,
        "run": params["run"],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start or locust.get("test_started_at") or 0)),
        "scenario": params["scenario"],
        "worker": params.get("worker"),
        "endpoint": params["endpoint"],
        "users": params["users"],
        "spawn_rate": params["spawn_rate"],
        "iterations": params.get("iterations"),
        "duration_target_s": params.get("duration_target_s"),
        "target_rate": params.get("target_rate"),
    }


def _load_fields(locust: Mapping[str, Any], duration: float | None) -> dict[str, Any]:
    """The master's counts and latencies, and the rate over the load's duration."""
    requests, failures = locust.get("requests", 0), locust.get("failures", 0)
    return {
        "requests": requests,
        "failures": failures,
        "failures_pct": _round(100 * failures / requests, 3) if requests else None,
        "status_codes": dict(locust.get("status_codes", {})),
        "rps": _round(requests / duration, 1) if duration else None,
        "median_ms": locust.get("median_ms"),
        "p95_ms": locust.get("p95_ms"),
        "p99_ms": locust.get("p99_ms"),
        "avg_ms": locust.get("avg_ms"),
        "max_ms": locust.get("max_ms"),
        "errors": list(locust.get("errors", [])),
    }


def build_run_record(inputs: RunInputs) -> RunRecord:
    """Everything a run leaves, as one record."""
    locust = inputs.locust
    start, end = locust.get("first_request_at"), locust.get("last_response_at")
    duration = end - start if start and end and end > start else None
    generator = generator_check(locust.get("processes", []))
    tasks = task_figures(inputs.ledger, end, inputs.settled, inputs.draining) if inputs.ledger is not None else None
    accepted = locust.get("status_codes", {}).get("202")
    load = _load_fields(locust, duration)
    warnings = _run_warnings(inputs, generator, load["requests"], load["rps"]) + _task_warnings(tasks, inputs, accepted)
    sends = locust.get("scheduled_sends")
    return RunRecord.model_validate(
        {
            **_params_fields(inputs.params, locust, start),
            "locust_workers": inputs.locust_workers,
            "duration_s": _round(duration),
            "limits": inputs.limits,
            "knobs": dict(inputs.knobs),
            **load,
            "late_sends_pct": _share(locust.get("late_sends"), sends),
            "late_sends_steady_pct": _share(locust.get("steady_late_sends"), locust.get("steady_sends")),
            "load_started_at": start,
            "load_ended_at": end,
            "tasks": tasks,
            **_subject_fields(list(inputs.subjects), inputs.resources),
            "generator": generator,
            "exported_requests": locust.get("exported_requests"),
            "restarts": dict(inputs.restarts or {}),
            "probe": dict(inputs.probe) if inputs.probe is not None else None,
            "warnings": warnings,
            **inputs.extra,
        }
    )
