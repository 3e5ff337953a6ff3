"""make bench's record (results/bench-<time>.json): the lab's API and workers
beside bare ones, per queue. `schema` "bench/1".

Every lab/bare ratio is judged over its pairs (`judged`): a round's two drives,
run at the same time, or a drain's two windows, taken one after the other; the
record keeps each pair's figures (`rps_rounds`, the drain's `windows`), so the
judgement is derived again from them whenever a record is read."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from labctl import stats
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
    # ("bare_drain", "lab_drain", and "_fast" for arq at a fast poll), limits, notes,
    # and the ratios as judged when it was written ("judged", from `row_ratios`).
    rows: list[dict[str, Any]] = []


def _ratio(lab: float | None, bare: float | None) -> float | None:
    """lab / bare to two places, rounded down: the ✗ is judged on the figure
    shown, and 0.899 must not show as a 0.9 that meets the budget."""
    return math.floor(lab / bare * 100 + 1e-9) / 100 if lab and bare else None


def shown(ratio: float | None) -> float | None:
    """A ratio (or a bound of its interval) as it is shown and judged: rounded down as `_ratio` rounds."""
    return _ratio(ratio, 1.0)


# -- A ratio against the budget --------------------------------------------------------------
@dataclass(frozen=True)
class BudgetRatio:
    """A lab/bare ratio as the bench shows and judges it: the median of its pairs'
    ratios, its confidence interval (stats.paired_ratio) and n, each figure rounded
    down (`shown`). The budget is judged on the median; `unsure` when the interval
    holds the budget, so that the median may lie on the wrong side of it. Without
    pairs (an older record) it is the ratio of the two sides' whole figures, n 0."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    unsure: bool = False

    @property
    def meets(self) -> bool:
        return self.value is not None and self.value >= BUDGET_RATIO

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BudgetRatio:
        return cls(data.get("value"), data.get("low"), data.get("high"), data.get("n") or 0, bool(data.get("unsure")))

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "meets": self.meets,
            "unsure": self.unsure,
        }


def judged(
    pairs: Iterable[tuple[float | None, float | None]], num: float | None = None, den: float | None = None
) -> BudgetRatio:
    """num/den over `pairs` of (num, den) figures; with none, num / den as they are, without an interval."""
    r = stats.paired_ratio(pairs)
    if r.value is None:
        return BudgetRatio(_ratio(num, den))
    return BudgetRatio(shown(r.value), shown(r.low), shown(r.high), r.n_a, r.straddles(BUDGET_RATIO))


def _paired(a: list[Any] | None, b: list[Any] | None) -> list[tuple[Any, Any]]:
    """Two sides' per-pair figures side by side; none when they do not pair up one to one."""
    return list(zip(a, b)) if a and b and len(a) == len(b) else []


def window_rates(drain: dict[str, Any]) -> list[float | None]:
    """A drain's rate in each window: its tasks over its seconds (the record's
    `rate_rounds` are these, rounded; a record without its windows has only those)."""
    if windows := drain.get("windows"):
        return [w["tasks"] / w["s"] if w.get("s") else None for w in windows]
    return list(drain.get("rate_rounds") or [])


def window_cpu_per_task(drain: dict[str, Any]) -> list[float | None]:
    """A drain's CPU seconds a task in each window (none where its CPU was not read)."""
    return [
        w["cpu_s"] / w["tasks"] if w.get("cpu_s") is not None and w.get("tasks") else None
        for w in drain.get("windows") or []
    ]


def rps_ratio(bare: dict[str, Any], lab: dict[str, Any]) -> BudgetRatio:
    """The lab's RPS over the bare app's: round i of one against round i of the other, driven together."""
    return judged(_paired(lab.get("rps_rounds"), bare.get("rps_rounds")), lab.get("rps"), bare.get("rps"))


def drain_ratio(b: dict[str, Any], l: dict[str, Any]) -> BudgetRatio:
    """The lab's drain rate over the bare worker's, window pair by window pair."""
    return judged(_paired(window_rates(l), window_rates(b)), l.get("rate"), b.get("rate"))


def drain_cpu_ratio(b: dict[str, Any], l: dict[str, Any]) -> BudgetRatio:
    """The bare worker's CPU a task over the lab's (the ratio two CPU-bound workers would
    show), window pair by window pair."""
    pairs = _paired(window_cpu_per_task(b), window_cpu_per_task(l))
    return judged(pairs, b.get("cpu_us_per_task"), l.get("cpu_us_per_task"))


def row_ratios(row: dict[str, Any]) -> dict[str, BudgetRatio]:
    """Every ratio of a queue's row: "rps", and per drain ("drain", and "drain_fast"
    for arq at a fast poll) its rate's and its CPU's ("drain_cpu", "drain_cpu_fast")."""
    out = {"rps": rps_ratio(row.get("bare") or {}, row.get("lab") or {})}
    for suffix in ("", "_fast"):
        b, l = row.get(f"bare_drain{suffix}"), row.get(f"lab_drain{suffix}")
        if b and l:
            out[f"drain{suffix}"] = drain_ratio(b, l)
            out[f"drain_cpu{suffix}"] = drain_cpu_ratio(b, l)
    return out


def ratios(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each queue's figures of a bench in a few fields (`make results`, `make
    compare`): the lab's RPS and drain rate against the bare app's (lab ÷ bare,
    the median over the pairs, rounded down as in the table; with its interval, n
    and whether it is unsure in `rps_ratio_interval` and `drain_ratio_interval`),
    and each side's CPU per request and per task."""
    out = []
    for row in record.get("rows", []):
        bare, lab = row.get("bare") or {}, row.get("lab") or {}
        b, l = row.get("bare_drain") or {}, row.get("lab_drain") or {}
        rps, drain = rps_ratio(bare, lab), drain_ratio(b, l)
        out.append(
            {
                "queue": row["queue"],
                "run": record.get("run"),
                "time": record.get("time"),
                "mode": record.get("mode"),
                "api_limits": limit_text(record.get("api_limits")),
                "worker_limits": limit_text(row.get("worker_limits")) if row.get("worker_limits") else "-",
                "rps_ratio": rps.value,
                "drain_ratio": drain.value,
                "rps_ratio_interval": rps.as_json(),
                "drain_ratio_interval": drain.as_json(),
                "api_cpu_us_per_request": [bare.get("api_cpu_us_per_request"), lab.get("api_cpu_us_per_request")],
                "worker_cpu_us_per_task": [b.get("cpu_us_per_task"), l.get("cpu_us_per_task")],
            }
        )
    return out
