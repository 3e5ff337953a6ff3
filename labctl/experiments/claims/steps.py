"""What every benchmark's run shares: its configuration, the counts scaled, the
figures read from a step's output, the accounting (enqueued = completed,
duplicates = executions - distinct, lost = enqueued - distinct), and the run's
status: ok, or failed / timeout with the reason."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, cast

from labctl.records.claims import ClaimsRun

LIMITED = "limited"
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class Config:
    bench: str
    queue: str
    setup: str
    n: int
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    most_reps: int = 0  # at most this many repetitions (0: the run's --reps)

    @property
    def label(self) -> str:
        column = f" {self.params['column']}" if self.params.get("column") else ""
        return f"{self.bench} {self.queue}{column} ({self.setup}, N={self.n})"


def scaled(n: int, scale: float, least: int = 20) -> int:
    return max(least, int(round(n * scale)))


def number(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None


def span(tally: dict[str, Any]) -> float | None:
    a, b = tally.get("first_start"), tally.get("last_end")
    return round(b - a, 4) if a is not None and b is not None else None


def account(
    n: int, tally: dict[str, Any], executions: int | None = None, distinct: int | None = None
) -> dict[str, Any]:
    """enqueued, completed (distinct ids), executions, duplicates (executions - distinct), lost (enqueued - distinct)."""
    executions = tally.get("executions", 0) if executions is None else executions
    distinct = tally.get("distinct", 0) if distinct is None else distinct
    return {
        "enqueued": n,
        "completed": distinct,
        "executions": executions,
        "duplicates": max(0, executions - distinct),
        "lost": n - distinct,
    }


def status_of(
    *steps: dict[str, Any], accounting: dict[str, Any] | None = None, need: dict[str, float | None] | None = None
) -> str:
    for s in steps:
        if s.get("status", "ok") != "ok":
            return cast(str, s["status"])
        bad = [c for c in s.get("exit_codes") or [] if c not in (0, -15, 143, None)]
        if bad and s.get("done_at") is None:
            return f"failed: exit codes {bad}"
    if need:
        missing = [k for k, v in need.items() if v is None]
        if missing:
            return f"failed: no {', '.join(missing)} in the output"
    if accounting and accounting.get("lost"):
        return f"failed: {accounting['lost']} job(s) not completed"
    return "ok"


def run_fields(config: Config, rep: int) -> dict[str, Any]:
    """What names a run in its record: the benchmark, queue, path, setup, repetition, N, parameters."""
    c = config
    return {
        "bench": c.bench,
        "queue": c.queue,
        "path": c.path,
        "setup": c.setup,
        "rep": rep,
        "n": c.n,
        "params": c.params,
    }


def run_record(
    config: Config,
    rep: int,
    steps: list[dict[str, Any]],
    figures: dict[str, Any],
    accounting: dict[str, Any],
    need: dict[str, float | None] | None = None,
) -> ClaimsRun:
    """One run's record from its steps: its status (status_of), its wall time the last step's."""
    last = steps[-1]
    return ClaimsRun(
        **run_fields(config, rep),
        redis={
            "peak_connected_clients": last.get("peak_connected_clients"),
            "rejected_connections": last.get("rejected_connections"),
        },
        output=[o for s in steps for o in s.get("output") or []][-4:],
        figures=figures,
        accounting=accounting,
        status=status_of(*steps, accounting=accounting, need=need),
        wall_s=round(last["ended"] - last["started"], 3) if last.get("ended") and last.get("started") else None,
    )
