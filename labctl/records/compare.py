"""make compare's record (results/compare-<time>.json, beside its .md table and
.html report): every queue under the same limits and load. `schema` "compare/1"."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from labctl.queues import service_of
from labctl.records.base import Record

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
)
FIELDS = ARTICLE_FIELDS + LAB_FIELDS


class CompareRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""  # the make line that repeats it
    wall_s: float | None = None
    params: dict[str, Any] = {}  # workers, requests, reps, users, spawn, endpoint, locust_workers
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


# -- A run's row, and the spread over the repetitions ----------------------------------
def _per(amount: float | None, count: int | None, scale: float = 1000.0) -> float | None:
    return round(amount * scale / count, 3) if amount is not None and count else None


def _mb(n) -> float | None:
    return round(n / MiB, 1) if n else None


def run_row(record: Mapping, queue: str, rep: int, cpu_s: Mapping[str, float | None]) -> dict:
    """One load run of a comparison in the report's fields, from its record
    (records/run.py) and the CPU seconds its worker and the API used
    between the load's start and the last settled task (`cpu_s`)."""
    tasks = record.get("tasks") or {}
    resources = record.get("resources") or {}
    service = service_of(queue)
    return {
        "queue": queue,
        "rep": rep,
        "run": record["run"],
        "rps": record.get("rps"),
        "median_ms": record.get("median_ms"),
        "p95_ms": record.get("p95_ms"),
        "all_done_s": tasks.get("time_to_execute_all_s"),
        "errors_pct": record.get("failures_pct"),
        "requests": record.get("requests"),
        "load_s": record.get("duration_s"),
        "drain_s": tasks.get("drain_s"),
        "enqueued": tasks.get("enqueued"),
        "completed": tasks.get("completed"),
        "lost": tasks.get("lost"),
        "duplicates": tasks.get("duplicates"),
        "settled": bool(tasks.get("settled")),
        "cpu_ms_per_task": _per(cpu_s.get(service), tasks.get("completed")),
        "api_cpu_ms_per_request": _per(cpu_s.get("api"), record.get("requests")),
        "worker_peak_mb": _mb((resources.get(service) or {}).get("peak_memory_bytes")),
        "api_peak_mb": _mb((resources.get("api") or {}).get("peak_memory_bytes")),
        "throttled_periods_pct": (resources.get(service) or {}).get("cpu_throttled_periods_pct"),
        "warnings": list(record.get("warnings") or []),
    }


def stats(values: Iterable) -> dict | None:
    """Mean, min and max of the figures there are (None where a rep has none)."""
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not xs:
        return None
    return {"mean": round(sum(xs) / len(xs), 3), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarise(rows: Iterable[Mapping], queues: Iterable[str]) -> dict[str, dict[str, dict | None]]:
    """Per queue and field, the spread over that queue's runs."""
    rows = list(rows)
    return {
        q: {key: stats(r[key] for r in rows if r["queue"] == q) for _, key in FIELDS}
        for q in queues
        if any(r["queue"] == q for r in rows)
    }
