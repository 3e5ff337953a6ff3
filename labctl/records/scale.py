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
from labctl.records.base import AsRead, Record
from labctl.records.run import Platform

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


class ScaleParams(AsRead):
    """The load of every run: a number of requests, or a duration."""

    requests: int | None = None
    duration_s: float | None = None
    endpoint: str = ""
    users: int = 0


class ScaleRun(AsRead):
    """One run: a count in one repetition, its run record's figures, Prometheus's and the ledger's."""

    nodes: int | None = None  # over nodes: how many the workers were spread over
    rep: int | None = None  # older records: one run a count, no repetition
    replicas: int
    run: str
    rps: float | None = None
    median_ms: float | None = None
    p95_ms: float | None = None
    all_done_s: float | None = None
    drain_rate: float | None = None
    enqueued: int | None = None
    completed: int | None = None
    failed: int | None = None
    duplicates: int | None = None
    lost: int | None = None
    exact: bool = False
    warnings: list[str] = []
    # Prometheus's, absent without it
    redis_cpu_mean: float | None = None
    redis_cpu_peak: float | None = None
    workers_cpu: float | None = None
    busy_replicas: float | int | None = None  # a count, yet Prometheus's is a float: kept as written
    node_names: list[str] = []  # over nodes: the nodes' hostnames


class ScaleRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    base: str  # the runs' common name: each run is <base>-<n>r-rep<i> (<base>-<n>n-rep<i> over nodes)
    worker: str
    params: ScaleParams = Field(default_factory=ScaleParams)
    rows: list[ScaleRun] = []  # one per run: a count in one repetition (older records: one per count)
    axis: str = "replicas"  # what the counts are: replicas, or nodes the workers are spread over
    per_node: int | None = None  # over nodes: the workers' replicas on each
    platform: Platform = Field(default_factory=Platform)
    api_limits: str | None = None
    worker_limits: str | None = None
    counts: list[int] = []  # as given: the first is the one every speed-up is over
    reps: int = 1
    seed: int | None = None  # the seed of `order`
    order: list[list[int]] = []  # each repetition's counts in the order they ran
    by_count: list[dict[str, Any]] = []  # `count_figures` as written, for readers of the JSON

    def count(self, row: ScaleRun) -> int | None:
        """The run's count on the record's axis: its replicas, or its nodes."""
        return row.nodes if self.axis == "nodes" else row.replicas


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


def counts_of(record: ScaleRecord) -> list[int]:
    """The counts as given; an older record's, in the order its rows ran."""
    ran = (record.count(row) for row in record.rows)
    return list(record.counts or dict.fromkeys(n for n in ran if n is not None))


def count_figures(record: ScaleRecord) -> list[CountFigures]:
    """Each count's figures over its runs, in the order the counts were given. The
    speed-up is Welch's interval of the ratio (stats.ratio): the runs of two counts are
    independent, taken at different moments in a random order."""
    runs = {n: [row for row in record.rows if record.count(row) == n] for n in counts_of(record)}
    first = next(iter(runs.values()), [])
    out = []
    for i, (n, rows) in enumerate(runs.items()):
        figures = {key: stats.estimate(getattr(row, key) for row in rows) for key in FIGURES}
        # the speed-up is taken on the drain rate: the pool's throughput
        speedup = None if i == 0 else stats.ratio((r.drain_rate for r in rows), (r.drain_rate for r in first))
        out.append(CountFigures(n, len(rows), sum(1 for r in rows if r.exact), figures, speedup))
    return out
