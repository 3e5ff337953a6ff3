"""What a comparison runs: its options, the queues it takes, the load run each of its
runs is, and the make line that repeats it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from labctl.config import RESULTS_DIR, knobs
from labctl.errors import ParamError
from labctl.load_run.options import LoadOptions
from labctl.queues import QUEUES

# Each run: 20 s of load, its RPS read after the first 5 (the users' start, new
# connections), then at most 10 s of watching its tasks: the steady part (15 s,
# seven or eight 2 s scrapes of the enqueue counter) reads a run's rate to well
# under a percent, while runs minutes apart differ by several percent on a shared
# machine, so more, shorter runs narrow a figure's interval faster than longer ones
# (docs/compare.md). The queues in a seeded random order in every round; at least
# three rounds; then more rounds only for the queues whose RPS interval is wider than
# +-TARGET_PCT % of their median, up to MAX_ROUNDS or the time budget.
DEFAULT_DURATION_S = 20.0
DEFAULT_WARMUP_S = 5.0
DEFAULT_DRAIN_WATCH_S = 10.0
DEFAULT_ROUNDS = 3
# The runs the t interval on logs (labctl/stats.py) needs to reach the target at
# the noise a run carries on a shared 2-core machine (docs/compare.md, "Why these
# defaults"): a queue not there by then is noisier than the machine, which the
# report says rather than chases.
DEFAULT_MAX_ROUNDS = 8
DEFAULT_TARGET_PCT = 5.0
DEFAULT_BUDGET_MIN = 40.0
# make compare quick=1: a first look in about ten minutes, its intervals as wide as they are.
QUICK: dict[str, Any] = {
    "duration_s": 12.0,
    "warmup_s": 3.0,
    "drain_watch_s": 5.0,
    "rounds": 2,
    "max_rounds": 2,
    "budget_min": 10.0,
}
# The published experiment's setting (records/published.py), for --setting article.
ARTICLE_SETTING = "article"


@dataclass
class CompareOptions:
    workers: str = ""
    duration_s: float = DEFAULT_DURATION_S  # each run's load, unless `requests` is given
    requests: int | None = None  # or exactly this many requests a run
    warmup_s: float = DEFAULT_WARMUP_S  # the start of a run's load its RPS leaves out
    drain_watch_s: float = DEFAULT_DRAIN_WATCH_S  # how long a run watches its tasks before its queue is emptied
    rounds: int = DEFAULT_ROUNDS  # every queue runs this many times
    max_rounds: int = DEFAULT_MAX_ROUNDS  # at most, for a queue whose interval is still wide
    target_pct: float = DEFAULT_TARGET_PCT  # a queue's RPS interval within +-this % of its median: done
    budget_min: float = DEFAULT_BUDGET_MIN  # no round beyond `rounds` starts that would end past this
    seed: int | None = None  # the rounds' order; None: drawn, and recorded
    warmup_run: bool = True  # a short run of every queue before the first counted one
    quick: bool = False
    users: int = 100
    spawn: str = ""
    endpoint: str = "io/simple"
    locust_workers: int = field(default_factory=lambda: knobs().locust_workers)
    drain_timeout: float = field(default_factory=lambda: knobs().load_drain_timeout_s)
    backlog_wait_s: float = 600
    setting: str = ""  # "" (the running stack's limits) or "article"
    results_dir: Path = RESULTS_DIR

    def quickened(self) -> CompareOptions:
        """quick=1: QUICK's run lengths and rounds, where the command line left the defaults."""
        if not self.quick:
            return self
        defaults = CompareOptions(locust_workers=self.locust_workers, drain_timeout=self.drain_timeout)
        changes = {k: v for k, v in QUICK.items() if getattr(self, k) == getattr(defaults, k)}
        quick = replace(self, **changes)
        return replace(quick, max_rounds=max(quick.max_rounds, quick.rounds))


def run_options(options: CompareOptions, queue: str, run: str) -> LoadOptions:
    """`make load worker=Q duration=25s drain_watch=20 ...` (or iterations=N): one run of the comparison."""
    return LoadOptions(
        worker=queue,
        endpoint=options.endpoint,
        users=str(options.users),
        spawn=str(options.spawn or ""),
        run=run,
        iterations=str(options.requests) if options.requests else "",
        duration="" if options.requests else f"{options.duration_s:g}s",
        wait=False,
        drain_watch=options.drain_watch_s,
        locust_workers=options.locust_workers,
        drain_timeout=options.drain_timeout,
        results_dir=Path(options.results_dir),
    )


def check_params(options: CompareOptions, queues: list[str]) -> None:
    """The load's parameters as `make load` checks them, before anything runs (ParamError)."""
    if options.rounds < 1 or (options.requests is not None and options.requests < 1):
        raise ParamError("rounds and requests must be at least 1")
    if options.max_rounds < options.rounds:
        raise ParamError(f"max_rounds ({options.max_rounds}) must be at least rounds ({options.rounds})")
    if options.target_pct <= 0 or options.budget_min <= 0:
        raise ParamError("target_pct and budget_min must be above 0")
    if options.requests is None and options.duration_s <= options.warmup_s + 2:
        raise ParamError(f"duration: more than the warm-up ({options.warmup_s:g} s) and two seconds to measure")
    if options.warmup_s < 0 or options.drain_watch_s < 0:
        raise ParamError("warmup_s and drain_watch must be 0 or more")
    if options.setting not in ("", ARTICLE_SETTING):
        raise ParamError(f"setting: {options.setting!r}: leave it out (the running stack's limits) or `article`")
    if "," in options.endpoint or options.endpoint == "all":
        raise ParamError("endpoint: one task shape (io/simple, io/thread, ...), the same for every queue")
    for queue in queues:
        # A run name as long as the comparison's longest.
        run_options(options, queue, f"compare-00000000-000000-{queue}-r{options.max_rounds}").parse()


def command_line(queues: list[str], options: CompareOptions) -> str:
    """The make line that repeats this comparison."""
    workers = "" if queues == list(QUEUES) else f' workers="{" ".join(queues)}"'
    length = f"requests={options.requests}" if options.requests else f"duration={options.duration_s:g}"
    extra = f" spawn={options.spawn}" if options.spawn else ""
    extra += f" setting={options.setting}" if options.setting else ""
    extra += "" if options.warmup_run else " warmup_run=0"
    rounds = f"rounds={options.rounds} max_rounds={options.max_rounds} budget_min={options.budget_min:g}"
    return (
        f"make compare{workers} {length} {rounds} seed={options.seed} users={options.users} "
        f"endpoint={options.endpoint}{extra}"
    )


def describe(options: CompareOptions) -> str:
    if options.requests:
        return f"{options.requests} requests"
    return f"{options.duration_s:g} s ({options.warmup_s:g} s warm-up)"
