"""A load run's options: what `make load` takes on its command line, and what
compare, sweep, scale and chaos set directly. The parameters the locustfile
reads too (worker, endpoint, users, ...) stay text, as given, and are checked
by lab/load_params.py, shared with the locustfile; the driver's own knobs
default to their env var, else the project's .env, else the lab's default."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab import load_params
from labctl.config import RESULTS_DIR, default, knobs
from labctl.errors import ParamError

# The driver's defaults (labctl.config.Knobs), as the commands' options show them;
# an env var or the project's .env overrides them.
LOCUST_WORKERS: int = default("locust_workers")
DRAIN_WATCH_S: float = default("load_drain_watch_s")
DRAIN_TIMEOUT_S: float = default("load_drain_timeout_s")
DRAIN_STALL_S: float = default("load_drain_stall_s")


@dataclass
class LoadOptions:
    scenario: str = ""
    worker: str = ""
    endpoint: str = ""
    users: str = ""
    spawn: str = ""
    iterations: str = ""
    duration: str = ""
    run: str = ""
    variant: str = ""
    mode: str = ""
    count: str = ""
    size: str = ""
    rate: str = ""
    locust_workers: int = field(default_factory=lambda: knobs().locust_workers)
    drain_watch: float = field(default_factory=lambda: knobs().load_drain_watch_s)
    wait: bool = field(default_factory=lambda: knobs().load_wait not in ("", "0"))
    drain_timeout: float = field(default_factory=lambda: knobs().load_drain_timeout_s)
    # Waiting for the tasks ends early when none settled for this long: a task
    # takes seconds at most, so those are not coming.
    drain_stall: float = field(default_factory=lambda: knobs().load_drain_stall_s)
    results_dir: Path = RESULTS_DIR

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
