"""A comparison's figures over its runs (records/compare_run.py's rows): per queue
each field's median with its interval and n (summarise), the queues ranked by RPS
and tasks/s (ranking), the runs off the machine's speed (off_speed), and the ratios
between queues, published or measured."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from labctl import stats
from labctl.records.base import Figure, Record
from labctl.records.compare_run import CompareRun
from labctl.records.published import Row

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
