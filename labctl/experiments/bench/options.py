"""`make bench`'s options, and the queues it can take: `background` and each queue with a bare counterpart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from lab.queues import BROKERS
from labctl.config import RESULTS_DIR, RESULTS_HELP, Opt
from services.bare.queues import BARE

QUEUES = ("background", *BARE)
LIMIT_KNOBS = {b.name: b.limits_prefix for b in BROKERS if b.name in BARE}


@dataclass
class BenchOptions:
    worker: Annotated[str, Opt("a queue, or all")] = "all"
    requests: Annotated[int, Opt("requests per API and queue")] = 3000
    users: Annotated[int, Opt("concurrent connections")] = 50
    warmup: Annotated[int, Opt("requests sent first, not measured")] = 200
    # Rounds enough that the RPS ratio's interval can tell most queues from the budget (docs/bench.md).
    rounds: Annotated[
        int, Opt("rounds of the bare and the lab API driven at the same time: the RPS ratio's pairs", min=1)
    ] = 8
    drain_s: Annotated[
        float,
        Opt(
            "how long each worker's drain is measured, in windows taken in turns; the lab's queue is emptied regardless"
        ),
    ] = 30
    drain_window_s: Annotated[float, Opt("the shortest drain window (longer if it would hold under 40 tasks)")] = 1.0
    backlog_wait_s: Annotated[
        float, Opt("how long a lab queue's earlier backlog may take to empty before the bench gives up")
    ] = 120
    results_dir: Annotated[Path, Opt(RESULTS_HELP, "--results-dir")] = RESULTS_DIR
