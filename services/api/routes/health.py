"""/healthz (the process answers) and /readyz (and Redis answers it)."""

import asyncio

from fastapi import APIRouter, Response

from services.api.deps import LabStateDep

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: LabStateDep, response: Response) -> dict:
    try:
        async with asyncio.timeout(state.settings.redis_timeout_s):
            await state.redis.ping()
    except Exception as exc:
        response.status_code = 503
        return {"status": "unavailable", "redis": f"{type(exc).__name__}: {exc}"[:200]}
    return {"status": "ok"}
