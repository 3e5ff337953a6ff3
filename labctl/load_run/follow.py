"""Following a run's load: the master's log (LAB-* lines) and the run's ledger,
shown as one progress line, until Locust's result."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from lab.load_params import LoadParams
from labctl.clients.api import ledger
from labctl.errors import LabError
from labctl.load_run.state import LoadRun
from labctl.load_run.task_wait import timeline_row

START_TIMEOUT_S = 240  # the master waits up to 120 s for its workers (--expect-workers-max-wait)
STALL_TIMEOUT_S = 180  # no new response for this long: the run is stuck


class Rate:
    """Requests per second over the last few progress lines (Locust's own
    current_rps lags by several seconds)."""

    def __init__(self, span_s: float = 3.0):
        self.span_s = span_s
        self.points: list[tuple[float, int]] = []

    def add(self, elapsed: float, requests: int) -> None:
        self.points.append((elapsed, requests))
        while len(self.points) > 2 and self.points[-1][0] - self.points[1][0] >= self.span_s:
            self.points.pop(0)

    @property
    def rps(self) -> float:
        if len(self.points) < 2 or self.points[-1][0] <= self.points[0][0]:
            return 0.0
        (t0, n0), (t1, n1) = self.points[0], self.points[-1]
        return (n1 - n0) / (t1 - t0)


def load_progress(
    params: LoadParams, p: dict[str, Any], elapsed: float, ledger_totals: dict[str, Any] | None, rps: float
) -> tuple[float, str]:
    """The share of the load done, and the progress line's text."""
    requests, failures = p.get("requests", 0), p.get("failures", 0)
    if params.iterations:
        fraction = requests / params.iterations
        head = f"{requests}/{params.iterations} {100 * requests / params.iterations:3.0f}%"
    else:
        fraction = elapsed / params.duration_s if params.duration_s else 0.0
        head = f"{requests} requests"
    target = f" of {params.rate:g}" if params.rate else ""  # rate=: the schedule's
    line = (
        f"{head}  {elapsed:5.1f}s  {rps:6.1f}{target} req/s  users {p.get('users', 0)}  "
        f"failures {failures} ({100 * failures / requests if requests else 0:.1f}%)"
    )
    if ledger_totals == {}:  # a queue run whose ledger has not answered yet: no count, not zeros
        line += "  | ledger: no answer yet"
    elif ledger_totals is not None:
        # Enqueue counts reach Redis within 50 ms of the broker taking a task (the
        # API adds them up first), and a fast task can settle before: live, the
        # pending count may dip below 0 for a moment. The wait for the tasks waits for it.
        line += (
            f"  | ledger enqueued {ledger_totals.get('enqueued', 0)} completed {ledger_totals.get('completed', 0)}"
            f" pending {max(0, ledger_totals.get('pending', 0))}"
        )
    return fraction, line


class Follow:
    """One pass at a time over the master's new log lines and the ledger."""

    def __init__(self, run: LoadRun, on_start: Callable[[dict[str, Any]], None], on_waiting: Callable[[], None]):
        self.run, self.on_start, self.on_waiting = run, on_start, on_waiting
        self.result: dict[str, Any] | None = None
        self.start_info: dict[str, Any] | None = None
        self.progress: dict[str, Any] = {}
        self.rate = Rate()
        self.began = self.last_change = time.monotonic()
        self.last_requests = -1
        self.totals: dict[str, Any] | None = {} if run.queue_run else None
        self.next_poll = 0.0

    def step(self) -> bool:
        """One pass; True once Locust's result is in."""
        run = self.run
        assert run.log is not None
        for kind, data in run.log.events(wait=0.5):
            self.on_event(kind, data)
        if self.result is not None:
            return True
        now = time.monotonic()
        if run.log.ended:
            raise LabError("the Locust master stopped without a result; its last lines:\n" + "\n".join(run.log.tail))
        if self.start_info is None and now - self.began > START_TIMEOUT_S:
            raise LabError(
                f"Locust did not start within {START_TIMEOUT_S} s; the master's last lines:\n" + "\n".join(run.log.tail)
            )
        if self.progress.get("requests", 0) != self.last_requests:
            self.last_requests, self.last_change = self.progress.get("requests", 0), now
        elif self.start_info is not None and now - self.last_change > STALL_TIMEOUT_S:
            raise LabError(f"no response for {STALL_TIMEOUT_S} s: the run is stuck (make ps; make logs svc=api)")
        if run.queue_run and now >= self.next_poll:
            led = ledger(run.api, run.params.run)
            if led:
                self.totals = led["totals"]
                run.timeline.append(timeline_row(led))
            self.next_poll = now + 1
        if self.start_info is not None and self.progress:
            elapsed = self.progress.get("elapsed", 0)
            run.ui.progress(*load_progress(run.params, self.progress, elapsed, self.totals, self.rate.rps))
        return False

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "WAITING":
            self.on_waiting()
        elif kind == "START":
            self.start_info = data
            self.on_start(data)
        elif kind == "PROGRESS":
            self.progress = data
            self.rate.add(data.get("elapsed", 0), data.get("requests", 0))
        elif kind == "RESULT":
            self.result = data
        elif kind in ("ERROR", "ABORT"):
            raise LabError(f"Locust: {data.get('error') or data.get('reason')}")
