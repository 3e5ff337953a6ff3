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
from labctl.records.base import AsRead, Figure, Record
from labctl.records.run import limit_text

SCHEMA = "bench/1"
# The budget (docs/bench.md): lab/bare at least this for RPS and drain, the lab API's peak at most this many MB.
BUDGET_RATIO = 0.9
BUDGET_PEAK_MB = 120


class ApiLoad(AsRead):
    """One API's load over its rounds (bench/api_rounds.py combine): its RPS, each round's, the
    API's own CPU a request, latency, peak memory, and what went wrong."""

    rps: Figure | None = None
    rps_rounds: list[Figure | None] = []
    api_cpu_us_per_request: Figure | None = None
    p50_ms: Figure | None = None
    p95_ms: Figure | None = None
    api_peak_mb: Figure | None = None
    errors: int = 0
    enqueued: int = 0
    published: int | None = None  # after-response mode: what it really published (bench/drains.py settled_count)
    api_down: list[str] = []  # each round it was seen down in, and why
    generator_bound: bool = False


class DrainWindow(AsRead):
    """One window of a drain (experiments/bench/paired_windows.py): the tasks its
    worker did in `s` seconds, and the CPU it spent (None where it was not read)."""

    tasks: int = 0
    s: Figure | None = None
    cpu_s: Figure | None = None

    @property
    def rate(self) -> float | None:
        return self.tasks / self.s if self.s else None

    @property
    def cpu_per_task(self) -> float | None:
        return self.cpu_s / self.tasks if self.cpu_s is not None and self.tasks else None


class Drain(AsRead):
    """One worker's drain, in windows taken in turns with the other side's."""

    rate: Figure | None = None
    rate_rounds: list[Figure | None] = []  # each window's rate, rounded (all an older record has)
    windows: list[DrainWindow] = []
    cpu_us_per_task: Figure | None = None

    def window_rates(self) -> list[float | None]:
        """Its rate in each window: its tasks over its seconds (the `rate_rounds`, unrounded)."""
        return [w.rate for w in self.windows] if self.windows else list(self.rate_rounds)

    def window_cpu_per_task(self) -> list[float | None]:
        """Its CPU seconds a task in each window."""
        return [w.cpu_per_task for w in self.windows]


class BenchRow(AsRead):
    """One queue of a bench: the bare and the lab API's load, the drains (and arq's
    again at a fast poll), the worker's limits (containers.limits_of), and the
    ratios as judged when it was written (`judged`, from `row_ratios`)."""

    queue: str
    worker_limits: dict[str, Any] = {}
    bare: ApiLoad = Field(default_factory=ApiLoad)
    lab: ApiLoad = Field(default_factory=ApiLoad)
    bare_drain: Drain | None = None
    lab_drain: Drain | None = None
    bare_drain_fast: Drain | None = None
    lab_drain_fast: Drain | None = None

    def drains(self, fast: bool = False) -> tuple[Drain | None, Drain | None]:
        """The bare and the lab worker's drain (fast: arq's at a fast poll); None for a
        side without one (the background queue ran inside the APIs)."""
        return (self.bare_drain_fast, self.lab_drain_fast) if fast else (self.bare_drain, self.lab_drain)

    def drains_or_empty(self, fast: bool = False) -> tuple[Drain, Drain]:
        """`drains`, with an empty drain, its figures all None, for a side without one."""
        bare, lab = self.drains(fast)
        return bare or Drain(), lab or Drain()

    @property
    def worker_cpus(self) -> float | None:
        cpus = self.worker_limits.get("cpus")
        return float(cpus) if cpus is not None else None


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
    rows: list[BenchRow] = []  # one per queue


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


def rps_ratio(bare: ApiLoad, lab: ApiLoad) -> BudgetRatio:
    """The lab's RPS over the bare app's: round i of one against round i of the other, driven together."""
    return judged(_paired(lab.rps_rounds, bare.rps_rounds), lab.rps, bare.rps)


def drain_ratio(b: Drain, l: Drain) -> BudgetRatio:
    """The lab's drain rate over the bare worker's, window pair by window pair."""
    return judged(_paired(l.window_rates(), b.window_rates()), l.rate, b.rate)


def drain_cpu_ratio(b: Drain, l: Drain) -> BudgetRatio:
    """The bare worker's CPU a task over the lab's (the ratio two CPU-bound workers would
    show), window pair by window pair."""
    pairs = _paired(b.window_cpu_per_task(), l.window_cpu_per_task())
    return judged(pairs, b.cpu_us_per_task, l.cpu_us_per_task)


def row_ratios(row: BenchRow) -> dict[str, BudgetRatio]:
    """Every ratio of a queue's row: "rps", and per drain ("drain", and "drain_fast"
    for arq at a fast poll) its rate's and its CPU's ("drain_cpu", "drain_cpu_fast")."""
    out = {"rps": rps_ratio(row.bare, row.lab)}
    for suffix, (b, l) in (("", row.drains()), ("_fast", row.drains(fast=True))):
        if b is not None and l is not None:
            out[f"drain{suffix}"] = drain_ratio(b, l)
            out[f"drain_cpu{suffix}"] = drain_cpu_ratio(b, l)
    return out


class BenchRatios(AsRead):
    """A queue's row of a bench in a few fields (ratios): what `make results` and `make
    compare` show of it."""

    queue: str
    run: str
    time: str = ""
    mode: str | None = None
    api_limits: str = ""
    worker_limits: str = ""
    rps_ratio: Figure | None = None
    drain_ratio: Figure | None = None
    rps_ratio_interval: dict[str, Any] = {}
    drain_ratio_interval: dict[str, Any] = {}
    api_cpu_us_per_request: list[Figure | None] = []  # bare, lab
    worker_cpu_us_per_task: list[Figure | None] = []


def ratios(record: BenchRecord) -> list[BenchRatios]:
    """Each queue's figures of a bench in a few fields (`make results`, `make
    compare`): the lab's RPS and drain rate against the bare app's (lab ÷ bare,
    the median over the pairs, rounded down as in the table; with its interval, n
    and whether it is unsure in `rps_ratio_interval` and `drain_ratio_interval`),
    and each side's CPU per request and per task."""
    out = []
    for row in record.rows:
        b, l = row.drains_or_empty()
        rps, drain = rps_ratio(row.bare, row.lab), drain_ratio(b, l)
        out.append(
            BenchRatios(
                queue=row.queue,
                run=record.run,
                time=record.time,
                mode=record.mode,
                api_limits=limit_text(record.api_limits),
                worker_limits=limit_text(row.worker_limits),
                rps_ratio=rps.value,
                drain_ratio=drain.value,
                rps_ratio_interval=rps.as_json(),
                drain_ratio_interval=drain.as_json(),
                api_cpu_us_per_request=[row.bare.api_cpu_us_per_request, row.lab.api_cpu_us_per_request],
                worker_cpu_us_per_task=[b.cpu_us_per_task, l.cpu_us_per_task],
            )
        )
    return out
