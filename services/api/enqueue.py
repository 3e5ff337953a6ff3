"""Hand a task to its queue and count it in the ledger: what the enqueue route
does, at once (ENQUEUE_MODE=await) or through the outbox after its 202
(after-response)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import redis.exceptions
from fastapi import BackgroundTasks

from lab.metrics import ENQUEUE_ERRORS
from lab.protocol import TaskMessage

# A module name, not Queue.background: a member looked up on its Enum class takes the same slow way.
from services.api.background import QUEUE as BACKGROUND
from services.api.enqueue_metrics import enqueue_series
from services.api.errors import QueueUnavailable

if TYPE_CHECKING:
    from services.api.state import LabState


def failure_reason(exc: BaseException | None) -> str:
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


async def enqueue(state: LabState, msg: TaskMessage, background: BackgroundTasks, accepted: bool = False) -> None:
    """Hand one task to its queue, then count it in the ledger; when the broker
    refuses it, nothing is counted and a QueueUnavailable (503) is raised.
    `background` is the request's BackgroundTasks, where a `background` task
    is scheduled; `accepted`: its request was already answered 202 (the outbox's)."""
    started = time.perf_counter()
    # No overall deadline here: cancelling a publish half-way leaves its outcome
    # unknown (the broker may have it). Every client has socket timeouts
    # (REDIS_TIMEOUT_S) instead, so an unreachable Redis still fails in seconds.
    try:
        if msg.queue == BACKGROUND:
            # No broker: the count, written before the 202, is what finds Redis away.
            await state.ledger.count_enqueued_now(msg)
            state.background.enqueue(msg, background)
        else:
            producer = state.producers.get(msg.queue) or await state.producer(msg.queue)
            await producer.enqueue(msg)
            # Counted once the broker has it, written in the background (Ledger.count_enqueued).
            state.ledger.count_enqueued(msg)
    except Exception as exc:
        if msg.queue != BACKGROUND:  # `background`'s count is taken back (EnqueueCounts.write_now)
            # Its broker may have taken it and lost only the reply: counted if it runs.
            state.ledger.count_refused(msg, accepted)
        reason = failure_reason(exc)
        ENQUEUE_ERRORS.labels(queue=msg.queue, reason=reason).inc()
        raise QueueUnavailable(msg.queue, reason, f"{type(exc).__name__}: {exc}"[:300]) from None
    seconds, enqueued = enqueue_series(msg)
    seconds(time.perf_counter() - started)
    enqueued.value += 1


# What the outbox's publishers hand enqueue() for a request's BackgroundTasks:
# they publish broker tasks only (a `background` task is scheduled with its
# request), so nothing is ever added to it.
_NO_REQUEST = BackgroundTasks()


async def publish_after_response(state: LabState, msg: TaskMessage) -> None:
    """What the outbox's publishers call (ENQUEUE_MODE=after-response)."""
    try:
        await enqueue(state, msg, _NO_REQUEST, accepted=True)
    except QueueUnavailable:
        pass  # counted in lab_enqueue_errors_total; the client already got its 202
