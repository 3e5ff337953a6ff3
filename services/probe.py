"""Liveness probe: GET PROBE_TARGET (the API's /healthz) PROBE_RATE times a
second, each with a PROBE_TIMEOUT_S timeout, whether or not the previous one
answered, as a kubelet would. It runs beside any load and shows when the API's
event loop stops answering even its cheapest route.

Exports lab_probe_requests_total{outcome}, lab_probe_latency_seconds and
lab_probe_seconds_since_success; GET /report?since=T&until=T gives the success
rate and the worst gap between two successful probes in a time window (the
load tool stores it in the run's result).

Run: uvicorn services.probe:app --port 9000
"""

import asyncio
import time
from collections import deque
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest

from lab.cgroup import register_cgroup_metrics
from lab.settings import get_settings

TARGET = get_settings().probe_target
RATE = get_settings().probe_rate
TIMEOUT_S = get_settings().probe_timeout_s
KEEP = 24 * 3600  # seconds of results kept for /report

REQUESTS = Counter("lab_probe_requests", "Liveness probes sent, by outcome (ok, timeout, error).", ["outcome"])
LATENCY = Histogram(
    "lab_probe_latency_seconds",
    "Response time of successful liveness probes.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
SINCE_SUCCESS = Gauge("lab_probe_seconds_since_success", "Time since the last successful liveness probe.")

results: deque[tuple[float, bool, float]] = deque()  # (answered_at, ok, seconds)
last_success = time.time()


async def probe_once(client: httpx.AsyncClient) -> None:
    global last_success
    started = time.perf_counter()
    try:
        r = await client.get(TARGET)
        ok, outcome = r.status_code == 200, "ok" if r.status_code == 200 else "error"
    except httpx.TimeoutException:
        ok, outcome = False, "timeout"
    except httpx.HTTPError:
        ok, outcome = False, "error"
    elapsed = time.perf_counter() - started
    now = time.time()
    REQUESTS.labels(outcome=outcome).inc()
    if ok:
        LATENCY.observe(elapsed)
        last_success = now
    results.append((now, ok, elapsed))
    while results and results[0][0] < now - KEEP:
        results.popleft()


async def probe_forever() -> None:
    pending: set[asyncio.Task] = set()
    async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
        while True:
            task = asyncio.create_task(probe_once(client))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(1 / RATE)


def report(since: float, until: float) -> dict:
    window = [r for r in results if since <= r[0] <= until]
    successes = [t for t, ok, _ in window if ok]
    edges = [since, *successes, min(until, time.time())]
    latencies = sorted(s for _, ok, s in window if ok)
    return {
        "target": TARGET,
        "rate_per_s": RATE,
        "sent": len(window),
        "ok": len(successes),
        "success_rate": round(len(successes) / len(window), 4) if window else None,
        "successes_per_s": round(len(successes) / (until - since), 2) if until > since else None,
        "worst_gap_s": round(max(b - a for a, b in zip(edges, edges[1:])), 3) if len(edges) > 1 else None,
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2) if latencies else None,
    }


@asynccontextmanager
async def lifespan(_: FastAPI):
    register_cgroup_metrics(get_settings().service_name or "probe")
    SINCE_SUCCESS.set_function(lambda: time.time() - last_success)
    task = asyncio.create_task(probe_forever())
    yield
    task.cancel()


app = FastAPI(title="liveness probe", lifespan=lifespan, docs_url=None, redoc_url=None)


@app.get("/report")
async def get_report(since: float, until: float | None = None) -> dict:
    return report(since, until or time.time())


@app.get("/metrics")
def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}
