"""What the compose tests share: waiting, sending tasks through the published
API port, reading a run's ledger and Prometheus answers."""

import asyncio
import re
import time
from collections import Counter
from datetime import datetime

import httpx
import pytest

from lab.queues import BROKER_NAMES

WORKERS = BROKER_NAMES
QUEUES = ("background", *WORKERS)
TASKS_PER_QUEUE = 1000  # the session's load: io/simple tasks on every queue


def wait_until(check, timeout: float, interval: float = 1.0, what: str = "condition"):
    """Call check() until it returns something truthy, or fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def post_tasks(
    api_url: str, run: str, per_queue: dict[str, int], kind_variant: str = "io/simple", concurrency: int = 16
) -> Counter:
    """POST tasks through the API, interleaving the queues, at most `concurrency`
    requests in flight; every one must be accepted (202)."""

    async def post_all() -> Counter:
        codes: Counter = Counter()
        errors: list[str] = []
        gate = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=api_url, timeout=30, limits=limits) as client:

            async def one(queue: str) -> None:
                async with gate:
                    r = await client.post(
                        f"/api/v1/incr/{kind_variant}/{queue}", json={"value": 1}, headers={"X-Lab-Run": run}
                    )
                codes[r.status_code] += 1
                if r.status_code != 202 and len(errors) < 5:
                    errors.append(f"{queue}: {r.status_code} {r.text[:300]}")

            order = [q for i in range(max(per_queue.values())) for q, n in per_queue.items() if i < n]
            await asyncio.gather(*(one(q) for q in order))
        assert codes == Counter({202: sum(per_queue.values())}), (codes, errors)
        return codes

    return asyncio.run(post_all())


def run_report(api_url: str, run: str) -> dict | None:
    r = httpx.get(f"{api_url}/api/v1/runs/{run}", timeout=10)
    return r.json() if r.status_code == 200 else None


def wait_settled(api_url: str, run: str, total: int, timeout: float) -> dict:
    """The run's ledger once all `total` tasks are enqueued and none is pending."""
    last: dict = {}
    deadline = time.monotonic() + timeout
    while True:
        last = run_report(api_url, run) or {}
        totals = last.get("totals", {})
        if totals.get("enqueued") == total and totals.get("pending") == 0:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"run {run} not settled after {timeout} s: {last}")
        time.sleep(2)


def by_label(result: list[dict], label: str) -> dict[str, float]:
    """A Prometheus vector as {label value: sample value}."""
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def parse_time(stamp: str) -> float:
    """A Prometheus RFC 3339 time (nanoseconds) as a unix time."""
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()
