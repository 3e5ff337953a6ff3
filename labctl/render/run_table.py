"""The run records as `make results` and `make load` show them: one markdown
row per run, the published article's columns first, then the lab's own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lab.queues import BROKER_NAMES
from labctl.platform.containers import limit_text, workers_limit_text
from labctl.records.run import RunRecord
from labctl.render.table import markdown_table

# The published article's columns first (RPS, median and p95 latency, time to
# execute all tasks, errors), then the lab's own.
COLUMNS = (
    ("worker", "worker"),
    ("RPS", "rps"),
    ("median ms", "median_ms"),
    ("p95 ms", "p95_ms"),
    ("all tasks done s", "tasks.time_to_execute_all_s"),
    ("errors %", "failures_pct"),
    ("scenario", "scenario"),
    ("endpoint", "endpoint"),
    ("users", "users"),
    ("iterations", "iterations"),
    ("requests", "requests"),
    ("p99 ms", "p99_ms"),
    ("load s", "duration_s"),
    ("drain s", "tasks.drain_s"),
    ("enqueued", "tasks.enqueued"),
    ("completed", "tasks.completed"),
    ("failed", "tasks.failed"),
    ("dup", "tasks.duplicates"),
    ("lost", "tasks.lost"),
    ("API limits", "_api_limits"),
    ("worker limits", "_worker_limits"),
    ("conc.", "_concurrency"),
    ("repl.", "_replicas"),
    ("peak MB", "_peak_mb"),
    ("throttled periods %", "cpu_throttled_periods_pct"),
    ("probe ok %", "_probe_ok"),
    ("probe worst gap s", "probe.worst_gap_s"),
    ("notes", "_notes"),
    ("run", "run"),
)
# `make results` by default: the article's figures, what ran, under which limits, and what went wrong.
SHORT_COLUMNS = (
    *COLUMNS[:8],
    ("API / worker limits", "_limits"),
    ("notes", "_notes"),
    ("run", "run"),
)
TEXT_COLUMNS = {"worker", "scenario", "endpoint", "API limits", "worker limits", "API / worker limits", "notes", "run"}


def _data(record: RunRecord | Mapping[str, Any]) -> Mapping[str, Any]:
    return record.as_json() if isinstance(record, RunRecord) else record


def _get(record: Mapping[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _derived(record: Mapping[str, Any], key: str) -> Any:
    workers = (record.get("limits") or {}).get("workers") or {}
    if key == "_api_limits":
        return limit_text((record.get("limits") or {}).get("api"))
    if key == "_worker_limits":
        return workers_limit_text(workers) if workers else "-"
    if key == "_limits":  # the short table's one column for both
        return f"{_derived(record, '_api_limits')} / {_derived(record, '_worker_limits')}"
    if key == "_concurrency":
        values = {w.get("concurrency") for w in workers.values() if w.get("concurrency") is not None}
        return "/".join(str(v) for v in sorted(values)) if values else None
    if key == "_replicas":
        values = {w.get("replicas") for w in workers.values()}
        return "/".join(str(v) for v in sorted(v for v in values if v is not None)) if values else None
    if key == "_peak_mb":
        peak = record.get("worker_peak_memory_bytes")
        return round(peak / (1 << 20), 1) if peak else None
    if key == "_probe_ok":
        rate = _get(record, "probe.success_rate")
        return round(100 * rate, 1) if rate is not None else None
    if key == "_notes":
        return notes_of(record)
    raise KeyError(key)


def arq_knobs(knobs: Mapping[str, Any]) -> str:
    """arq's settings that set its drain, named where arq is measured; the drain itself is
    measured, never assumed: docs/queues.md, "arq's drain"."""
    arq = knobs.get("arq") or {}
    jobs, delay = arq.get("ARQ_MAX_JOBS", "?"), arq.get("ARQ_POLL_DELAY", "?")
    return f"arq: ARQ_MAX_JOBS={jobs}, ARQ_POLL_DELAY={delay} s (its drain: docs/queues.md)"


def arq_note(record: Mapping[str, Any]) -> str:
    """The drain rate arq held in this run: while its tasks were watched, or from its first
    enqueue to its last completion; with the settings that set it."""
    tasks = record.get("tasks") or {}
    watch = tasks.get("draining") or {}
    if watch.get("rate_per_s") is not None:
        rate = f"arq drained {watch['rate_per_s']:g} tasks/s while watched"
    elif tasks.get("time_to_execute_all_s"):
        rate = f"arq ran {tasks.get('completed', 0) / tasks['time_to_execute_all_s']:.1f} tasks/s"
    else:
        rate = "arq"
    return rate + arq_knobs(record.get("knobs") or {}).removeprefix("arq")


def where_it_ran(record: Mapping[str, Any]) -> str:
    """`: api node-2, celery node-4+node-5` on a Swarm of several nodes: the nodes
    of the API and the run's workers (the record's platform.placement)."""
    platform = record.get("platform") or {}
    placement = platform.get("placement") or {}
    if (platform.get("nodes") or 0) < 2 or not placement:
        return ""
    worker = record.get("worker")
    services = ["api", *(BROKER_NAMES if worker == "all" else [w for w in str(worker or "").split(",") if w])]
    parts = [f"{s} {'+'.join(dict.fromkeys(placement[s]))}" for s in services if placement.get(s)]
    return ": " + ", ".join(parts) if parts else ""


def notes_of(record: RunRecord | Mapping[str, Any]) -> str:
    """Short notes for the table: the knobs that change a queue's numbers, and problems."""
    record = _data(record)
    notes = []
    platform = record.get("platform") or {}
    if platform.get("orchestrator") == "swarm":
        notes.append(f"swarm, {platform.get('nodes')} node(s)" + where_it_ran(record))
    knobs = record.get("knobs") or {}
    if "ARQ_POLL_DELAY" in knobs.get("arq", {}) and record.get("worker") in ("arq", "all"):
        notes.append(arq_note(record))
    if (record.get("generator") or {}).get("cpu_bound"):
        notes.append("generator CPU-bound")
    for service, r in (record.get("restarts") or {}).items():
        notes.append(f"{service} restarted" + (" (OOM)" if r.get("oom_killed") else ""))
    tasks = record.get("tasks")
    if tasks and tasks.get("draining") and not tasks.get("settled"):
        watch = tasks["draining"]
        notes.append(f"draining: {watch.get('backlog')} pending at {watch.get('rate_per_s')} tasks/s when watched")
    elif tasks and not tasks.get("settled"):
        notes.append("NOT SETTLED")
    if tasks and tasks.get("purged"):
        notes.append(f"{tasks['purged']} purged")
    if record.get("duration_target_s"):
        notes.append(f"duration {record['duration_target_s']:g}s")
    if any("!=" in w or "ledger inconsistent" in w for w in record.get("warnings", [])):
        notes.append("ledger mismatch")
    return "; ".join(notes)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value).replace("|", "\\|")


def row_cells(record: RunRecord | Mapping[str, Any], columns: tuple[Any, ...] = COLUMNS) -> list[str]:
    data = _data(record)
    return [cell(_derived(data, key) if key.startswith("_") else _get(data, key)) for _, key in columns]


def table(
    records: Iterable[RunRecord | Mapping[str, Any]], columns: tuple[Any, ...] = COLUMNS, last: int | None = None
) -> str:
    """The records as a markdown table, oldest first; `last`: only the newest that many."""
    rows = sorted((_data(r) for r in records), key=lambda r: (r.get("time") or "", r.get("run") or ""))
    if last is not None:
        rows = rows[-last:] if last > 0 else []
    return markdown_table([name for name, _ in columns], (row_cells(r, columns) for r in rows), TEXT_COLUMNS)
