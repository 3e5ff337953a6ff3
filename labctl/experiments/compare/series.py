"""A comparison's runs as Prometheus saw them: their series over time, the charts' means
over the middle of a run's load, and the CPU seconds a run's containers used."""

from __future__ import annotations

import time

from labctl.clients.prometheus import Prometheus
from labctl.records.compare import Series
from labctl.records.run import RunRecord

SERIES_STEP_S = 2  # the scrape interval
# The series go on this long after a run's last task: until the 10 s rates
# have seen it (a rule evaluation and a scrape included). The next run of the
# same queue starts later than that (Locust's start alone takes longer).
SERIES_AFTER_S = 14


def run_series(prom: Prometheus, record: RunRecord, queue: str, rep: int) -> Series:
    """The run's request rate, throughput, backlog and completed share over time, t from its first
    request. The request rate is Locust's (its counters exist only while the run's Locust does).
    A run whose backlog another worker ran after its watch ends where its watch did: what
    followed is not its queue's own drain."""
    start = record.load_started_at or 0.0
    after = 0 if record.tasks and record.tasks.emptied_by else SERIES_AFTER_S
    end = min(time.time(), (record.window_end or record.load_ended_at or start) + after)
    begin = start - 2 * SERIES_STEP_S
    sel = f'queue="{queue}"'
    exprs = {
        "requests": "sum(name_method:locust_requests:rate10s)",
        "throughput": f"sum(queue_kind_variant:lab_task_completed:rate10s{{{sel}}})",
        "backlog": f"max(lab_queue_depth{{{sel}}})",
        "done_pct": f"sum(lab_task_completed_total{{{sel}}})",
    }
    out: dict[str, list[list[float]]] = {}
    for key, expr in exprs.items():
        result = prom.query_range(expr, begin, end, SERIES_STEP_S)
        values = result[0]["values"] if result else []
        out[key] = [[round(float(t) - start, 1), float(v)] for t, v in values]
    enqueued = record.tasks.enqueued if record.tasks else 0
    done = out["done_pct"]
    # The counter's value before the run (0 if the series did not exist yet):
    # the run's completions are what it gained since.
    base = done[0][1] if done and done[0][0] < 0 else 0.0
    out["done_pct"] = [[t, round(100 * (v - base) / enqueued, 2)] for t, v in done] if enqueued else []
    for key in ("requests", "throughput", "backlog"):
        out[key] = [[t, round(v, 3)] for t, v in out[key]]
    return Series(queue=queue, rep=rep, run=record.run, **out)


def middle_rate(
    samples: list[list[float]], record: RunRecord, warmup_s: float, rate_window_s: float = 10
) -> float | None:
    """The mean of a rate's samples over the middle of the run's load: from the first instant
    its 10 s window lies past the warm-up to the load's end (t from the first request)."""
    if record.load_started_at is None or record.load_ended_at is None:
        return None
    end = record.load_ended_at - record.load_started_at
    inside = [v for t, v in samples if warmup_s + rate_window_s <= t <= end]
    return round(sum(inside) / len(inside), 1) if inside else None


def cpu_seconds(prom: Prometheus, services: list[str], start: float, end: float) -> dict[str, float | None]:
    """CPU seconds each service's containers used between two instants (their cgroup counters)."""
    out: dict[str, float | None] = {}
    for service in services:
        expr = f'sum(max by (instance) (lab_cpu_seconds_total{{service="{service}"}}))'
        before, after = prom.by("", expr, start).get(""), prom.by("", expr, end).get("")
        # A restarted container starts its counter again: no figure then.
        out[service] = (
            round(after - before, 3) if before is not None and after is not None and after >= before else None
        )
    return out
