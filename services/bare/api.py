"""The bare API of `make bench`: `uvicorn services.bare.api:app` (compose service `bench-api`).

The same route and body as the lab's API, so one load drives both, but each
queue gets only its library's plain documented call (services/bare/queues.py)
with a task of the lab's message's shape (services/bare/bench_task.py):
no ledger, no lab metrics, no middleware. ENQUEUE_MODE is honoured the plain
way: `await` publishes before answering, `after-response` hands the publish
to BackgroundTasks.
"""

import importlib
from contextlib import asynccontextmanager
from typing import Annotated

import redis.asyncio as aioredis
from fastapi import BackgroundTasks, Body, FastAPI, HTTPException
from pydantic import BaseModel

from lab.queues import BROKER_PROFILES, BY_NAME
from lab.settings import get_settings
from services.bare.bench_task import message
from services.bare.queues import BARE, done_key


class IncrBody(BaseModel):
    value: int = 1


@asynccontextmanager
async def lifespan(app: FastAPI):
    url = get_settings().redis_url
    app.state.redis = aioredis.Redis.from_url(url)
    app.state.queues = {}
    up = {"redis": True, **{t: await _answers(t) for t in BROKER_PROFILES}}
    for name, bare in BARE.items():
        if not up[BY_NAME[name].transport]:
            continue  # its broker was not started (make up BROKERS=rabbitmq|postgres): its route answers 404
        app.state.queues[name] = bare()
        await app.state.queues[name].start(url)
    yield
    for queue in app.state.queues.values():
        await queue.close()
    await app.state.redis.aclose()


app = FastAPI(title="bare baseline", lifespan=lifespan)


async def _answers(transport: str) -> bool:
    """Whether the broker of this transport answers: lab/rabbitmq.py or lab/postgres.py."""
    try:
        await importlib.import_module(f"lab.{transport}").answers(get_settings())
        return True
    except Exception:
        return False


async def _background(task: dict) -> None:
    await app.state.redis.incrby(done_key("background"), task["value"])


@app.post("/api/v1/incr/{kind}/{variant}/{queue}", status_code=202)
async def incr(
    kind: str, variant: str, queue: str, background: BackgroundTasks, body: Annotated[IncrBody, Body()]
) -> dict:
    task = message(queue, kind, variant, body.value)
    if queue == "background":
        background.add_task(_background, task)
    elif queue not in app.state.queues:
        raise HTTPException(404, f"unknown queue {queue}")
    elif get_settings().enqueue_mode == "after-response":
        background.add_task(app.state.queues[queue].publish, task)
    else:
        await app.state.queues[queue].publish(task)
    return {"queue": queue}


@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}
