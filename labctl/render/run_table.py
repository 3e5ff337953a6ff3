"""The run records as `make results` and `make load` show them: one markdown
row per run, the published article's columns first, then the lab's own."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lab.queues import BROKER_NAMES
from labctl.records.run import RunRecord
from labctl.render.table import markdown_table

Column = tuple[str, Callable[[RunRecord], Any]]


def _joined(values: Iterable[int | None]) -> str | None:
    """The workers' concurrency or replicas: one value, or each they differ by."""
    found = sorted({v for v in values if v is not None})
    return "/".join(str(v) for v in found) if found else None


def _peak_mb(r: RunRecord) -> float | None:
    return round(r.worker_peak_memory_bytes / (1 << 20), 1) if r.worker_peak_memory_bytes else None


def _probe_ok(r: RunRecord) -> float | None:
    rate = r.probe.success_rate if r.probe else None
    return round(100 * rate, 1) if rate is not None else None


# The published article's columns first (RPS, median and p95 latency, time to
# execute all tasks, errors), then the lab's own.
COLUMNS: tuple[Column, ...] = (
    ("worker", lambda r: r.worker),
    ("RPS", lambda r: r.rps),
    ("median ms", lambda r: r.median_ms),
    ("p95 ms", lambda r: r.p95_ms),
    ("all tasks done s", lambda r: r.tasks and r.tasks.time_to_execute_all_s),
    ("errors %", lambda r: r.failures_pct),
    ("scenario", lambda r: r.scenario),
    ("endpoint", lambda r: r.endpoint),
    ("users", lambda r: r.users),
    ("iterations", lambda r: r.iterations),
    ("requests", lambda r: r.requests),
    ("p99 ms", lambda r: r.p99_ms),
    ("load s", lambda r: r.duration_s),
    ("drain s", lambda r: r.tasks and r.tasks.drain_s),
    ("enqueued", lambda r: r.tasks and r.tasks.enqueued),
    ("completed", lambda r: r.tasks and r.tasks.completed),
    ("failed", lambda r: r.tasks and r.tasks.failed),
    ("dup", lambda r: r.tasks and r.tasks.duplicates),
    ("lost", lambda r: r.tasks and r.tasks.lost),
    ("API limits", lambda r: r.limits.api_text),
    ("worker limits", lambda r: r.limits.workers_text),
    ("conc.", lambda r: _joined(w.concurrency for w in r.limits.workers.values())),
    ("repl.", lambda r: _joined(w.replicas for w in r.limits.workers.values())),
    ("peak MB", _peak_mb),
    ("throttled periods %", lambda r: r.cpu_throttled_periods_pct),
    ("probe ok %", _probe_ok),
    ("probe worst gap s", lambda r: r.probe and r.probe.worst_gap_s),
    ("notes", lambda r: notes_of(r)),
    ("run", lambda r: r.run),
)
# `make results` by default: the article's figures, what ran, under which limits, and what went wrong.
SHORT_COLUMNS: tuple[Column, ...] = (
    *COLUMNS[:8],
    ("API / worker limits", lambda r: f"{r.limits.api_text} / {r.limits.workers_text}"),
    *COLUMNS[-2:],  # notes, run
)
TEXT_COLUMNS = {"worker", "scenario", "endpoint", "API limits", "worker limits", "API / worker limits", "notes", "run"}


def arq_knobs(knobs: Mapping[str, Mapping[str, str]]) -> str:
    """arq's settings that set its drain, named where arq is measured; the drain itself is
    measured, never assumed: docs/queues.md, "arq's drain"."""
    arq = knobs.get("arq") or {}
    jobs, delay = arq.get("ARQ_MAX_JOBS", "?"), arq.get("ARQ_POLL_DELAY", "?")
    return f"arq: ARQ_MAX_JOBS={jobs}, ARQ_POLL_DELAY={delay} s (its drain: docs/queues.md)"


def arq_note(record: RunRecord) -> str:
    """The drain rate arq held in this run: while its tasks were watched, or from its first
    enqueue to its last completion; with the settings that set it."""
    tasks = record.tasks
    watch = tasks and tasks.draining
    if watch and watch.rate_per_s is not None:
        rate = f"arq drained {watch.rate_per_s:g} tasks/s while watched"
    elif tasks and tasks.time_to_execute_all_s:
        rate = f"arq ran {tasks.completed / tasks.time_to_execute_all_s:.1f} tasks/s"
    else:
        rate = "arq"
    return rate + arq_knobs(record.knobs).removeprefix("arq")


def where_it_ran(record: RunRecord) -> str:
    """`: api node-2, celery node-4+node-5` on a Swarm of several nodes: the nodes
    of the API and the run's workers (the record's platform.placement)."""
    platform = record.platform
    if platform is None or (platform.nodes or 0) < 2 or not platform.placement:
        return ""
    placement = platform.placement
    worker = record.worker or ""
    services = ["api", *(BROKER_NAMES if worker == "all" else [w for w in worker.split(",") if w])]
    parts = [f"{s} {'+'.join(dict.fromkeys(placement[s]))}" for s in services if placement.get(s)]
    return ": " + ", ".join(parts) if parts else ""


def notes_of(record: RunRecord) -> str:
    """Short notes for the table: the knobs that change a queue's numbers, and problems."""
    notes = []
    platform = record.platform
    if platform and platform.orchestrator == "swarm":
        notes.append(f"swarm, {platform.nodes} node(s)" + where_it_ran(record))
    if "ARQ_POLL_DELAY" in record.knobs.get("arq", {}) and record.worker in ("arq", "all"):
        notes.append(arq_note(record))
    if record.generator.cpu_bound:
        notes.append("generator CPU-bound")
    for service, r in record.restarts.items():
        notes.append(f"{service} restarted" + (" (OOM)" if r.oom_killed else ""))
    tasks = record.tasks
    if tasks and tasks.draining and not tasks.settled:
        watch = tasks.draining
        notes.append(f"draining: {watch.backlog} pending at {watch.rate_per_s} tasks/s when watched")
    elif tasks and not tasks.settled:
        notes.append("NOT SETTLED")
    if tasks and tasks.purged:
        notes.append(f"{tasks.purged} purged")
    if record.duration_target_s:
        notes.append(f"duration {record.duration_target_s:g}s")
    if record.ledger_mismatch():
        notes.append("ledger mismatch")
    return "; ".join(notes)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value).replace("|", "\\|")


def row_cells(record: RunRecord, columns: tuple[Column, ...] = COLUMNS) -> list[str]:
    return [cell(value(record)) for _, value in columns]


def table(records: Iterable[RunRecord], columns: tuple[Column, ...] = COLUMNS, last: int | None = None) -> str:
    """The records as a markdown table, oldest first; `last`: only the newest that many."""
    rows = sorted(records, key=lambda r: (r.time, r.run))
    if last is not None:
        rows = rows[-last:] if last > 0 else []
    return markdown_table([name for name, _ in columns], (row_cells(r, columns) for r in rows), TEXT_COLUMNS)
