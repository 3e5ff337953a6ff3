"""Waiting for a load run's tasks after its load: until every task settled, or
for a bounded time (LOAD_DRAIN_WATCH_S), after which the run ends with its
backlog, the rate tasks settled at meanwhile and the time the backlog would take
to empty. The ledger keeps counting; `make results` shows the run settled once it has."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from labctl.clients.api import ledger
from labctl.polling import Progress, wait_until
from labctl.records.run_tasks import backlog_of
from labctl.render.run_summary import empty_in


@dataclass
class TaskWait:
    """How the wait for a run's tasks ended."""

    ledger: dict[str, Any] | None = None
    settled: bool = False  # every task settled
    stalled: bool = False  # nothing settled for drain_stall seconds: those tasks are not coming
    timed_out: bool = False  # wait=1 and drain_timeout ran out
    watch_ended: bool = False  # the bounded watch ended with a backlog, still draining
    # all that is pending is what the fault took (the tasks a killed API held): they are not coming
    written_off: bool = False
    rate_per_s: float | None = None  # tasks settled per second while watched
    samples: list[tuple[float, int]] = field(default_factory=list)  # (time, settled) once a second
    timeline: list[list[float]] = field(default_factory=list)  # timeline_row() once a second

    @property
    def totals(self) -> dict[str, Any]:
        return cast(dict[str, Any], (self.ledger or {}).get("totals", {}))

    @property
    def backlog(self) -> int:
        return backlog_of(self.ledger)

    @property
    def projected_s(self) -> float | None:
        """Seconds until the backlog is empty at the rate seen, None without a rate."""
        return self.backlog / self.rate_per_s if self.rate_per_s else None

    def watch_summary(self) -> dict[str, Any]:
        """What the record keeps of a watch that ended before the drain did."""
        return {
            "backlog": self.backlog,
            "rate_per_s": round(self.rate_per_s, 2) if self.rate_per_s is not None else None,
            "projected_empty_s": round(self.projected_s, 1) if self.projected_s is not None else None,
            "watch_ended_at": self.samples[-1][0] if self.samples else None,
        }


# A run's ledger over time, as the record keeps it (record["timeline"]).
TIMELINE_FIELDS = ("at", "enqueued", "completed", "failed", "pending")


def timeline_row(led: dict[str, Any]) -> list[float]:
    """The ledger's totals: the unix time they were read (the report's own, else now), enqueued,
    completed, failed, pending (backlog_of)."""
    totals = led.get("totals", {})
    return [
        round(led.get("read_at") or time.time(), 3),
        totals.get("enqueued", 0),
        totals.get("completed", 0),
        totals.get("failed", 0),
        backlog_of(led),
    ]


def settled_count(totals: dict[str, Any]) -> int:
    return cast(int, totals.get("completed", 0) + totals.get("failed", 0))


def rate_of(samples: list[tuple[float, int]], span_s: float = 30.0) -> float | None:
    """Tasks settled per second over the last `span_s` seconds of samples."""
    if len(samples) < 2:
        return None
    t1, n1 = samples[-1]
    t0, n0 = next((t, n) for t, n in samples if t >= t1 - span_s)
    if t1 - t0 < 1:
        t0, n0 = samples[0]
    return (n1 - n0) / (t1 - t0) if t1 > t0 else None


def is_settled(led: dict[str, Any] | None, accepted: int, load_end: float) -> bool:
    """Nothing pending in any queue and endpoint, and the ledger has every
    accepted task (or the load ended 10 s ago: an enqueue the broker refused
    after its 202 is never counted). pending < 0 (more settled than enqueued)
    is a ledger defect, not a backlog: waiting would not change it; the record
    flags it."""
    totals = (led or {}).get("totals", {})
    return bool(led) and backlog_of(led) == 0 and (totals.get("enqueued", 0) >= accepted or time.time() - load_end > 10)


def settle_progress(totals: dict[str, Any], since_load_s: float, note: str = "") -> tuple[float, str]:
    """The share of the run's tasks settled, and the progress line's text."""
    done, enq = settled_count(totals), max(1, totals.get("enqueued", 0))
    return done / enq, (
        f"completed {totals.get('completed', 0)}/{totals.get('enqueued', 0)}"
        f"  pending {totals.get('pending', 0)}  {since_load_s:5.1f}s since the load stopped" + note
    )


def watch_tasks(
    api: str,
    run: str,
    *,
    accepted: int,
    load_end: float,
    watch_s: float | None,
    timeout_s: float,
    stall_s: float,
    show: Callable[[float, str], None],
    note: str = "",
    written_off: Callable[[], int | None] | None = None,
) -> TaskWait:
    """Poll the run's ledger once a second until it settles, nothing settles for
    `stall_s`, or `watch_s` (None: wait until settled, at most `timeout_s`) is over.
    `written_off()`: how many of the run's tasks a fault took for good (None: not
    known yet); once a fresh ledger has no more than that pending, every task that
    can still settle has, and the wait is over without waiting out a stall."""
    wait = TaskWait()
    started = time.monotonic()
    progress = Progress(stall_s)

    def over() -> bool:
        if fresh := ledger(api, run):
            wait.ledger = fresh
            wait.timeline.append(timeline_row(fresh))
        gone = written_off() if written_off is not None else None
        now, count = time.time(), settled_count(wait.totals)
        wait.samples.append((now, count))
        wait.rate_per_s = rate_of(wait.samples)
        progress.see(count)
        elapsed = time.monotonic() - started
        if is_settled(wait.ledger, accepted, load_end):
            wait.settled = True
        elif fresh and gone is not None and backlog_of(fresh) <= gone:
            wait.written_off = True
        elif watch_s is not None and elapsed >= watch_s:
            wait.watch_ended = True
        elif watch_s is None and elapsed >= timeout_s:
            wait.timed_out = True
        elif progress.stalled:
            wait.stalled = True
        else:
            show(*settle_progress(wait.totals, now - load_end, note))
            return False
        return True

    wait_until(over, timeout_s=None, every_s=1)
    return wait


def outcome_lines(wait: TaskWait, *, run: str, watch_s: float | None, timeout_s: float, stall_s: float) -> list[str]:
    """What the run says about its tasks once the wait is over."""
    t = wait.totals
    if wait.settled:
        return [
            f"all tasks settled: {t.get('completed')} completed, {t.get('failed')} failed, "
            f"{t.get('duplicates')} duplicates"
        ]
    if wait.written_off:
        return [f"the rest went with the fault: {t.get('pending')} task(s) the killed process held (recorded as lost)"]
    if wait.stalled:
        return [
            f"DRAIN STALLED: nothing settled for {stall_s:.0f} s, {t.get('pending')} task(s) still pending "
            "(recorded as lost)"
        ]
    if wait.timed_out:
        return [f"DRAIN TIMEOUT after {timeout_s:.0f} s: {t.get('pending')} task(s) still pending (recorded as lost)"]
    rate, projected = wait.rate_per_s, wait.projected_s
    if rate and projected is not None:
        projection = f"draining at {rate:.1f} tasks/s: {empty_in(projected, time.time())}"
    else:
        projection = "no task settled while watched: no projection"
    return [
        f"the drain goes on: {wait.backlog} task(s) pending after {watch_s:.0f} s of watching, {projection}.",
        f"The ledger keeps counting: `make results` shows this run's 'all tasks done s' once it has settled "
        f"(`make load ... wait=1` waits for it; `make reset run={run}` forgets it).",
    ]
