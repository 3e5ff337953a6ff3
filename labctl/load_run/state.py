"""LoadRun: what one load run knows, filled in by the steps of load_run/steps.py
and read by the progress it shows (load_run/follow.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from lab.load_params import LoadParams
from labctl.clients.grafana import Grafana
from labctl.load_run.locust import MasterLog
from labctl.load_run.options import LoadOptions
from labctl.platform.lab import Lab
from labctl.platform.machine_speed import SpeedProbe
from labctl.queues import service_of
from labctl.records.run import Limits
from labctl.records.store import Store
from labctl.render.console import Console


@dataclass
class LoadRun:
    """What one run knows, filled in step by step."""

    options: LoadOptions
    params: LoadParams
    lab: Lab  # the compose project, or a Swarm stack
    ui: Console
    store: Store
    api: str = ""
    limits: Limits = field(default_factory=Limits)
    knobs: dict[str, dict[str, str]] = field(default_factory=dict)
    grafana: Grafana | None = None
    prom_addr: str | None = None
    before: dict[str, Any] = field(default_factory=dict)
    log: MasterLog | None = None
    master: str = ""
    probe_started: bool = False
    platform: dict[str, Any] = field(default_factory=dict)  # Lab.describe()
    containers_since: float = 0.0  # when the Locust containers were started
    # The run's ledger once a second, through the load and the wait for its tasks
    # (task_wait.timeline_row): what the dashboards' task panels are checked against.
    timeline: list[list[float]] = field(default_factory=list)
    # The machine's speed through the load: a limited container's rate follows it.
    speed: SpeedProbe | None = None
    enqueued_scrapes: dict[str, Any] | None = None  # the API's enqueue counter through the load (measure)
    task_times: dict[str, Any] | None = None  # per queue, its tasks' wait and latency quantiles (measure)

    @property
    def queue_run(self) -> bool:
        return cast(str, self.params.scenario) == "queue"

    @property
    def subjects(self) -> list[str]:
        """The services under test: the queues' workers, or the API."""
        if not self.queue_run:
            return ["api"]
        return list(dict.fromkeys(service_of(q) for q in self.params.workers))

    @property
    def watched(self) -> list[str]:
        """The services whose restarts the record counts."""
        return list(dict.fromkeys(["api", *(q for q in self.params.workers if q != "background")]))

    def say(self, message: str) -> None:
        self.ui.say(message)
