"""make bench's record (results/bench-<time>.json): the lab's API and workers
beside bare ones, per queue. `schema` "bench/1"."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from labctl.platform.containers import limit_text
from labctl.records.base import Record

SCHEMA = "bench/1"
# The budget (docs/bench.md): lab/bare at least this for RPS and drain, the lab API's peak at most this many MB.
BUDGET_RATIO = 0.9
BUDGET_PEAK_MB = 120


class BenchRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    mode: str = "await"  # the APIs' ENQUEUE_MODE
    blocking_publish: str | None = None
    requests: int | None = None
    users: int | None = None
    warmup: int | None = None
    api_drives: str | None = None
    api_limits: dict[str, Any] = {}
    worker_limits: dict[str, Any] = {}
    knobs: dict[str, Any] = {}
    # One per queue: the bare and the lab API's load ("bare", "lab"), the drains
    # ("bare_drain", "lab_drain", and "_fast" for arq at a fast poll), limits, notes.
    rows: list[dict[str, Any]] = []


def _ratio(lab, bare) -> float | None:
    """lab / bare to two places, rounded down: the ✗ is judged on the figure
    shown, and 0.899 must not show as a 0.9 that meets the budget."""
    return math.floor(lab / bare * 100 + 1e-9) / 100 if lab and bare else None


def ratios(record: dict) -> list[dict]:
    """Each queue's figures of a bench in a few fields (`make results`, `make
    compare`): the lab's RPS and drain rate against the bare app's (lab ÷ bare,
    rounded down as in the table), and each side's CPU per request and per task."""
    out = []
    for row in record.get("rows", []):
        bare, lab = row.get("bare") or {}, row.get("lab") or {}
        b, l = row.get("bare_drain") or {}, row.get("lab_drain") or {}
        out.append(
            {
                "queue": row["queue"],
                "run": record.get("run"),
                "time": record.get("time"),
                "mode": record.get("mode"),
                "api_limits": limit_text(record.get("api_limits")),
                "worker_limits": limit_text(row.get("worker_limits")) if row.get("worker_limits") else "-",
                "rps_ratio": _ratio(lab.get("rps"), bare.get("rps")),
                "drain_ratio": _ratio(l.get("rate"), b.get("rate")),
                "api_cpu_us_per_request": [bare.get("api_cpu_us_per_request"), lab.get("api_cpu_us_per_request")],
                "worker_cpu_us_per_task": [b.get("cpu_us_per_task"), l.get("cpu_us_per_task")],
            }
        )
    return out
