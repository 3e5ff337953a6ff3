"""A load run's options: what `make load` takes on its command line, and what
compare, sweep, scale, chaos and capacity set directly. Numbers are parsed
once, at the command line (a duration's `2m` too), and set as numbers by the
experiments; lab/load_params.py, shared with the locustfile, checks them all
and fills in the defaults. The driver's own knobs default to their env var,
else the project's .env, else the lab's default. Each option is declared once,
here, with the help and env var its command shows (labctl/commands/common.py
with_options)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from lab import load_params
from labctl.config import RESULTS_DIR, RESULTS_HELP, Opt, knobs
from labctl.errors import ParamError


@dataclass
class LoadOptions:
    """make load's options, and a run's that compare, sweep, scale, chaos and capacity set."""

    scenario: Annotated[str, Opt("queue (default), upstream, clients, payload")] = ""
    worker: Annotated[str, Opt("queue runs: a queue of lab/queues.py, background, all, or a,b")] = ""
    endpoint: Annotated[
        str, Opt("queue runs: io/simple (default)|io/sync|io/thread|cpu/simple|cpu/process|all|a,b")
    ] = ""
    users: Annotated[int | None, Opt("Locust users (default 100)")] = None
    spawn: Annotated[float | None, Opt("users started per second (default 100)")] = None
    iterations: Annotated[int | None, Opt("exactly this many requests (default: lab/load_params.py's)")] = None
    duration: Annotated[
        float | None, Opt("or send for this long: 60s, 2m (seconds)", parser=load_params.parse_duration)
    ] = None
    run: Annotated[str, Opt("the ledger's run name (default: generated)")] = ""
    variant: Annotated[str, Opt("upstream: async-blocking|async-threadpool|sync-def|async-native")] = ""
    mode: Annotated[str, Opt("clients: model (default)|prejson")] = ""
    count: Annotated[int | None, Opt("clients: how many (default 1000)")] = None
    size: Annotated[int | None, Opt("payload: bytes (default 1024)")] = None
    rate: Annotated[
        float | None,
        Opt("the open model: requests/s on a fixed schedule for the duration, latency from each scheduled time"),
    ] = None
    locust_workers: Annotated[int, Opt("Locust worker processes (containers)", envvar="LOCUST_WORKERS", min=1)] = field(
        default_factory=lambda: knobs().locust_workers
    )
    drain_watch: Annotated[
        float,
        Opt("seconds to watch the tasks after the load before ending with the backlog", envvar="LOAD_DRAIN_WATCH_S"),
    ] = field(default_factory=lambda: knobs().load_drain_watch_s)
    wait: Annotated[
        bool, Opt("wait until every task settled (at most --drain-timeout)", "--wait", envvar="LOAD_WAIT")
    ] = field(default_factory=lambda: knobs().load_wait not in ("", "0"))
    drain_timeout: Annotated[
        float, Opt("with --wait: seconds to wait for pending tasks after the load", envvar="LOAD_DRAIN_TIMEOUT_S")
    ] = field(default_factory=lambda: knobs().load_drain_timeout_s)
    # Waiting for the tasks ends early when none settled for this long: a task
    # takes seconds at most, so those are not coming.
    drain_stall: Annotated[
        float, Opt("...or until no task settled for this long (seconds)", envvar="LOAD_DRAIN_STALL_S")
    ] = field(default_factory=lambda: knobs().load_drain_stall_s)
    results_dir: Annotated[Path, Opt(RESULTS_HELP, "--results-dir")] = RESULTS_DIR

    def parse(self) -> load_params.LoadParams:
        """The checked parameters; ParamError names the one refused."""
        if self.locust_workers < 1:
            raise ParamError("locust_workers must be at least 1")
        # lab/load_params.py's keys: those the Locust containers read too (ENV_NAMES), and Locust's own two
        raw = {**{k: getattr(self, k) for k in load_params.ENV_NAMES}, "users": self.users, "spawn_rate": self.spawn}
        try:
            params = load_params.parse_params(raw)
        except load_params.ParamError as exc:
            raise ParamError(str(exc)) from None
        most = load_params.MAX_RATE_PER_PROCESS * self.locust_workers
        if params.rate is not None and params.rate > most:
            raise ParamError(
                f"rate={params.rate:g}: more than {self.locust_workers} Locust worker(s) are asked to send "
                f"(at most {load_params.MAX_RATE_PER_PROCESS:g} requests/s each): give locust_workers= more"
            )
        return params

    def but(self, **changes: Any) -> LoadOptions:
        """A copy with some options changed (one run of a sweep, a comparison, a scale)."""
        return replace(self, **changes)
