"""A load run's record (results/<run>.json) and its parts: what the run asked for,
Locust's counts and latencies, the ledger's tasks (records/run_tasks.py), the
limits the engine applied, Prometheus' figures. records/run_build.py computes it
from what the run produced; the store writes it.

`schema` changes when a field changes meaning; schema 1 is the only one so far.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field

from labctl.records.base import AsRead, Figure, Record
from labctl.records.chaos import ChaosSection, chaos_totals
from labctl.records.run_tasks import TaskFigures, backlog_of, task_figures

SCHEMA = 1


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
    # Locust's run began here and its duration counts from here; the first request
    # (load_started_at) follows once its users are spawned, later on a slower machine.
    locust_started_at: float | None = None
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

    def ledger_mismatch(self) -> bool:
        """The ledger's count disagrees with the load: its enqueued (less those
        answered 503 that ran all the same) are not the requests answered 202,
        or more tasks settled than were enqueued."""
        t = self.tasks
        return t is not None and (t.still_pending() < 0 or t.differs_from(self.status_codes.get("202")))

    def unsettled(self) -> bool:
        """Some of the run's tasks are not coming: the wait for them stalled or timed out."""
        return bool(self.tasks and not self.tasks.settled and not self.is_draining())

    def _refigured(self, ledger: Mapping[str, Any], settled: bool) -> TaskFigures:
        """The task figures again from the ledger, the drain watch's kept, its warning gone."""
        assert self.tasks is not None
        watch = self.tasks.draining
        self.tasks = task_figures(ledger, self.load_ended_at, settled)
        self.tasks.draining = watch
        self.warnings = [w for w in self.warnings if not w.startswith("still draining")]
        return self.tasks

    def emptied(self, ledger: Mapping[str, Any], by: str) -> None:
        """The run's backlog was run by another worker (`by`) once its watch had measured
        the queue's own drain: the counts from the ledger, whole and exact, with no time
        to execute all tasks (it would be that worker's); the watch's rate and projection stay."""
        tasks = self._refigured(ledger, backlog_of(ledger) == 0)
        tasks.time_to_execute_all_s = tasks.drain_s = None
        tasks.emptied_by = by

    def settle_later(self, ledger: Mapping[str, Any]) -> bool:
        """Fill in a draining run's task figures from its ledger once nothing is
        pending (`make results` asks); True when the record changed."""
        if not self.is_draining() or not ledger.get("totals") or backlog_of(ledger) > 0:
            return False
        self._refigured(ledger, True)
        self.settled_later_at = ledger.get("last_settled_at")
        if self.chaos is not None:
            self.chaos = self.chaos.model_copy(update=chaos_totals(ledger, self.chaos.injected_at))
        return True
