"""A load run's options: what `make load` takes on its command line, and what
compare, sweep, scale and chaos set directly. The parameters the locustfile
reads too (worker, endpoint, users, ...) stay text, as given, and are checked
by lab/load_params.py, shared with the locustfile; the driver's own knobs
default to their env var, else the project's .env, else the lab's default.
Each option is declared once, here, with the help and env var its command
shows (labctl/commands/common.py with_options)."""

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
    users: Annotated[str, Opt("Locust users (default 100)")] = ""
    spawn: Annotated[str, Opt("users started per second (default 100)")] = ""
    iterations: Annotated[str, Opt("exactly this many requests (default: lab/load_params.py's)")] = ""
    duration: Annotated[str, Opt("or send for this long: 60s, 2m")] = ""
    run: Annotated[str, Opt("the ledger's run name (default: generated)")] = ""
    variant: Annotated[str, Opt("upstream: async-blocking|async-threadpool|sync-def|async-native")] = ""
    mode: Annotated[str, Opt("clients: model (default)|prejson")] = ""
    count: Annotated[str, Opt("clients: how many (default 1000)")] = ""
    size: Annotated[str, Opt("payload: bytes (default 1024)")] = ""
    rate: Annotated[
        str, Opt("the open model: requests/s on a fixed schedule for the duration, latency from each scheduled time")
    ] = ""
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

    def raw_params(self) -> dict[str, str]:
        """The parameters as lab/load_params.py takes them."""
        return {
            "scenario": self.scenario,
            "run": self.run,
            "worker": self.worker,
            "endpoint": self.endpoint,
            "users": self.users,
            "spawn_rate": self.spawn,
            "iterations": self.iterations,
            "duration": self.duration,
            "variant": self.variant,
            "mode": self.mode,
            "count": self.count,
            "size": self.size,
            "rate": self.rate,
        }

    def parse(self) -> load_params.LoadParams:
        """The checked parameters; ParamError names the one refused."""
        if self.locust_workers < 1:
            raise ParamError("locust_workers must be at least 1")
        try:
            params = load_params.parse_params(self.raw_params())
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
