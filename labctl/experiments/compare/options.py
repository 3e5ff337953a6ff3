"""What a comparison runs: its options, the queues it takes, the load run each of its
runs is, and the make line that repeats it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labctl.config import RESULTS_DIR, setting
from labctl.errors import ParamError
from labctl.load_run.options import LoadOptions
from labctl.queues import QUEUES

# Each run: 25 s of load, its RPS read after the first 5 (the users' start, new
# connections, the API's first requests to a queue), so that the charts' 10 s
# rates read the steady rate over the last 10; then at most 20 s of watching its
# tasks; twice per queue, so that every figure has a spread and ten queues fit in
# about twenty minutes (docs/compare.md).
DEFAULT_DURATION_S = 25.0
DEFAULT_WARMUP_S = 5.0
DEFAULT_DRAIN_WATCH_S = 20.0
DEFAULT_REPS = 2
# The published experiment's setting (records/published.py), for --setting article.
ARTICLE_SETTING = "article"


@dataclass
class CompareOptions:
    workers: str = ""
    duration_s: float = DEFAULT_DURATION_S  # each run's load, unless `requests` is given
    requests: int | None = None  # or exactly this many requests a run
    warmup_s: float = DEFAULT_WARMUP_S  # the start of a run's load its RPS leaves out
    drain_watch_s: float = DEFAULT_DRAIN_WATCH_S  # how long a run watches its tasks before its queue is emptied
    reps: int = DEFAULT_REPS
    users: int = 100
    spawn: str = ""
    endpoint: str = "io/simple"
    locust_workers: int = field(default_factory=lambda: int(setting("LOCUST_WORKERS", "2")))
    drain_timeout: float = field(default_factory=lambda: float(setting("LOAD_DRAIN_TIMEOUT_S", "1200")))
    backlog_wait_s: float = 600
    setting: str = ""  # "" (the running stack's limits) or "article"
    results_dir: Path = RESULTS_DIR


def parse_workers(text: str) -> list[str]:
    """`"arq saq"` or `arq,saq`; empty or `all`: every queue of lab/queues.py and `background`."""
    names = [w for w in text.replace(",", " ").split() if w]
    if not names or names == ["all"]:
        return list(QUEUES)
    unknown = [w for w in names if w not in QUEUES]
    if unknown:
        raise ParamError(f"workers: unknown {', '.join(unknown)}; one or more of {', '.join(QUEUES)}")
    return list(dict.fromkeys(names))


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
    if options.reps < 1 or (options.requests is not None and options.requests < 1):
        raise ParamError("reps and requests must be at least 1")
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
        run_options(options, queue, f"compare-00000000-000000-{queue}-r{options.reps}").parse()


def command_line(queues: list[str], options: CompareOptions) -> str:
    """The make line that repeats this comparison."""
    workers = "" if queues == list(QUEUES) else f' workers="{" ".join(queues)}"'
    length = f"requests={options.requests}" if options.requests else f"duration={options.duration_s:g}"
    extra = f" spawn={options.spawn}" if options.spawn else ""
    extra += f" setting={options.setting}" if options.setting else ""
    return (
        f"make compare{workers} {length} reps={options.reps} users={options.users} endpoint={options.endpoint}{extra}"
    )


def describe(options: CompareOptions) -> str:
    if options.requests:
        return f"{options.requests} requests"
    return f"{options.duration_s:g} s ({options.warmup_s:g} s warm-up)"
