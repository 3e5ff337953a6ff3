"""make compare's record (results/compare-<time>.json, beside its .md table and
.html report): every queue under the same limits and load. `schema` "compare/1"."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from labctl.queues import service_of
from labctl.records.base import Record
from labctl.records.run import MachineSpeed, Scrapes, counter_rate

SCHEMA = "compare/1"

MiB = 1 << 20
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
FIELDS = ARTICLE_FIELDS + LAB_FIELDS


class CompareRecord(Record):
    """One comparison: every queue's runs under one setting. A record written before
    runs lasted a time (`params.requests`, no `params.duration_s`) reads as it was."""

    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""  # the make line that repeats it
    wall_s: float | None = None
    # workers, duration_s or requests, warmup_s, drain_watch_s, reps, users, spawn, endpoint, locust_workers
    params: dict[str, Any] = {}
    summary: dict[str, dict[str, Any]] = {}  # queue -> field -> {mean, min, max, n} over the reps
    runs: list[dict[str, Any]] = []  # one row per load run, in the order they ran
    series: list[dict[str, Any]] = []  # per run: throughput, backlog, done_pct over time
    series_step_s: float | None = None
    setting: dict[str, Any] = {}  # limits, knobs, versions, machine
    bench: dict[str, Any] = {}  # each queue's latest make bench ratios
    chaos: list[dict[str, Any]] = []  # each queue's latest make chaos per fault
    published: dict[str, Any] | None = None  # the published experiment's rows for this setting
    published_note: str = ""
    notes: list[str] = []
    report: str | None = None  # the .html report's path


ARTICLE_SCHEMA = "compare-article/1"


class ArticleRecord(Record):
    """`make compare setting=article`: a comparison at each of the published experiment's
    settings (records/published.py), whole, one after the other."""

    schema_version: str = Field(ARTICLE_SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""
    wall_s: float | None = None
    parts: list[dict[str, Any]] = []  # a compare/1 record per setting
    report: str | None = None


def ratios_to(summary: Mapping[str, Mapping], reference: str, key: str = "rps") -> dict[str, float | None]:
    """Each queue's figure over the reference queue's (the mean over the reps): the ratios
    between queues, which should carry from one machine to another where the figures do not."""

    def value(fields: Mapping | None) -> float | None:
        figure = (fields or {}).get(key)
        return figure.get("mean") if isinstance(figure, Mapping) else figure  # a summary's, or a published row's

    ref = value(summary.get(reference))
    return {q: round(v / ref, 2) if (v := value(f)) is not None and ref else None for q, f in summary.items()}


# -- A run's row, and the spread over the repetitions ----------------------------------
def _per(amount: float | None, count: int | None, scale: float = 1000.0) -> float | None:
    return round(amount * scale / count, 3) if amount is not None and count else None


def _mb(n) -> float | None:
    return round(n / MiB, 1) if n else None


def _timeline(record: Mapping) -> list[dict]:
    timeline = record.get("timeline") or {}
    return [dict(zip(timeline.get("fields") or [], row)) for row in timeline.get("rows") or []]


def steady_window(record: Mapping, warmup_s: float | None) -> tuple[float, float] | None:
    """The part of the load a run's RPS is read over: from `warmup_s` after its first
    request to a second before its last; the whole load without `warmup_s`."""
    start, end = record.get("load_started_at"), record.get("load_ended_at")
    if start is None or end is None:
        return None
    return (start + warmup_s, end - 1) if warmup_s is not None else (start, end)


def steady_rps(record: Mapping, warmup_s: float) -> float | None:
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


def machine_speed(record: Mapping, warmup_s: float | None) -> float | None:
    """The machine's speed (units of the probe's work a second) over the part of the load
    the run's RPS is read over (steady_window)."""
    window = steady_window(record, warmup_s)
    speed = record.get("machine_speed")
    return MachineSpeed.model_validate(speed).units_per_s(*window) if speed and window else None


def completed_by(record: Mapping, at: float) -> int | None:
    """Tasks the run had completed by `at`, from its ledger timeline (its last row before)."""
    before = [r for r in _timeline(record) if r["at"] <= at]
    return int(before[-1]["completed"]) if before else None


def projected_all_done(record: Mapping) -> float | None:
    """For a run whose wait for its tasks ended with a backlog: from its first enqueue, the
    time its queue would have taken to run every task at the rate seen while watched."""
    tasks = record.get("tasks") or {}
    watch = tasks.get("draining") or {}
    first, ended, rate = tasks.get("first_enqueued_at"), watch.get("watch_ended_at"), watch.get("rate_per_s")
    if not (first and ended and rate):
        return None
    return round(ended - first + watch.get("backlog", 0) / rate, 1)


def run_row(
    record: Mapping,
    queue: str,
    rep: int,
    cpu_s: Mapping[str, float | None],
    warmup_s: float | None = None,
    window_end: float | None = None,
) -> dict:
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
    return {
        "queue": queue,
        "rep": rep,
        "run": record["run"],
        "rps": steady if steady is not None else record.get("rps"),
        "rps_whole_load": record.get("rps"),
        "median_ms": record.get("median_ms"),
        "p95_ms": record.get("p95_ms"),
        "all_done_s": projected if projected is not None else tasks.get("time_to_execute_all_s"),
        "all_done_projected": projected is not None,
        "drain_rate_per_s": (tasks.get("draining") or {}).get("rate_per_s"),
        "errors_pct": record.get("failures_pct"),
        "requests": record.get("requests"),
        "load_s": record.get("duration_s"),
        "drain_s": tasks.get("drain_s"),
        "enqueued": tasks.get("enqueued"),
        "completed": tasks.get("completed"),
        "lost": tasks.get("lost"),
        "duplicates": tasks.get("duplicates"),
        "settled": bool(tasks.get("settled")),
        "cpu_ms_per_task": _per(
            cpu_s.get(service),
            done_in_window if done_in_window is not None else tasks.get("completed"),
        ),
        "api_cpu_ms_per_request": _per(cpu_s.get("api"), record.get("requests")),
        "worker_peak_mb": _mb((resources.get(service) or {}).get("peak_memory_bytes")),
        "api_peak_mb": _mb((resources.get("api") or {}).get("peak_memory_bytes")),
        "throttled_periods_pct": (resources.get(service) or {}).get("cpu_throttled_periods_pct"),
        "machine_speed": machine_speed(record, warmup_s),
        "warnings": list(record.get("warnings") or []),
    }


def stats(values: Iterable) -> dict | None:
    """Mean, min and max of the figures there are (None where a rep has none), and their
    spread: (max - min) / median, in % (None for one figure or a median of 0)."""
    xs = sorted(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not xs:
        return None
    mid = len(xs) // 2
    median = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
    spread = round(100 * (xs[-1] - xs[0]) / median, 1) if len(xs) > 1 and median else None
    return {"mean": round(sum(xs) / len(xs), 3), "min": xs[0], "max": xs[-1], "n": len(xs), "spread_pct": spread}


def summarise(rows: Iterable[Mapping], queues: Iterable[str]) -> dict[str, dict[str, dict | None]]:
    """Per queue and field, the spread over that queue's runs."""
    rows = list(rows)
    out = {
        q: {key: stats(r[key] for r in rows if r["queue"] == q) for _, key in FIELDS}
        for q in queues
        if any(r["queue"] == q for r in rows)
    }
    for q, fields in out.items():
        done = fields.get("all_done_s")
        if done is not None and any(r.get("all_done_projected") for r in rows if r["queue"] == q):
            done["projected"] = True  # a projection at the rate its queue drained while watched
    return out
