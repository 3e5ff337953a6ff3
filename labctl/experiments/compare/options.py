"""What a comparison runs: its options, the queues it takes, the load run each of its
runs is, and the make line that repeats it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from labctl.config import RESULTS_DIR, RESULTS_HELP, Opt, knobs
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
    workers: Annotated[str, Opt(f"queues, space- or comma-separated (default: all: {' '.join(QUEUES)})")] = ""
    duration_s: Annotated[float, Opt("seconds of load per run", "--duration")] = DEFAULT_DURATION_S
    requests: Annotated[int | None, Opt("or exactly this many requests per run")] = None
    warmup_s: Annotated[float, Opt("the start of each run's load its RPS leaves out, seconds")] = DEFAULT_WARMUP_S
    drain_watch_s: Annotated[
        float,
        Opt("seconds a run watches its tasks before a one-off worker runs the rest of a slow backlog", "--drain-watch"),
    ] = DEFAULT_DRAIN_WATCH_S
    rounds: Annotated[
        int, Opt("rounds every queue runs in (each round in a new random order)", "--rounds", "--reps")
    ] = DEFAULT_ROUNDS
    max_rounds: Annotated[int, Opt("at most this many rounds for a queue whose RPS interval is still wide")] = (
        DEFAULT_MAX_ROUNDS
    )
    target_pct: Annotated[float, Opt("a queue's RPS interval within +- this % of its median needs no more rounds")] = (
        DEFAULT_TARGET_PCT
    )
    budget_min: Annotated[float, Opt("minutes: no round beyond --rounds starts that would end past this")] = (
        DEFAULT_BUDGET_MIN
    )
    seed: Annotated[int | None, Opt("the rounds' order (default: drawn, and recorded)")] = None
    warmup_run: Annotated[bool, Opt("a short, uncounted run of every queue first", "--warmup-run/--no-warmup-run")] = (
        True
    )
    quick: Annotated[bool, Opt("a first look: shorter runs, two rounds, intervals as wide as they are")] = False
    users: Annotated[int, Opt("Locust users (the article's 100)")] = 100
    spawn: Annotated[float | None, Opt("users started per second (default: make load's)")] = None
    endpoint: Annotated[str, Opt("the task shape, one for every queue")] = "io/simple"
    locust_workers: Annotated[int, Opt("Locust worker containers", envvar="LOCUST_WORKERS", min=1)] = field(
        default_factory=lambda: knobs().locust_workers
    )
    drain_timeout: Annotated[float, Opt("seconds a run's backlog may take to empty", envvar="LOAD_DRAIN_TIMEOUT_S")] = (
        field(default_factory=lambda: knobs().load_drain_timeout_s)
    )
    backlog_wait_s: Annotated[float, Opt("how long to wait for every queue to be empty before a run")] = 600
    setting: Annotated[
        str, Opt("article: the published experiment's two settings in one go (the compose lab restarted)")
    ] = ""
    results_dir: Annotated[Path, Opt(RESULTS_HELP, "--results-dir")] = RESULTS_DIR

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
        users=options.users,
        spawn=options.spawn,
        run=run,
        iterations=options.requests,
        duration=None if options.requests else options.duration_s,
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
    extra = f" spawn={options.spawn:g}" if options.spawn else ""
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
