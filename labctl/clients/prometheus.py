"""Prometheus as the experiments ask it: instant and range queries, the load jobs' targets,
and a run's resource figures (peak memory, CPU, throttling) from the cgroup
metrics every lab process exports."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

import httpx

from labctl.errors import LabError
from labctl.platform.lab import Lab
from labctl.polling import wait_until


class Prometheus:
    def __init__(self, addr: str):
        self.url = f"http://{addr}"

    def _result(self, api: str, expr: str, params: dict[str, str], timeout: float) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}/api/v1/{api}", params={"query": expr, **params}, timeout=timeout).json()
        if body.get("status") != "success":
            raise LabError(f"Prometheus rejected {expr!r}: {body.get('error')}")
        return cast(list[dict[str, Any]], body["data"]["result"])

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        return self._result("query", expr, {"time": f"{at:.3f}"} if at else {}, 15)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return self._result(
            "query_range", expr, {"start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}, 30
        )

    def counter_samples(self, selector: str, start: float, end: float) -> list[list[float]]:
        """A counter's raw samples from `start` to `end` as Prometheus scraped them:
        [scrape time, sum over the selected series], at the scrape times every series
        has (one target's series share them). None of one target's: [] (several
        targets are scraped at different times, so their sums would mix)."""
        at = min(end, time.time())
        rows = self.query(f"{selector}[{max(2, math.ceil(at - start))}s]", at)
        if len({row["metric"].get("instance") for row in rows}) != 1:
            return []
        series = [{float(t): float(v) for t, v in row["values"]} for row in rows]
        times = sorted(set.intersection(*(set(s) for s in series)))
        return [[t, sum(s[t] for s in series)] for t in times if t >= start]

    def queue_depths(self) -> dict[str, float]:
        """Tasks waiting in each queue (lab_queue_depth, the queue monitor's), queues holding none left out."""
        return {q: d for q, d in self.by("queue", "max by (queue) (lab_queue_depth)").items() if d > 0}

    def by(self, label: str, expr: str, at: float | None = None) -> dict[str, float]:
        out = {}
        for row in self.query(expr, at):
            value = float(row["value"][1])
            if not math.isnan(value):
                out[row["metric"].get(label, "")] = value
        return out

    def ensure_load_jobs(self, lab: Lab, say: Callable[[str], None]) -> None:
        """A Prometheus started before prometheus.yml had the load jobs reads it
        again on SIGHUP (it reads its config only at start)."""
        try:
            config = httpx.get(f"{self.url}/api/v1/status/config", timeout=10).json()["data"]["yaml"]
        except (httpx.HTTPError, KeyError, ValueError):
            return
        if "job_name: locust-master" not in config and lab.reload_prometheus():
            say("Prometheus ran an older prometheus.yml without the load jobs: reloaded it (SIGHUP)")

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets ([] when Prometheus does not answer)."""
        try:
            reply = httpx.get(f"{self.url}/api/v1/targets", params={"state": "active"}, timeout=10).json()
            return cast(list[dict[str, Any]], reply["data"]["activeTargets"])
        except (httpx.HTTPError, KeyError, ValueError):
            return []

    def fresh_jobs(self, since: float) -> list[str]:
        """The job of every target that is up and was scraped after `since`, once per target."""
        return [
            t["labels"].get("job")
            for t in self.targets()
            if t.get("health") == "up" and rfc3339(t.get("lastScrape", "")) > since
        ]

    def scraped_locust(self, workers: int, since: float) -> bool:
        """The Locust master and `workers` workers were each scraped after `since`."""
        fresh = self.fresh_jobs(since)
        return fresh.count("locust-master") >= 1 and fresh.count("locust-worker") >= workers

    def locust_requests(self, since: float) -> float | None:
        """The requests the Locust processes started after `since` counted, as Prometheus last scraped them."""
        window = f"{int(time.time() - since) + 1}s"
        try:
            return self.by("", f"sum(max_over_time(locust_requests_total[{window}]))").get("")
        except (httpx.HTTPError, LabError, ValueError):
            return None

    def fresh_targets(self, job: str, since: float) -> tuple[int, int]:
        """(targets of the job, those up and scraped after `since`): one target per replica."""
        total = sum(t["labels"].get("job") == job for t in self.targets())
        return total, self.fresh_jobs(since).count(job)

    def wait_for_scrape(self, services: list[str], after: float, timeout: float = 15) -> bool:
        """True once every service has a sample newer than `after`: the window's
        last scrape is in (the scrape interval is 5 s)."""
        sel = "|".join(services)

        def scraped() -> bool:
            seen = self.by("service", f'max by (service) (timestamp(lab_memory_bytes{{service=~"{sel}"}}))')
            return all(seen.get(s, 0) >= after for s in services)

        return wait_until(scraped, timeout_s=timeout, every_s=1)

    def resources(self, services: list[str], start: float, end: float) -> dict[str, dict[str, Any]]:
        """Per service over [start, end]: peak memory (max_over_time), CPU used
        (cores, mean over replicas), its limit, and the share of the CPU periods in which
        it ran that its limit held it back (%, over every replica's periods)."""
        at = min(end + 5, time.time())  # the scrape after the end is part of the run
        window = f"{max(10, math.ceil(at - start))}s"
        sel = f'service=~"{"|".join(services)}"'
        peak = self.by("service", f"max by (service) (max_over_time(lab_memory_bytes{{{sel}}}[{window}]))", at)
        used = self.by("service", f"avg by (service) (rate(lab_cpu_seconds_total{{{sel}}}[{window}]))", at)
        limit = self.by("service", f"max by (service) (max_over_time(lab_cpu_limit_cores{{{sel}}}[{window}]))", at)
        throttled = self.by(
            "service",
            f"sum by (service) (increase(lab_cpu_throttled_periods_total{{{sel}}}[{window}])) * 100"
            f" / sum by (service) (increase(lab_cpu_periods_total{{{sel}}}[{window}]))",
            at,
        )
        out = {}
        for s in services:
            out[s] = {
                "peak_memory_bytes": int(peak[s]) if s in peak else None,
                "cpu_used_cores": round(used[s], 3) if s in used else None,
                "cpu_limit_cores": limit.get(s),
                "cpu_used_pct_of_limit": round(100 * used[s] / limit[s], 1) if s in used and limit.get(s) else None,
                "cpu_throttled_periods_pct": round(throttled[s], 1)
                if s in throttled and math.isfinite(throttled[s])
                else None,
            }
        return out

    def task_times(self, queues: list[str], start: float, end: float) -> dict[str, dict[str, dict[str, float]]]:
        """Per queue, the p50/p95/p99 (seconds) of its tasks' wait (enqueue to start,
        lab_task_wait_seconds) and latency (enqueue to done, lab_task_latency_seconds)
        over [start, end]: the tasks that started (or ended) in it, from the lab's
        histograms, so each figure is interpolated within its bucket (LATENCY_BUCKETS in
        lab/metrics.py, from a millisecond to twenty minutes). A queue with no task there is left out."""
        at = min(end + 5, time.time())
        window = f"{max(10, math.ceil(at - start))}s"
        sel = f'queue=~"{"|".join(queues)}"'
        out: dict[str, dict[str, dict[str, float]]] = {}
        for name, metric in (("wait", "lab_task_wait_seconds"), ("latency", "lab_task_latency_seconds")):
            for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                expr = f"histogram_quantile({q}, sum by (le, queue) (increase({metric}_bucket{{{sel}}}[{window}])))"
                for queue, value in self.by("queue", expr, at).items():
                    if math.isfinite(value):
                        out.setdefault(queue, {}).setdefault(name, {})[label] = round(value, 3)
        return out


def rfc3339(stamp: str) -> float:
    """An RFC 3339 time with nanoseconds (Prometheus's lastScrape, the engine's StartedAt) as a unix time; 0 if unreadable."""
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", stamp or "")
    if not match:
        return 0.0
    whole, frac, zone = match.groups()
    when = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return when + (float(frac) if frac else 0.0)
