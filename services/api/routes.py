"""The API's routes: enqueue a task, read a run's ledger, health."""

import asyncio
import logging
import re
import time
from typing import Annotated, Literal

import redis.exceptions
from fastapi import APIRouter, BackgroundTasks, Body, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from lab.metrics import ENQUEUE_ERRORS, ENQUEUE_SECONDS, ENQUEUED, Count, Observe
from lab.protocol import DEFAULT_RUN, ENDPOINTS, RUN_PATTERN, Kind, Queue, TaskMessage, Variant

# A module name, not Queue.background: a member looked up on its Enum class takes the same slow way.
from services.api.background import QUEUE as BACKGROUND
from services.api.errors import QueueUnavailable, raw_header

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


# The path's names, typed as Literals of the enums' values and turned into
# members by a dict: FastAPI looks at each parameter's annotation on every
# request (typing.get_origin, isinstance: 24 looks per parameter), and on
# Python 3.11 each look at an Enum class goes through its metaclass'
# __getattr__. Three Enum parameters cost the route 72 such looks: 51,000 of
# streaq's and 82,000 of FastStream's CPU instructions per request
# (callgrind, README "What the lab costs"); the schema and the 422 are the same.
KindName = Literal[tuple(k.value for k in Kind)]
VariantName = Literal[tuple(v.value for v in Variant)]
QueueName = Literal[tuple(q.value for q in Queue)]
_KINDS, _VARIANTS, _QUEUES = ({m.value: m for m in enum} for enum in (Kind, Variant, Queue))

RUN_HEADER = "X-Lab-Run"
_RUN_OK = re.compile(RUN_PATTERN).fullmatch
# Documented here, read in the handler: FastAPI's Header() re-inspects the
# parameter's type on every request, a tenth of the whole route's cost.
_RUN_HEADER_DOC = {
    "parameters": [
        {
            "name": RUN_HEADER,
            "in": "header",
            "required": False,
            "description": "The run this task belongs to (its ledger); `default` when absent.",
            "schema": {"type": "string", "pattern": RUN_PATTERN, "default": DEFAULT_RUN},
        }
    ]
}


_RUN_HEADER_KEY = RUN_HEADER.lower().encode()


def run_of(request: Request) -> str:
    value = raw_header(request.scope, _RUN_HEADER_KEY)
    if value is None:
        return DEFAULT_RUN
    run = value.decode("latin-1")
    if _RUN_OK(run) is None:
        raise RequestValidationError(
            [
                {
                    "loc": ("header", RUN_HEADER),
                    "type": "string_pattern_mismatch",
                    "msg": f"String should match pattern '{RUN_PATTERN}'",
                    "input": run,
                }
            ]
        )
    return run


def _reason(exc: BaseException) -> str:
    """timeout, connection or broker; a library's own error (kombu's
    OperationalError, ...) is judged by what caused it."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, (TimeoutError, redis.exceptions.TimeoutError)):
            return "timeout"
        if isinstance(exc, (ConnectionError, OSError, redis.exceptions.ConnectionError)):
            return "connection"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return "broker"


async def enqueue(lab, msg: TaskMessage, background: BackgroundTasks) -> None:
    """Hand one task to its queue, then count it in the ledger; when the broker
    refuses it, nothing is counted and a QueueUnavailable (503) is raised."""
    started = time.perf_counter()
    # No overall deadline here: cancelling a publish half-way leaves its outcome
    # unknown (the broker may have it). Every client has socket timeouts
    # (REDIS_TIMEOUT_S) instead, so an unreachable Redis still fails in seconds.
    try:
        if msg.queue == BACKGROUND:
            # No broker: the count, written before the 202, is what finds Redis away.
            await lab.ledger.count_enqueued_now(msg)
            lab.background.enqueue(msg, background)
        else:
            producer = lab.producers.get(msg.queue) or await lab.producer(msg.queue)
            await producer.enqueue(msg)
            # Counted once the broker has it, written in the background (Ledger.count_enqueued).
            lab.ledger.count_enqueued(msg)
    except Exception as exc:
        reason = _reason(exc)
        ENQUEUE_ERRORS.labels(queue=msg.queue, reason=reason).inc()
        raise QueueUnavailable(msg.queue, reason, f"{type(exc).__name__}: {exc}"[:300]) from None
    seconds, enqueued = _series(msg)
    seconds(time.perf_counter() - started)
    enqueued.n += 1


_SERIES: dict[tuple, tuple] = {}


def _series(msg: TaskMessage) -> tuple:
    """The enqueue series of a task's queue/kind/variant, looked up once (lab/metrics.py: Observe, Count)."""
    key = (msg.queue, msg.kind, msg.variant)
    series = _SERIES.get(key)
    if series is None:
        series = _SERIES[key] = (Observe(ENQUEUE_SECONDS.labels(msg.queue)), Count(ENQUEUED.labels(*key)))
    return series


async def publish_after_response(lab, msg: TaskMessage) -> None:
    """What the outbox's publishers call (ENQUEUE_MODE=after-response)."""
    try:
        await enqueue(lab, msg, None)
    except QueueUnavailable:
        pass  # counted in lab_enqueue_errors_total; the client already got its 202


# The answer is written out directly: validating and serialising a response
# model cost as much CPU as the enqueue itself. `responses` keeps it documented.
@router.post(
    "/api/v1/incr/{kind}/{variant}/{queue}",
    status_code=202,
    response_model=None,
    openapi_extra=_RUN_HEADER_DOC,
    responses={202: {"model": Accepted, "description": "Accepted: the task is (or will be) in its queue"}},
)
async def incr(
    request: Request,
    kind: KindName,
    variant: VariantName,
    queue: QueueName,
    background: BackgroundTasks,
    body: Annotated[IncrBody, Body()],
) -> Response:
    run = run_of(request)
    kind, variant, queue = _KINDS[kind], _VARIANTS[variant], _QUEUES[queue]
    if (kind, variant) not in ENDPOINTS:
        raise HTTPException(
            404,
            {
                "error": f"unknown task {kind}/{variant}",
                "field": "path.variant",
                "allowed": [f"{k}/{v}" for k, v in ENDPOINTS],
            },
        )
    msg = TaskMessage.new(run, queue, kind, variant, body.value)
    lab = request.app.state.lab
    # `background` has nothing to publish: its task is scheduled either way.
    if lab.settings.enqueue_mode == "after-response" and queue != BACKGROUND:
        lab.outbox.put(msg)
    else:
        await enqueue(lab, msg, background)
    # Every value is an enum's, a hex id or a run name (RUN_PATTERN): nothing to escape.
    body = (
        f'{{"task_id": "{msg.task_id}", "queue": "{queue}", "kind": "{kind}", "variant": "{variant}", "run": "{run}"}}'
    )
    return Response(body.encode(), status_code=202, media_type="application/json")


async def _counts_written(lab) -> None:
    """A ledger read from this API includes every enqueue it has answered 202
    for: the counts still in memory are written first (Redis permitting)."""
    try:
        await asyncio.wait_for(lab.ledger.enqueues.written(), lab.settings.redis_timeout_s)
    except TimeoutError:
        pass  # Redis is away: the read that follows says so


@router.get("/api/v1/runs")
async def list_runs(request: Request) -> dict:
    try:
        await _counts_written(request.app.state.lab)
        return {"runs": await request.app.state.lab.ledger.runs()}
    except redis.exceptions.RedisError as exc:
        raise QueueUnavailable("redis", _reason(exc), str(exc)) from None


@router.get("/api/v1/runs/{run}")
async def run_ledger(request: Request, run: str) -> dict:
    try:
        await _counts_written(request.app.state.lab)
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
