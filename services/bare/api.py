"""The bare API of `make bench`: `uvicorn services.bare.api:app` (compose service `bench-api`).

The same route and body as the lab's API, so one load drives both, but each
queue gets only its library's plain documented call: no ledger, no lab
metrics, no middleware. ENQUEUE_MODE is honoured the plain way: `await`
publishes before answering, `after-response` hands the publish to
BackgroundTasks. Celery's `send_task` runs on the event loop, as the
library's docs and the published experiment call it.
"""

from contextlib import asynccontextmanager
from typing import Annotated

import redis.asyncio as aioredis
from arq import create_pool
from arq.connections import RedisSettings
from celery import Celery
from fastapi import BackgroundTasks, Body, FastAPI, HTTPException
from faststream.redis import RedisBroker
from pydantic import BaseModel
from redis.exceptions import ResponseError
from saq import Queue as SaqQueue

from services.bare import keys
from services.settings import get_settings


class IncrBody(BaseModel):
    value: int = 1


@asynccontextmanager
async def lifespan(app: FastAPI):
    url = get_settings().redis_url
    app.state.redis = aioredis.Redis.from_url(url)
    app.state.arq = await create_pool(RedisSettings.from_dsn(url), default_queue_name=keys.ARQ_QUEUE)
    app.state.saq = SaqQueue.from_url(url, name=keys.SAQ_QUEUE)
    await app.state.saq.connect()
    app.state.broker = RedisBroker(url)
    await app.state.broker.connect()
    try:  # the group starts at 0, like the lab's: tasks published before the worker runs are kept
        await app.state.redis.xgroup_create(keys.STREAM, keys.GROUP, id="0", mkstream=True)
    except ResponseError:
        pass  # BUSYGROUP: it exists
    app.state.celery = Celery("bench", broker=url)
    app.state.celery.conf.task_default_queue = keys.CELERY_QUEUE
    yield
    await app.state.broker.stop()
    await app.state.saq.disconnect()
    await app.state.arq.aclose()
    await app.state.redis.aclose()


app = FastAPI(title="bare baseline", lifespan=lifespan)


async def _background(value: int) -> None:
    await app.state.redis.incrby(keys.done_key("background"), value)


async def publish(queue: str, value: int, background: BackgroundTasks) -> None:
    state = app.state
    if queue == "background":
        background.add_task(_background, value)
    elif queue == "arq":
        await state.arq.enqueue_job(keys.TASK, value)
    elif queue == "saq":
        await state.saq.enqueue(keys.TASK, value=value)
    elif queue == "faststream":
        await state.broker.publish({"value": value}, stream=keys.STREAM)
    elif queue == "celery":
        state.celery.send_task(keys.TASK, args=[value])
    else:
        raise HTTPException(404, f"unknown queue {queue}")


@app.post("/api/v1/incr/{kind}/{variant}/{queue}", status_code=202)
async def incr(kind: str, variant: str, queue: str, background: BackgroundTasks,
               body: Annotated[IncrBody, Body()]) -> dict:
    if get_settings().enqueue_mode == "after-response" and queue != "background":
        background.add_task(publish, queue, body.value, background)
    else:
        await publish(queue, body.value, background)
    return {"queue": queue}


@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}
