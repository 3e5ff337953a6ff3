"""make chaos's section of a run record: the fault, when it came and went, and
what the ledger lost, duplicated and re-ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labctl.records.base import Record


class ChaosSection(Record):
    fault: str | None = None
    service: str | None = None
    at_s: float | None = None
    hold_s: float | None = None
    injected_at: float | None = None
    restored_at: float | None = None
    restarted_at: float | None = None
    oom_limit_bytes: int | None = None
    recovered_s: float | None = None  # from the fault until tasks completed again
    last_settled_after_fault_s: float | None = None
    enqueued: int | None = None
    completed: int | None = None
    failed: int | None = None
    duplicates: int | None = None
    lost: int | None = None  # None while the run drains: `make results` fills it in
    # background: the run's tasks the API held (counted, not settled) once it was down: the most it can lose
    held: int | None = None
    interrupted: int | None = None
    restart_count: int | None = None
    oom_killed: bool | None = None
    running: bool | None = None
    oom_events: int | None = None
    # kill-node: the node, what ran there, and seconds from the fault until the Swarm
    # saw it down, ran the queue's replicas again without it, and had it back
    node: str | None = None
    node_services: list[str] = []
    node_down_s: float | None = None
    rescheduled_s: float | None = None
    node_ready_s: float | None = None
    errors: list[str] = []


def chaos_totals(ledger: Mapping[str, Any], injected_at: float | None) -> dict[str, Any]:
    """The ledger's part of a chaos run's section."""
    totals = ledger.get("totals", {})
    last = ledger.get("last_settled_at")
    return {
        # The last task settled this long after the fault: a dead worker's
        # tasks come back only when their lease runs out (TASK_TIMEOUT_S).
        "last_settled_after_fault_s": round(last - injected_at, 1) if injected_at and last else None,
        "enqueued": totals.get("enqueued"),
        "completed": totals.get("completed"),
        "failed": totals.get("failed"),
        "duplicates": totals.get("duplicates"),
        "lost": totals.get("pending"),
        # executions cut off by the fault (started, never ended); re-run unless lost
        "interrupted": totals.get("unfinished"),
    }
