"""make scale's record (results/scale-<time>-<worker>.json, beside its .md and
.html): the same load at each replica (or node) count, `reps` times, the counts
in a seeded random order within each repetition. `schema` "scale/1".

Its rows are the runs, one per count and repetition; each count's figures over
its runs (`count_figures`: a median with its interval and n, and its speed-up
over the first count) are derived from them whenever a record is read, so an older
record of one run per count reads too, with no interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from labctl import stats
from labctl.records.base import Record

SCHEMA = "scale/1"
# A count's figures over its runs, in the order the pages show them.
FIGURES = (
    "rps",
    "p95_ms",
    "drain_rate",
    "all_done_s",
    "redis_cpu_mean",
    "redis_cpu_peak",
    "workers_cpu",
    "busy_replicas",
)
# The figure a count's speed-up is taken on: the pool's throughput.
SPEEDUP_OF = "drain_rate"


class ScaleRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    base: str  # the runs' common name: each run is <base>-<n>r-rep<i> (<base>-<n>n-rep<i> over nodes)
    worker: str
    params: dict[str, Any] = {}  # requests, endpoint, users
    rows: list[dict[str, Any]] = []  # one per run: a count in one repetition ("rep"; older records: one per count)
    axis: str = "replicas"  # what the counts are: replicas, or nodes the workers are spread over
    per_node: int | None = None  # over nodes: the workers' replicas on each
    platform: dict[str, Any] = {}
    api_limits: str | None = None
    worker_limits: str | None = None
    counts: list[int] = []  # as given: the first is the one every speed-up is over
    reps: int = 1
    seed: int | None = None  # the seed of `order`
    order: list[list[int]] = []  # each repetition's counts in the order they ran
    by_count: list[dict[str, Any]] = []  # `count_figures` as written, for readers of the JSON


@dataclass(frozen=True)
class CountFigures:
    """One count over its runs: each figure's median, interval and n, the drain rate's
    ratio to the first count's (None for the first count), and how many runs were exact."""

    count: int
    runs: int
    exact: int
    figures: dict[str, stats.Estimate]
    speedup: stats.Ratio | None

    def as_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "runs": self.runs,
            "exact": self.exact,
            **{key: est.as_json() for key, est in self.figures.items()},
            "speedup": None if self.speedup is None else {**self.speedup.as_json(), "verdict": self.speedup.verdict},
        }


def _data(record: ScaleRecord | dict[str, Any]) -> dict[str, Any]:
    return record.as_json() if isinstance(record, ScaleRecord) else record


def counts_of(record: ScaleRecord | dict[str, Any]) -> list[int]:
    """The counts as given; an older record's, in the order its rows ran."""
    data = _data(record)
    axis = data.get("axis") or "replicas"
    return list(data.get("counts") or dict.fromkeys(row[axis] for row in data.get("rows", [])))


def count_figures(record: ScaleRecord | dict[str, Any]) -> list[CountFigures]:
    """Each count's figures over its runs, in the order the counts were given. The
    speed-up is Welch's interval of the ratio (stats.ratio): the runs of two counts are
    independent, taken at different moments in a random order."""
    data = _data(record)
    axis = data.get("axis") or "replicas"
    runs = {n: [row for row in data.get("rows", []) if row.get(axis) == n] for n in counts_of(data)}
    first = next(iter(runs.values()), [])
    out = []
    for i, (n, rows) in enumerate(runs.items()):
        figures = {key: stats.estimate(row.get(key) for row in rows) for key in FIGURES}
        speedup = None if i == 0 else stats.ratio((r.get(SPEEDUP_OF) for r in rows), (r.get(SPEEDUP_OF) for r in first))
        out.append(CountFigures(n, len(rows), sum(1 for r in rows if r.get("exact")), figures, speedup))
    return out
