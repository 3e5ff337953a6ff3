"""/healthz (the process answers) and /readyz (and Redis answers it; with
`?queues=arq,saq`, those queues' producers are ready too, and the broker of
a queue not on Redis answers)."""

import asyncio
import importlib

from fastapi import APIRouter, HTTPException, Query, Response

from lab.protocol import BROKER_QUEUES, Queue
from lab.queues import BY_NAME
from services.api.deps import LabStateDep

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


def _queues(text: str) -> list[Queue]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(set(names) - {q.value for q in Queue})
    if unknown:
        raise HTTPException(
            422, f"queues: unknown {', '.join(unknown)}; choose from {', '.join(q.value for q in Queue)}"
        )
    return [Queue(n) for n in dict.fromkeys(names)]


@router.get("/readyz")
async def readyz(
    state: LabStateDep,
    response: Response,
    queues: str = Query("", description="queues whose producers must be ready too (their library imported, connected)"),
) -> dict:
    wanted = [q for q in _queues(queues) if q in BROKER_QUEUES]  # background runs in the API itself
    try:
        async with asyncio.timeout(state.settings.redis_timeout_s):
            await state.redis.ping()
    except Exception as exc:
        response.status_code = 503
        return {"status": "unavailable", "redis": f"{type(exc).__name__}: {exc}"[:200]}
    for queue in wanted:
        try:
            # The import has no deadline (a cold start at a low CPU limit takes a while); the connection has.
            await state.producer(queue)
            if (transport := BY_NAME[queue].transport) != "redis":
                # Its producer, once made, does not say whether its broker is there now:
                # lab/rabbitmq.py or lab/postgres.py, imported with the queue's adapter.
                await importlib.import_module(f"lab.{transport}").answers(state.settings)
        except Exception as exc:
            response.status_code = 503
            return {"status": "unavailable", "queue": queue.value, "error": f"{type(exc).__name__}: {exc}"[:200]}
    return {"status": "ok", **({"queues": [q.value for q in wanted]} if wanted else {})}
