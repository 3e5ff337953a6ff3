"""The API's routes: enqueue a task, read a run's ledger, health."""

import asyncio
import json
import logging
import time
from typing import Annotated

import redis.exceptions
from fastapi import APIRouter, BackgroundTasks, Body, Header, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from services.api.errors import QueueUnavailable
from services.ledger import Ledger
from services.metrics import ENQUEUE_ERRORS, ENQUEUE_SECONDS, ENQUEUED
from services.protocol import DEFAULT_RUN, ENDPOINTS, RUN_PATTERN, Kind, Queue, TaskMessage, Variant

router = APIRouter()
log = logging.getLogger("lab.api")


class IncrBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: StrictInt = Field(1, ge=1, le=1000)


class Accepted(BaseModel):
    task_id: str
    queue: Queue
    kind: Kind
    variant: Variant
    run: str


RunHeader = Annotated[str, Header(alias="X-Lab-Run", pattern=RUN_PATTERN)]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (TimeoutError, redis.exceptions.TimeoutError)):
        return "timeout"
    if isinstance(exc, (ConnectionError, OSError, redis.exceptions.ConnectionError)):
        return "connection"
    return "broker"


async def enqueue(request: Request, msg: TaskMessage, background: BackgroundTasks) -> None:
    """Hand one task to its queue, counted in the ledger first; when the broker
    refuses it, the ledger entry is taken back and a QueueUnavailable (503) raised."""
    lab = request.app.state.lab
    started = time.perf_counter()
    # No overall deadline here: cancelling a publish half-way leaves its outcome
    # unknown (the broker may have it). Every client has socket timeouts
    # (REDIS_TIMEOUT_S) instead, so an unreachable Redis still fails in seconds.
    try:
        try:
            await lab.ledger.record_enqueued(msg)
        except BaseException:
            # Its reply timed out or the connection broke: Redis may have applied
            # it anyway. The take-back is idempotent, so it is sent regardless,
            # after the answer: with Redis frozen it would take another timeout.
            _undo_later(lab, msg)
            raise
        try:
            if msg.queue == Queue.background:
                lab.background.enqueue(msg, background)
            else:
                producer = await lab.producer(msg.queue)
                await producer.enqueue(msg)
        except BaseException:
            if not await asyncio.shield(_undo(lab.ledger, msg)):
                _undo_later(lab, msg)  # Redis went too: retried until it is back
            raise
    except Exception as exc:
        reason = _reason(exc)
        ENQUEUE_ERRORS.labels(queue=msg.queue, reason=reason).inc()
        raise QueueUnavailable(msg.queue, reason, f"{type(exc).__name__}: {exc}"[:300]) from None
    ENQUEUE_SECONDS.labels(msg.queue).observe(time.perf_counter() - started)
    ENQUEUED.labels(msg.queue, msg.kind, msg.variant).inc()


_PENDING_UNDOS: set[asyncio.Task] = set()  # strong references until each one ran
UNDO_RETRY_S = 60  # a take-back that finds Redis down is retried every second for this long


def _undo_later(lab, msg: TaskMessage) -> None:
    task = asyncio.create_task(_undo(lab.undo_ledger, msg, attempts=UNDO_RETRY_S))
    _PENDING_UNDOS.add(task)
    task.add_done_callback(_PENDING_UNDOS.discard)


async def _undo(ledger: Ledger, msg: TaskMessage, attempts: int = 1) -> bool:
    """Take back a counted enqueue; False if Redis could not be reached. Left
    undone, the ledger would keep a task no queue has, as lost."""
    for attempt in range(attempts):
        try:
            await ledger.take_back(msg)
            return True
        except Exception:
            if attempt + 1 < attempts:
                await asyncio.sleep(1)
    log.warning("could not take back the enqueue of task %s (run %s): Redis unreachable", msg.task_id, msg.run)
    return False


async def _enqueue_after_response(request: Request, msg: TaskMessage, background: BackgroundTasks) -> None:
    try:
        await enqueue(request, msg, background)
    except QueueUnavailable:
        pass  # counted in lab_enqueue_errors_total; the client already got its 202


# The answer is written out directly: validating and serialising a response
# model cost as much CPU as the enqueue itself. `responses` keeps it documented.
@router.post("/api/v1/incr/{kind}/{variant}/{queue}", status_code=202, response_model=None,
             responses={202: {"model": Accepted, "description": "Accepted: the task is (or will be) in its queue"}})
async def incr(
    request: Request,
    kind: Kind,
    variant: Variant,
    queue: Queue,
    background: BackgroundTasks,
    body: Annotated[IncrBody, Body()],
    run: RunHeader = DEFAULT_RUN,
) -> Response:
    if (kind, variant) not in ENDPOINTS:
        raise HTTPException(404, {"error": f"unknown task {kind}/{variant}", "field": "path.variant",
                                  "allowed": [f"{k}/{v}" for k, v in ENDPOINTS]})
    msg = TaskMessage.new(run, queue, kind, variant, body.value)
    if request.app.state.lab.settings.enqueue_mode == "after-response":
        background.add_task(_enqueue_after_response, request, msg, background)
    else:
        await enqueue(request, msg, background)
    body = json.dumps({"task_id": msg.task_id, "queue": queue, "kind": kind, "variant": variant, "run": run})
    return Response(body.encode(), status_code=202, media_type="application/json")


@router.get("/api/v1/runs")
async def list_runs(request: Request) -> dict:
    try:
        return {"runs": await request.app.state.lab.ledger.runs()}
    except redis.exceptions.RedisError as exc:
        raise QueueUnavailable("redis", _reason(exc), str(exc)) from None


@router.get("/api/v1/runs/{run}")
async def run_ledger(request: Request, run: str) -> dict:
    try:
        report = await request.app.state.lab.ledger.report(run)
    except redis.exceptions.RedisError as exc:
        raise QueueUnavailable("redis", _reason(exc), str(exc)) from None
    if report is None:
        raise HTTPException(404, {"error": f"no such run: {run}", "field": "path.run"})
    return report


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, response: Response) -> dict:
    lab = request.app.state.lab
    try:
        async with asyncio.timeout(lab.settings.redis_timeout_s):
            await lab.redis.ping()
    except Exception as exc:
        response.status_code = 503
        return {"status": "unavailable", "redis": f"{type(exc).__name__}: {exc}"[:200]}
    return {"status": "ok"}
