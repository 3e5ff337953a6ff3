"""A stand-in for a remote API: answers every request after UPSTREAM_LATENCY_MS
(default 180, like the call the original experiment made), plus a random jitter
of up to UPSTREAM_JITTER_MS.

Run: uvicorn services.upstream:app --port 8001
"""

import asyncio
import random

from fastapi import FastAPI

from lab.settings import get_settings

LATENCY_S = get_settings().upstream_latency_ms / 1000
JITTER_S = get_settings().upstream_jitter_ms / 1000

app = FastAPI(title="upstream", docs_url=None, redoc_url=None)
in_flight = 0  # requests being answered now: lets a test know a call has arrived


@app.get("/")
async def answer() -> dict:
    global in_flight
    delay = LATENCY_S + (random.uniform(0, JITTER_S) if JITTER_S else 0)
    in_flight += 1
    try:
        await asyncio.sleep(delay)
    finally:
        in_flight -= 1
    return {"upstream": "ok", "latency_ms": int(LATENCY_S * 1000)}


@app.get("/inflight")
async def inflight() -> dict:
    return {"in_flight": in_flight}


@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}
