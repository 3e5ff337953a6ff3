"""A queue run's tasks as its ledger counted them (GET /api/v1/runs/{run}): the
counts per queue and endpoint, the backlog, the time to execute them all and the
drain, and the watch of a drain that outlasted the run's wait. The `tasks` part
of a load run's record (records/run.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

from labctl.records.base import AsRead, Record


class DrainWatch(Record):
    """The watch of a run's tasks that ended before its queue was empty: the backlog
    left, the rate it drained at while watched, and when it should be empty."""

    backlog: int | None = None
    rate_per_s: float | None = None
    projected_empty_s: float | None = None
    watch_ended_at: float | None = None


class QueueCounts(AsRead):
    """One queue and endpoint's counts in the ledger."""

    enqueued: int | None = None
    completed: int | None = None
    failed: int | None = None
    duplicates: int | None = None
    purged: int | None = None
    pending: int | None = None
    unfinished: int | None = None


class TaskFigures(Record):
    """The ledger's part of a queue run."""

    enqueued: int = 0
    # Of `enqueued`, tasks whose request got a 503 (a timeout cut off the broker's
    # reply) that the broker had all the same: they ran, and count as enqueued.
    enqueued_after_error: int = 0
    completed: int = 0
    failed: int = 0
    duplicates: int = 0
    purged: int = 0  # still pending when `make purge` emptied the queue: never run, never lost
    lost: int | None = None  # still pending when the wait ended; None while the run drains
    unfinished: int | None = None  # executions that began and never ended; None in ledgers before `started`
    settled: bool = False
    draining: DrainWatch | None = None  # the watch's backlog, rate and projection when it ended first
    first_enqueued_at: float | None = None
    last_settled_at: float | None = None
    time_to_execute_all_s: float | None = None
    drain_s: float | None = None
    per_queue: dict[str, dict[str, QueueCounts]] = {}  # queue -> endpoint -> its counts
    # Who ran the rest of a backlog the run's queue drained too slowly to wait for
    # (make compare's one-off worker): its counts are whole, its times not the queue's.
    emptied_by: str | None = None

    def still_pending(self) -> int:
        """Enqueued and neither settled nor purged; below 0, more settled than enqueued."""
        return self.enqueued - self.completed - self.failed - self.purged

    def differs_from(self, accepted: int | None) -> bool:
        """Its enqueued, less those answered 503 that ran all the same, are not
        the `accepted` requests answered 202."""
        return accepted is not None and self.enqueued - self.enqueued_after_error != accepted


def rounded(x: Any, digits: int = 2) -> Any:
    """`x` rounded to `digits`; None for None or NaN."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, digits)


def backlog_of(led: Mapping[str, Any] | None) -> int:
    """Tasks pending, counted queue by queue and endpoint by endpoint: a cell
    with more settled than enqueued (pending < 0) must not hide another's
    backlog in the totals."""
    cells = [c for endpoints in (led or {}).get("queues", {}).values() for c in endpoints.values()]
    if not cells:
        return max(0, cast(int, (led or {}).get("totals", {}).get("pending", 0)))
    return sum(max(0, c.get("pending", 0)) for c in cells)


def task_figures(
    ledger: Mapping[str, Any], load_ended_at: float | None, settled: bool, draining: Mapping[str, Any] | None = None
) -> TaskFigures:
    """The ledger part of a queue run: counts, time to execute all tasks (first
    enqueue to last completion) and the drain after the load stopped. `draining`:
    the watch ended with a backlog, which is not lost: the run settles later
    (RunRecord.settle_later)."""
    totals = ledger.get("totals", {})
    first, last = ledger.get("first_enqueued_at"), ledger.get("last_settled_at")
    done = settled and backlog_of(ledger) == 0
    # A purged run settled without running every task: it has no time to execute them all.
    ran_all = done and not totals.get("purged")
    return TaskFigures(
        enqueued=totals.get("enqueued", 0),
        enqueued_after_error=ledger.get("enqueued_after_error", 0),
        completed=totals.get("completed", 0),
        failed=totals.get("failed", 0),
        duplicates=totals.get("duplicates", 0),
        purged=totals.get("purged", 0),
        lost=None if draining is not None else backlog_of(ledger),
        unfinished=totals.get("unfinished") if "started" in totals else None,
        settled=done,
        draining=DrainWatch.model_validate(draining) if draining is not None else None,
        first_enqueued_at=first,
        last_settled_at=last,
        time_to_execute_all_s=rounded(last - first) if ran_all and first and last else None,
        drain_s=rounded(max(0.0, last - load_ended_at)) if ran_all and last and load_ended_at else None,
        per_queue={
            q: {
                e: QueueCounts.model_validate({k: row.get(k) for k in QueueCounts.model_fields})
                for e, row in cells.items()
            }
            for q, cells in ledger.get("queues", {}).items()
        },
    )
