"""How `make load` ends: a run in a few lines a person reads at a glance (its rate,
latency, tasks, drain, memory, throttling, the table's notes such as where a Swarm
ran it, where its record and reports are);
every column of it stays in `make results full=1`. Pure functions of the record."""

from __future__ import annotations

import time

from labctl.records.run import Quantiles, Resources, RunRecord, limit_text
from labctl.render.run_table import notes_of
from labctl.stats import num

MiB = 1 << 20


def _limit(record: RunRecord, service: str) -> str:
    limits = record.limits
    return limit_text(limits.api if service == "api" else limits.workers.get(service))


def _what(record: RunRecord) -> str:
    if record.scenario != "queue":
        return f"scenario={record.scenario}"
    return f"worker={record.worker} endpoint={record.endpoint}"


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def empty_in(projected_s: float, at: float) -> str:
    """When a backlog projected to take `projected_s` from `at` (unix time) should be empty."""
    return f"empty in about {duration_text(projected_s)} (~{time.strftime('%H:%M', time.localtime(at + projected_s))})"


def _target(record: RunRecord) -> str:
    """rate= runs: the rate asked for, and the share of requests that left late."""
    if not record.target_rate:
        return ""
    late = f", {num(record.late_sends_pct)} % sent late" if record.late_sends_pct else ""
    return f" of {num(record.target_rate)} asked (open model, latency from each scheduled time{late})"


def _tasks(record: RunRecord) -> str | None:
    t = record.tasks
    if t is None:
        return None
    pending = t.still_pending()
    lost = "-" if t.lost is None else str(t.lost)
    purged = f"{t.purged} purged, " if t.purged else ""
    after_503 = f" ({t.enqueued_after_error} of them answered 503)" if t.enqueued_after_error else ""
    return (
        f"{t.enqueued} enqueued{after_503}: {t.completed} done, {t.failed} failed, {purged}{pending} pending, "
        f"{lost} lost, {t.duplicates} run twice"
    )


def _secs(x: float | None) -> str:
    """A time as a person reads it: milliseconds under a tenth of a second, else seconds (`-` for none)."""
    if x is None:
        return "-"
    return f"{1000 * x:.0f} ms" if x < 0.1 else f"{num(x)} s"


def _waits(record: RunRecord) -> str | None:
    """Each queue's task wait (enqueue to start) and latency (to done), p50 and p95, over the run's window."""
    parts = []
    for queue, times in sorted((record.task_times or {}).items()):
        wait, latency = times.wait, times.latency or Quantiles()
        if wait:
            parts.append(
                f"{queue} to start p50 {_secs(wait.p50)}, p95 {_secs(wait.p95)}; to done p95 {_secs(latency.p95)}"
            )
    return "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more queues" if len(parts) > 3 else "") or None


def _drain(record: RunRecord) -> str | None:
    t = record.tasks
    if t is None:
        return None
    if t.settled and t.time_to_execute_all_s is not None:
        return f"every task done {num(t.time_to_execute_all_s)} s after the first enqueue ({num(t.drain_s)} s after the load)"
    watch = t.draining
    if watch and record.is_draining():
        left, ended = watch.projected_empty_s, watch.watch_ended_at
        when = f", {empty_in(left, ended)}" if left is not None and ended else ""
        rate = f" at {num(watch.rate_per_s)} tasks/s" if watch.rate_per_s else ""
        return f"still draining{rate}: {watch.backlog} left{when}; make results shows the run once it has settled"
    if t.emptied_by:
        return f"the rest run by {t.emptied_by}"
    if t.purged:
        return f"the rest purged (make purge): {t.purged} task(s) never run"
    return None


def _resources(record: RunRecord) -> tuple[str | None, str | None]:
    resources = record.resources or {}
    peaks, throttled = [], []
    for service in dict.fromkeys([*record.subjects, "api"]):
        r = resources.get(service) or Resources()
        if r.peak_memory_bytes:
            peaks.append(f"{service} {r.peak_memory_bytes / MiB:.0f} MB of {_limit(record, service)}")
        if r.cpu_throttled_periods_pct is not None:
            throttled.append(f"{service} {num(r.cpu_throttled_periods_pct)} %")
    return (", ".join(peaks) or None, ", ".join(throttled) or None)


# The table's notes the summary's own lines already say (the drain, the tasks, the load's length).
SAID_ABOVE = ("draining:", "NOT SETTLED", "duration ")


def _notes(record: RunRecord) -> str:
    """The table's notes (run_table.notes_of) less what the lines above say."""
    purged = f"{record.tasks.purged} purged" if record.tasks and record.tasks.purged else None
    kept = [n for n in notes_of(record).split("; ") if n and not n.startswith(SAID_ABOVE) and n != purged]
    return "; ".join(kept)


def lines(record: RunRecord, record_path: str, grafana_link: str | None = None) -> list[str]:
    """At most 13 lines: what ran, and what came of it."""
    duration = f"{num(record.duration_s)} s" if record.duration_s is not None else "-"
    out = [
        f"run {record.run}: {_what(record)}, {record.users} users, {duration} of load, "
        f"API {_limit(record, 'api')}"
        + (
            f", worker {_limit(record, record.worker)}"
            if record.worker and record.worker in record.limits.workers
            else ""
        ),
        f"  rate     {num(record.rps)} req/s{_target(record)}: {record.requests} requests, {record.failures} failed",
        f"  latency  median {num(record.median_ms)} ms, p95 {num(record.p95_ms)} ms, p99 {num(record.p99_ms)} ms",
    ]
    if tasks := _tasks(record):
        out.append(f"  tasks    {tasks}")
    if waits := _waits(record):
        out.append(f"  wait     {waits}")
    if drain := _drain(record):
        out.append(f"  drain    {drain}")
    peaks, throttled = _resources(record)
    if peaks:
        out.append(f"  memory   peak {peaks}")
    if throttled:
        out.append(f"  CPU      throttled periods: {throttled}")
    if probe := record.probe:
        out.append(
            f"  probe    {probe.ok}/{probe.sent} answered ok "
            f"({100 * (probe.success_rate or 0):.1f} %), worst gap {probe.worst_gap_s} s"
        )
    if notes := _notes(record):
        out.append(f"  notes    {notes}")
    shown = record.warnings if len(record.warnings) <= 2 else record.warnings[:1]  # two lines at most
    out += [f"  WARNING  {warning}" for warning in shown]
    if len(record.warnings) > len(shown):
        out.append(f"  WARNING  and {len(record.warnings) - len(shown)} more: make results full=1")
    reports = [r for r in record.locust_report or () if r.endswith(".html")]
    locust = f"; Locust's report {', '.join(reports)} beside it" if reports else ""
    out.append(f"  record   {record_path} (every column: make results full=1){locust}")
    if grafana_link:
        out.append(f"  Grafana  {grafana_link}")
    return out
