"""Grafana, when it runs in this compose project: run annotations and run links
(format: grafana/README.md)."""

from __future__ import annotations

from typing import Any

import httpx

from labctl.config import dotenv
from labctl.platform.lab import Lab

# Dashboards a run links to (grafana/dashboards/*.json uids).
RUN_DASHBOARDS = {"queues": "lab-queues", "api": "lab-api", "load": "lab-load"}
LINK_MARGIN_S = (10, 15)  # before the run, after it (the 10 s rates trail its end)


def annotation(
    kind: str,
    run: str,
    worker: str,
    endpoint: str,
    users: int,
    api_limits: str,
    worker_limits: str,
    at: float,
    duration_s: float | None = None,
    tag: str | None = None,
) -> dict[str, Any]:
    """A run's annotation: at its start a point, at its end ("end", with the
    run's duration) the region from `at - duration_s` to `at`."""
    text = (
        f"lab-run run={run} worker={worker} endpoint={endpoint} users={users} "
        f"api_limits={api_limits} worker_limits={worker_limits}"
    )
    body: dict[str, Any] = {"time": int(at * 1000), "tags": ["lab-run", run, tag or worker], "text": text}
    if kind == "end":
        body["text"] += f" duration={round(duration_s or 0)}s"
        body["time"], body["timeEnd"] = round((at - (duration_s or 0)) * 1000), int(at * 1000)
    return body


def grafana_link(addr: str, dashboard: str, start: float, end: float | None, queue: str | None = None) -> str:
    """The URL of a lab dashboard over a run's window, scoped to one queue if given;
    `end` None: up to now, refreshing (a drain that goes on)."""
    host, _, port = addr.rpartition(":")
    host = "127.0.0.1" if host in ("", "0.0.0.0") else host
    to = "now" if end is None else str(int((end + LINK_MARGIN_S[1]) * 1000))
    url = (
        f"http://{host}:{port}/d/{RUN_DASHBOARDS[dashboard]}/?orgId=1"
        f"&from={int((start - LINK_MARGIN_S[0]) * 1000)}&to={to}"
    )
    if queue and dashboard == "queues":
        url += "".join(f"&var-queue={q}" for q in queue.split(","))
    return url


class Grafana:
    """Run annotations and run links, when Grafana runs in this compose project.

    A run is one region annotation: written at its start (so it shows while the
    run goes on), given its end (`timeEnd`) once the run is over."""

    def __init__(self, lab: Lab):
        self.addr = lab.port("grafana", 3000)
        self.password = lab.env.get("GRAFANA_ADMIN_PASSWORD") or dotenv().get("GRAFANA_ADMIN_PASSWORD")
        self.problem: str | None = None
        self._started: dict[str, int] = {}  # run -> id of its annotation
        self.port = lab.env.get("GRAFANA_PORT") or dotenv().get("GRAFANA_PORT") or "3000"
        if not self.addr:
            self.problem = "Grafana is not running in this compose project: no run annotations"
        elif not self.password:
            self.problem = "GRAFANA_ADMIN_PASSWORD is not set (environment or .env): no run annotations"
        else:
            try:
                httpx.get(f"http://{self.addr}/api/health", timeout=3).raise_for_status()
            except httpx.HTTPError as exc:
                self.problem = f"Grafana at {self.addr} does not answer ({exc}): no run annotations"

    def _call(self, method: str, path: str, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        try:
            r = httpx.request(
                method, f"http://{self.addr}{path}", json=body, auth=("admin", self.password or ""), timeout=5
            )
        except httpx.HTTPError as exc:
            return None, f"Grafana annotation not written: {exc}"
        if r.status_code != 200:
            return None, f"Grafana annotation not written: HTTP {r.status_code} {r.text[:200]}"
        return r.json(), None

    def annotate(self, body: dict[str, Any]) -> str | None:
        """Write a run's annotation: the start opens it, the end ("timeEnd" in the
        body) closes it into a region. None when written (or Grafana is absent:
        said once, at the start), else why not."""
        if self.problem:
            return None
        run = body["tags"][1]
        if "timeEnd" not in body:
            reply, problem = self._call("POST", "/api/annotations", body)
            if reply and "id" in reply:
                self._started[run] = reply["id"]
            return problem
        if run in self._started:
            _, problem = self._call("PATCH", f"/api/annotations/{self._started.pop(run)}", body)
            if problem is None:
                return None
        return self._call("POST", "/api/annotations", body)[1]  # no start written: the whole region now

    def run_link(self, dashboard: str, start: float, end: float | None, queue: str | None = None) -> str:
        """The dashboard over the run's window (a little before and after), for one queue if given.
        Without a running Grafana, at the port it would be published on: Prometheus keeps the data."""
        addr = self.addr or f"127.0.0.1:{self.port}"
        link = grafana_link(addr, dashboard, start, end, queue)
        return link if self.addr else f"{link}  (Grafana is not running now; the data stays in Prometheus)"
