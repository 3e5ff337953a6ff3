"""make compare's record (results/compare-<time>.json, beside its .md table and
.html report): every queue under the same limits and load. `schema` "compare/1"."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import Field, model_validator

from labctl import stats
from labctl.queues import service_of
from labctl.records.base import AsRead, Figure, Record
from labctl.records.bench import BenchRatios
from labctl.records.capacity import QueueCapacity
from labctl.records.published import Published, Row
from labctl.records.run import Limits, MachineSpeed, Scrapes, counter_rate

SCHEMA = "compare/2"
# compare/1: the summary held the mean, min and max over two fixed reps; such a record's
# summary is derived again from its runs when it is read.
OLD_SCHEMAS = ("compare/1",)

MiB = 1 << 20
# A run whose machine speed is further than this from the comparison's median is marked.
SPEED_OFF_PCT = 5.0
# The two figures the queues are ranked by: requests per second the API took, and tasks
# per second run, first enqueue to last completion (every task of the run over its
# whole time: the article's "all tasks done" for a count of tasks).
RANKED = (("RPS", "rps"), ("tasks/s", "tasks_per_s"))
# The published article's table, then what the lab adds.
ARTICLE_FIELDS = (
    ("RPS", "rps"),
    ("median ms", "median_ms"),
    ("p95 ms", "p95_ms"),
    ("all tasks done s", "all_done_s"),
    ("errors %", "errors_pct"),
)
LAB_FIELDS = (
    ("worker CPU ms/task", "cpu_ms_per_task"),
    ("API CPU ms/request", "api_cpu_ms_per_request"),
    ("worker peak MB", "worker_peak_mb"),
    ("API peak MB", "api_peak_mb"),
    ("throttled periods %", "throttled_periods_pct"),
    ("lost", "lost"),
    ("dup", "duplicates"),
    ("machine speed", "machine_speed"),
)
FIELDS = ARTICLE_FIELDS + (("tasks/s", "tasks_per_s"),) + LAB_FIELDS


class CompareRun(AsRead):
    """One load run of a comparison in the report's fields (run_row), written back with
    the keys it was read with: an older record's rows lack some of today's."""

    queue: str
    rep: int
    run: str
    round: int | None = None  # the round it ran in (experiments/compare/rounds.py)
    rps: Figure | None = None  # over the steady part of the load (steady_rps)
    rps_whole_load: Figure | None = None
    median_ms: Figure | None = None
    p95_ms: Figure | None = None
    all_done_s: Figure | None = None  # first enqueue to last completion, or its projection
    all_done_projected: bool = False
    tasks_per_s: Figure | None = None
    drain_rate_per_s: Figure | None = None
    errors_pct: Figure | None = None
    requests: int | None = None
    load_s: Figure | None = None
    drain_s: Figure | None = None
    enqueued: int | None = None
    completed: int | None = None
    lost: int | None = None
    duplicates: int | None = None
    settled: bool = False
    cpu_ms_per_task: Figure | None = None
    api_cpu_ms_per_request: Figure | None = None
    worker_peak_mb: Figure | None = None
    api_peak_mb: Figure | None = None
    throttled_periods_pct: Figure | None = None
    machine_speed: Figure | None = None
    # The charts' rates over the middle of the load, against the table's (collect_series).
    chart_rps_middle: Figure | None = None
    chart_throughput_middle: Figure | None = None
    warnings: list[str] = []

    def value(self, key: str) -> Figure | None:
        """The figure a FIELDS or RANKED key names."""
        figure = getattr(self, key, None)
        return figure if isinstance(figure, int | float) and not isinstance(figure, bool) else None


class Place(Record):
    """A queue's place in a ranking (ranking()): its rank, the queues shown above it, and
    the figure it is ranked by."""

    queue: str
    rank: int
    above: list[str] = []
    median: Figure | None = None
    low: Figure | None = None
    high: Figure | None = None
    n: int = 0

    @property
    def estimate(self) -> stats.Estimate:
        return stats.Estimate(self.median, self.low, self.high, self.n)


# Why a queue's rounds stopped (experiments/compare/rounds.py): its RPS interval got
# within the target, it reached max_rounds, or the next round would pass the budget.
WITHIN, AT_CAP, OUT_OF_TIME = "within", "max_rounds", "budget"


class RoundsRecord(AsRead):
    """How the comparison's rounds went (experiments/compare/rounds.py): the seed, every
    round's order, why each queue stopped. Empty in a record from before the rounds."""

    seed: int | None = None
    rounds: int | None = None
    max_rounds: int | None = None
    target_pct: Figure = 5
    budget_s: Figure | None = None
    orders: list[list[str]] = []
    stopped: dict[str, str] = {}  # queue -> WITHIN, AT_CAP or OUT_OF_TIME

    @property
    def recorded(self) -> bool:
        return bool(self.model_fields_set)

    def not_within(self) -> dict[str, str]:
        """The queues whose RPS interval did not get within the target, and why they stopped."""
        return {q: why for q, why in self.stopped.items() if why != WITHIN}


class ChaosBeside(AsRead):
    """A queue's latest fault run of one fault (experiments/compare/setting.latest_chaos)."""

    queue: str
    fault: str | None = None
    lost: int | None = None
    duplicates: int | None = None
    recovered_s: Figure | None = None  # when work resumed after the fault
    limits: str = ""  # API / workers
    run: str = ""


class CapacityBeside(AsRead, QueueCapacity):
    """A queue's result in its latest `make capacity`, with what it ran under."""

    limits: str = ""  # API / worker
    max_wait_s: Figure | None = None
    record: str = ""


class Setting(AsRead):
    """Where a comparison ran (experiments/compare/setting.setting_of)."""

    limits: Limits = Limits()
    knobs: dict[str, dict[str, str]] = {}  # service -> its settings that change a result
    versions: dict[str, str] = {}  # library -> the version uv.lock pins
    machine: dict[str, str] = {}  # what the Docker engine's host is


class CompareParams(AsRead):
    """What a comparison ran (experiments/compare/comparison.Comparison.record)."""

    workers: list[str] = []
    requests: int | None = None  # a run's requests, where runs did not last a time
    reps: int | None = None  # runs per queue, in a record from before the rounds
    users: int = 0
    quick: bool = False
    rounds: int | None = None
    max_rounds: int | None = None
    target_pct: Figure | None = None
    budget_min: Figure | None = None
    seed: int | None = None
    warmup_run: bool = True
    duration_s: Figure | None = None
    warmup_s: Figure | None = None
    drain_watch_s: Figure | None = None
    setting: str | None = None
    spawn: str | None = None
    endpoint: str = ""
    locust_workers: int | None = None


class Series(AsRead):
    """One run's samples over time, [t from its first request, value] (experiments/compare/series.run_series)."""

    queue: str
    rep: int
    run: str
    requests: list[list[Figure]] = []  # none in a record from before they were read
    throughput: list[list[Figure]] = []
    backlog: list[list[Figure]] = []
    done_pct: list[list[Figure]] = []


class CompareRecord(Record):
    """One comparison: every queue's runs under one setting. A record written before
    runs lasted a time (`params.requests`, no `params.duration_s`) reads as it was."""

    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""  # the make line that repeats it
    wall_s: float | None = None
    params: CompareParams = CompareParams()
    # Derived from `runs` (_derived): queue -> field -> {median, low, high, n} over its runs
    # (stats.Estimate); RPS and tasks/s with the queues ranked, ties shared (ranking()); the
    # runs whose machine speed was over SPEED_OFF_PCT % off the median (off_speed()).
    summary: dict[str, dict[str, Any]] = {}
    ranking: dict[str, list[Place]] = {}
    off_speed: list[str] = []
    rounds: RoundsRecord = RoundsRecord()
    runs: list[CompareRun] = []  # one row per load run, in the order they ran
    series: list[Series] = []  # per run, in the order they ran
    series_step_s: float | None = None
    setting: Setting = Setting()
    bench: dict[str, BenchRatios] = {}  # each queue's latest make bench ratios
    chaos: list[ChaosBeside] = []  # each queue's latest make chaos per fault
    capacity: dict[str, CapacityBeside] = {}  # each queue's latest make capacity result
    published: Published | None = None  # the published experiment's rows for this setting
    published_note: str = ""
    notes: list[str] = []
    report: str | None = None  # the .html report's path

    @model_validator(mode="after")
    def _derived(self) -> CompareRecord:
        """The summary, the ranking and the runs off the machine's speed, derived from the
        runs whenever a record is made or read (an older record's too, by today's rules):
        the runs are the figures' one owner, the rest is kept in the JSON for its readers."""
        for row in self.runs:
            if "tasks_per_s" not in row.model_fields_set:
                row.tasks_per_s = tasks_per_s(row.enqueued, row.all_done_s)
        queues = list(dict.fromkeys(r.queue for r in self.runs))
        self.summary = summarise(self.runs, queues)
        self.ranking = ranking(self.runs, queues)
        self.off_speed = off_speed(self.runs)
        self.schema_version = SCHEMA
        return self

    @property
    def queues(self) -> list[str]:
        return list(self.summary)

    def figure(self, queue: str, key: str) -> stats.Estimate:
        return stats.from_json(self.summary.get(queue, {}).get(key))

    def projected(self, queue: str, key: str) -> bool:
        """Whether summarise() marked the queue's figure a projection."""
        return bool((self.summary.get(queue, {}).get(key) or {}).get("projected"))


ARTICLE_SCHEMA = "compare-article/1"


class ArticleRecord(Record):
    """`make compare setting=article`: a comparison at each of the published experiment's
    settings (records/published.py), whole, one after the other."""

    schema_version: str = Field(ARTICLE_SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""
    wall_s: float | None = None
    parts: list[CompareRecord] = []  # a comparison per setting
    report: str | None = None


def ratios_to(rows: Mapping[str, Row], reference: str, key: str = "rps") -> dict[str, float | None]:
    """Each queue's figure over the reference queue's in the published rows: the ratios
    between queues, which should carry from one machine to another where the figures do not."""
    ref = getattr(rows[reference], key) if reference in rows else None
    return {q: round(v / ref, 2) if (v := getattr(row, key)) is not None and ref else None for q, row in rows.items()}


def run_ratios_to(runs: Iterable[CompareRun], reference: str, key: str = "rps") -> dict[str, stats.Ratio]:
    """Each queue's figure over the reference queue's, from their runs: the ratio of the
    medians with its interval (stats.ratio)."""
    by_queue = values_by_queue(runs, key)
    ref = by_queue.get(reference, [])
    return {q: stats.ratio(xs, ref) for q, xs in by_queue.items()}


# -- A run's row, and the spread over the repetitions ----------------------------------
def _per(amount: float | None, count: int | None, scale: float = 1000.0) -> float | None:
    return round(amount * scale / count, 3) if amount is not None and count else None


def _mb(n: float | None) -> float | None:
    return round(n / MiB, 1) if n else None


def _timeline(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    timeline = record.get("timeline") or {}
    return [dict(zip(timeline.get("fields") or [], row)) for row in timeline.get("rows") or []]


def steady_window(record: Mapping[str, Any], warmup_s: float | None) -> tuple[float, float] | None:
    """The part of the load a run's RPS is read over: from `warmup_s` after its first
    request to a second before its last; the whole load without `warmup_s`."""
    start, end = record.get("load_started_at"), record.get("load_ended_at")
    if start is None or end is None:
        return None
    return (start + warmup_s, end - 1) if warmup_s is not None else (start, end)


def steady_rps(record: Mapping[str, Any], warmup_s: float) -> float | None:
    """Requests per second over the steady part of the load (steady_window). Read from the
    API's enqueue counter as Prometheus scraped it every 2 s (`enqueued_scrapes`; every
    request of a queue run enqueues one task), else from the run's ledger timeline
    (records before the scrapes were kept), whose reads through the loaded API can come
    seconds apart; None with neither covering it."""
    window = steady_window(record, warmup_s)
    if window is None:
        return None
    if scrapes := record.get("enqueued_scrapes"):
        return Scrapes.model_validate(scrapes).rate(*window)
    return counter_rate([[r["at"], r["enqueued"]] for r in _timeline(record)], *window)


def machine_speed(record: Mapping[str, Any], warmup_s: float | None) -> float | None:
    """The machine's speed (units of the probe's work a second) over the part of the load
    the run's RPS is read over (steady_window)."""
    window = steady_window(record, warmup_s)
    speed = record.get("machine_speed")
    return MachineSpeed.model_validate(speed).units_per_s(*window) if speed and window else None


def completed_by(record: Mapping[str, Any], at: float) -> int | None:
    """Tasks the run had completed by `at`, from its ledger timeline (its last row before)."""
    before = [r for r in _timeline(record) if r["at"] <= at]
    return int(before[-1]["completed"]) if before else None


def tasks_per_s(enqueued: int | None, all_done_s: float | None) -> float | None:
    """The run's tasks over the time from its first enqueue to its last completion."""
    return round(enqueued / all_done_s, 2) if enqueued and all_done_s else None


def projected_all_done(record: Mapping[str, Any]) -> float | None:
    """For a run whose wait for its tasks ended with a backlog: from its first enqueue, the
    time its queue would have taken to run every task at the rate seen while watched."""
    tasks = record.get("tasks") or {}
    watch = tasks.get("draining") or {}
    first, ended, rate = tasks.get("first_enqueued_at"), watch.get("watch_ended_at"), watch.get("rate_per_s")
    if not (first and ended and rate):
        return None
    return round(cast(float, ended - first + watch.get("backlog", 0) / rate), 1)


def run_row(
    record: Mapping[str, Any],
    queue: str,
    rep: int,
    cpu_s: Mapping[str, float | None],
    warmup_s: float | None = None,
    window_end: float | None = None,
) -> CompareRun:
    """One load run of a comparison in the report's fields, from its record
    (records/run.py) and the CPU seconds its worker and the API used between the
    load's start and `window_end` (`cpu_s`): the last settled task, or the end of the
    watch of a run whose queue drains slower than its API enqueued (its tasks then
    counted up to that moment). RPS: over the steady part of the load when
    `warmup_s` is given (steady_rps), else over the whole load (older records)."""
    tasks = record.get("tasks") or {}
    resources = record.get("resources") or {}
    service = service_of(queue)
    projected = projected_all_done(record) if (tasks.get("draining") and tasks.get("emptied_by")) else None
    steady = steady_rps(record, warmup_s) if warmup_s is not None else None
    done_in_window = completed_by(record, window_end) if window_end is not None and projected else None
    all_done = projected if projected is not None else tasks.get("time_to_execute_all_s")
    return CompareRun(
        queue=queue,
        rep=rep,
        run=record["run"],
        rps=steady if steady is not None else record.get("rps"),
        rps_whole_load=record.get("rps"),
        median_ms=record.get("median_ms"),
        p95_ms=record.get("p95_ms"),
        all_done_s=all_done,
        all_done_projected=projected is not None,
        tasks_per_s=tasks_per_s(tasks.get("enqueued"), all_done),
        drain_rate_per_s=(tasks.get("draining") or {}).get("rate_per_s"),
        errors_pct=record.get("failures_pct"),
        requests=record.get("requests"),
        load_s=record.get("duration_s"),
        drain_s=tasks.get("drain_s"),
        enqueued=tasks.get("enqueued"),
        completed=tasks.get("completed"),
        lost=tasks.get("lost"),
        duplicates=tasks.get("duplicates"),
        settled=bool(tasks.get("settled")),
        cpu_ms_per_task=_per(
            cpu_s.get(service),
            done_in_window if done_in_window is not None else tasks.get("completed"),
        ),
        api_cpu_ms_per_request=_per(cpu_s.get("api"), record.get("requests")),
        worker_peak_mb=_mb((resources.get(service) or {}).get("peak_memory_bytes")),
        api_peak_mb=_mb((resources.get("api") or {}).get("peak_memory_bytes")),
        throttled_periods_pct=(resources.get(service) or {}).get("cpu_throttled_periods_pct"),
        machine_speed=machine_speed(record, warmup_s),
        warnings=list(record.get("warnings") or []),
    )


def values_by_queue(
    rows: Iterable[CompareRun], key: str, queues: Iterable[str] | None = None
) -> dict[str, list[Figure | None]]:
    """Each queue's figures for `key`, one per run, in the order they ran."""
    rows = list(rows)
    names = list(queues) if queues is not None else list(dict.fromkeys(r.queue for r in rows))
    return {q: [r.value(key) for r in rows if r.queue == q] for q in names}


def summarise(rows: Iterable[CompareRun], queues: Iterable[str]) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Per queue and field, the median of that queue's runs with its interval and n (stats.estimate)."""
    rows = list(rows)
    out: dict[str, dict[str, dict[str, Any] | None]] = {}
    for q in queues:
        own = [r for r in rows if r.queue == q]
        if not own:
            continue
        out[q] = {key: stats.estimate(r.value(key) for r in own).as_json() for _, key in FIELDS}
        done = out[q].get("all_done_s")
        if done is not None and any(r.all_done_projected for r in own):
            done["projected"] = True  # a projection at the rate its queue drained while watched
    return out


def ranking(rows: Iterable[CompareRun], queues: Iterable[str]) -> dict[str, list[Place]]:
    """The queues ranked by each of RANKED: 1 + the number of queues shown higher (the
    interval of their ratio above 1, stats.ranking); queues no run tells apart share a rank."""
    rows = list(rows)
    queues = list(queues)
    return {
        key: [
            Place(queue=r.name, rank=r.rank, above=list(r.above), **r.estimate.as_json())
            for r in stats.ranking(values_by_queue(rows, key, queues))
        ]
        for _, key in RANKED
    }


def off_speed(rows: Iterable[CompareRun], pct: float = SPEED_OFF_PCT) -> list[str]:
    """The runs whose machine speed was further than `pct` % from the median of every run's:
    they ran on a machine slower or faster than the comparison's others."""
    speeds = {r.run: r.machine_speed for r in rows if r.machine_speed}
    if len(speeds) < 3:
        return []
    median = statistics.median(speeds.values())
    return [run for run, speed in speeds.items() if abs(speed / median - 1) * 100 > pct]


@dataclass(frozen=True)
class Agreement:
    """Two comparisons of the same queues side by side (agreement())."""

    medians: dict[str, tuple[float | None, float | None]]  # queue -> its median in each
    diff_pct: dict[str, float]  # how far apart the two medians are
    shifts: dict[str, stats.Ratio]  # second / first, with its interval
    far: list[str]  # more than within_pct % apart
    disagreeing: list[str]  # of those, by a shift the runs show
    called: tuple[int, int]  # pairs each calls different
    flipped: list[str]  # pairs one calls different that the other calls the other way round

    @property
    def largest_diff_pct(self) -> float | None:
        return max(self.diff_pct.values(), default=None)

    @property
    def agreed(self) -> bool:
        return bool(self.medians) and not self.flipped and not self.disagreeing


def agreement(a: CompareRecord, b: CompareRecord, within_pct: float, key: str = "rps") -> Agreement:
    """Two comparisons of the same queues set side by side: each queue's median in both,
    how far apart they are, the ratio second / first with its interval (a shift between
    the two shown only where it excludes 1), the largest difference, the queues more than
    `within_pct` % apart (`far`) and those of them apart by a shift the runs show
    (`disagreeing`), and the ordered pairs one calls different (stats.pairs_called) that
    the other calls the other way round."""
    medians = {q: (a.figure(q, key).median, b.figure(q, key).median) for q in a.queues if q in b.queues}
    diffs = {q: abs(x / y - 1) * 100 for q, (x, y) in medians.items() if x and y}
    runs_a, runs_b = values_by_queue(a.runs, key), values_by_queue(b.runs, key)
    shifts = {q: stats.ratio(runs_b.get(q, []), runs_a.get(q, [])) for q in medians}
    far = [q for q, pct in diffs.items() if pct > within_pct]
    called_a = stats.pairs_called(runs_a)
    called_b = stats.pairs_called(runs_b)
    flipped = sorted(
        f"{x} {verdict} than {y}" for (x, y), verdict in called_a.items() if called_b.get((x, y)) not in (None, verdict)
    )
    return Agreement(
        medians=medians,
        diff_pct=diffs,
        shifts=shifts,
        far=far,
        disagreeing=[q for q in far if shifts[q].differs],
        called=(len(called_a) // 2, len(called_b) // 2),
        flipped=flipped,
    )
