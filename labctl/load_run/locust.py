"""The Locust side of a load run: the containers' environment, the start gate,
the master's log (LAB-* lines) and its report."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from lab import load_params
from labctl.clients.prometheus import Prometheus
from labctl.platform import docker
from labctl.platform.lab import Lab
from labctl.polling import wait_until
from labctl.records.store import Store

LOAD_SERVICES = ("locust-master", "locust-worker")
GATE_FILE = "/tmp/lab-go"  # LOAD_START_GATE inside the master's container
END_GATE_FILE = "/tmp/lab-end"  # LOAD_END_GATE: the master may quit
END_WAIT_S = 30.0  # the longest make load waits for Prometheus to count the run's requests


def load_env(params: load_params.LoadParams, locust_workers: int) -> dict[str, str]:
    """What the Locust containers read (docker-compose.yml, profile `load`): the
    parsed parameters written back, so the containers parse exactly this run."""
    given = {
        "scenario": params.scenario,
        "run": params.run,
        "worker": params.worker_label or "",
        "endpoint": params.endpoint_label if params.scenario == "queue" else "",
        "iterations": str(params.iterations or ""),
        "duration": str(params.duration_s) if params.duration_s else "",
        "variant": params.variant or "",
        "mode": params.mode or "",
        "count": str(params.count or ""),
        "size": "" if params.size is None else str(params.size),
        "rate": f"{params.rate:g}" if params.rate else "",
    }
    return {
        **{load_params.ENV_NAMES[k]: v for k, v in given.items()},
        "LOAD_USERS": str(params.users),
        "LOAD_SPAWN_RATE": f"{params.spawn_rate:g}",
        "LOCUST_WORKERS": str(locust_workers),
        "LOAD_START_GATE": GATE_FILE,
        "LOAD_END_GATE": END_GATE_FILE,
    }


def open_gate(lab: Lab, prom: Prometheus | None, workers: int, since: float, say: Callable[[str], None]) -> None:
    """Let the master start its users: once Prometheus has scraped every Locust
    process (their series are at 0, so rate() sees the whole run), or after 30 s."""
    if prom is not None and not wait_until(lambda: prom.scraped_locust(workers, since), timeout_s=30):
        say("Prometheus has not scraped every Locust process after 30 s: starting anyway")
    lab.exec("locust-master", "touch", GATE_FILE)


def let_master_quit(lab: Lab, prom: Prometheus | None, result: dict[str, Any], since: float) -> bool | None:
    """Let the master quit once Prometheus counts every request the Locust
    processes counted (`since`: they started after it; an earlier run's series
    end before), so the run's last counts outlive the processes that served
    them, or after END_WAIT_S. Whether Prometheus counted them (None: no Prometheus)."""
    counted = None
    if prom is not None:
        sent = result["exported_requests"]
        counted = wait_until(lambda: prom.locust_requests(since) == sent, timeout_s=END_WAIT_S)
    lab.exec("locust-master", "touch", END_GATE_FILE)
    return counted


class MasterLog:
    """The master's log, line by line, from `docker logs --follow` (which ends when
    the container stops); LAB-* lines are parsed."""

    def __init__(self, container: str):
        self.lines: queue.Queue[Any] = queue.Queue()
        self.tail: list[str] = []
        self.ended = False
        self.proc = docker.follow_logs(container)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def events(self, wait: float) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        deadline = time.monotonic() + wait
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return out
            if line is None:
                self.ended = True
                return out
            self.tail = (self.tail + [line])[-40:]
            if line.startswith("LAB-"):
                kind, _, payload = line.partition(" ")
                try:
                    out.append((kind[4:], json.loads(payload)))
                except json.JSONDecodeError:
                    pass

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()


# Locust's own report, as the master writes it when it quits (docker-compose.yml:
# --html, --csv), and the name each gets next to the run's record.
LOCUST_REPORT = {
    "/tmp/locust-report.html": "{run}.html",
    "/tmp/locust_stats.csv": "{run}_stats.csv",
    "/tmp/locust_stats_history.csv": "{run}_stats_history.csv",
    "/tmp/locust_failures.csv": "{run}_failures.csv",
    "/tmp/locust_exceptions.csv": "{run}_exceptions.csv",
}


def copy_locust_report(container_id: str, store: Store, run: str) -> list[str]:
    """Copy Locust's HTML report and CSVs out of the (exited) master container, beside the run's record."""
    saved = []
    for src, name in LOCUST_REPORT.items():
        dest = store.beside(name.format(run=run))
        if docker.copy_out(container_id, src, str(dest)):
            saved.append(dest.name)
    return saved
