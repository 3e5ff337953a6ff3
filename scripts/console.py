"""What a run shows on the terminal: one live progress line (a line every 5 s
when the output is not a terminal), and the rate of the last few seconds."""

from __future__ import annotations

import sys
import time


class Display:
    """One live line on a terminal; a line every 5 s otherwise (logs, tests)."""

    def __init__(self, stream=sys.stdout):
        self.stream = stream
        self.tty = stream.isatty()
        self.last = 0.0
        self.open = False

    def show(self, line: str, force: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
            self.open = True
        elif force or time.monotonic() - self.last >= 5:
            print(line, file=self.stream, flush=True)
            self.last = time.monotonic()

    def say(self, message: str) -> None:
        if self.open:
            self.stream.write("\r\033[K")
            self.open = False
        print(message, file=self.stream, flush=True)

    def end_line(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False


def bar(fraction: float, width: int = 24) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


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


def progress_line(params, p: dict, elapsed: float, ledger_totals: dict | None, rps: float) -> str:
    requests, failures = p.get("requests", 0), p.get("failures", 0)
    if params.iterations:
        head = f"{bar(requests / params.iterations)} {requests}/{params.iterations} {100 * requests / params.iterations:3.0f}%"
    else:
        head = f"{bar(elapsed / params.duration_s)} {requests} requests"
    line = (
        f"{head}  {elapsed:5.1f}s  {rps:6.1f} req/s  users {p.get('users', 0)}  "
        f"failures {failures} ({100 * failures / requests if requests else 0:.1f}%)"
    )
    if ledger_totals is not None:
        # Enqueue counts reach Redis within 50 ms of the broker taking a task (the
        # API adds them up first), and a fast task can settle before: live, the
        # pending count may dip below 0 for a moment. The drain check waits for it.
        line += (
            f"  | ledger enqueued {ledger_totals.get('enqueued', 0)} completed {ledger_totals.get('completed', 0)}"
            f" pending {max(0, ledger_totals.get('pending', 0))}"
        )
    return line
