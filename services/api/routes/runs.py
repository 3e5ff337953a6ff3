"""GET /runs and /runs/{run}: the runs the ledger holds, and each one's ledger."""

import asyncio

import redis.exceptions
from fastapi import APIRouter, HTTPException

from services.api.deps import LabStateDep
from services.api.enqueue import failure_reason
from services.api.errors import QueueUnavailable
from services.api.state import LabState

router = APIRouter()


async def _counts_written(state: LabState) -> None:
    """A ledger read from this API includes every enqueue it has answered 202
    for: the counts still in memory are written first (Redis permitting)."""
    try:
        await asyncio.wait_for(state.ledger.enqueues.written(), state.settings.redis_timeout_s)
    except TimeoutError:
        pass  # Redis is away: the read that follows says so


@router.get("/runs")
async def list_runs(state: LabStateDep) -> dict:
    try:
        await _counts_written(state)
        return {"runs": await state.ledger.runs()}
    except redis.exceptions.RedisError as exc:
        raise QueueUnavailable("redis", failure_reason(exc), str(exc)) from None


@router.get("/runs/{run}")
async def run_ledger(state: LabStateDep, run: str) -> dict:
    try:
        await _counts_written(state)
        report = await state.ledger.report(run)
    except redis.exceptions.RedisError as exc:
        raise QueueUnavailable("redis", failure_reason(exc), str(exc)) from None
    if report is None:
        raise HTTPException(404, {"error": f"no such run: {run}", "field": "path.run"})
    return report
