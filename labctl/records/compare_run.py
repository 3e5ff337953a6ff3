"""One load run of a comparison as its report shows it (CompareRun), made from the
run's record (records/run.py) by run_row: its RPS over the steady part of the load,
the time its tasks took or would have taken, the CPU per task and per request, its
memory peaks and the machine's speed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from labctl.queues import service_of
from labctl.records.base import AsRead, Figure
from labctl.records.run import MachineSpeed, Scrapes, counter_rate

MiB = 1 << 20


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
        """The figure a FIELDS or RANKED key names (records/compare_figures.py)."""
        figure = getattr(self, key, None)
        return figure if isinstance(figure, int | float) and not isinstance(figure, bool) else None


# -- A run's row from its record ---------------------------------------------------------
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
    worker = resources.get(service) or {}
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
        **{key: tasks.get(key) for key in ("drain_s", "enqueued", "completed", "lost", "duplicates")},
        settled=bool(tasks.get("settled")),
        cpu_ms_per_task=_per(
            cpu_s.get(service),
            done_in_window if done_in_window is not None else tasks.get("completed"),
        ),
        api_cpu_ms_per_request=_per(cpu_s.get("api"), record.get("requests")),
        worker_peak_mb=_mb(worker.get("peak_memory_bytes")),
        api_peak_mb=_mb((resources.get("api") or {}).get("peak_memory_bytes")),
        throttled_periods_pct=worker.get("cpu_throttled_periods_pct"),
        machine_speed=machine_speed(record, warmup_s),
        warnings=list(record.get("warnings") or []),
    )
