"""The one task message every queue carries, and the names the API accepts."""

import os
import re
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Protocol

from pydantic import Field, TypeAdapter

from lab.queues import BROKER_NAMES

RUN_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
DEFAULT_RUN = "default"


class Kind(StrEnum):
    io = "io"
    cpu = "cpu"


class Variant(StrEnum):
    simple = "simple"
    sync = "sync"
    thread = "thread"
    process = "process"


# `background` (FastAPI's BackgroundTasks, in the API process) and every broker
# queue of lab/queues.py.
# mypy cannot list the members of an Enum made from data; code names a member
# by its value (Queue("arq")), which it checks as a Queue.
Queue = StrEnum("Queue", {name: name for name in ("background", *BROKER_NAMES)})  # type: ignore[misc]


# The five task shapes of the experiment; any other kind/variant pair is rejected.
ENDPOINTS: tuple[tuple[Kind, Variant], ...] = (
    (Kind.io, Variant.simple),
    (Kind.io, Variant.sync),
    (Kind.io, Variant.thread),
    (Kind.cpu, Variant.simple),
    (Kind.cpu, Variant.process),
)
BROKER_QUEUES: tuple[Queue, ...] = tuple(Queue(name) for name in BROKER_NAMES)


@dataclass(slots=True)
class TaskMessage:
    """What travels through every broker, as JSON.

    Fast path: a plain dataclass, not a pydantic model (nor a frozen
    dataclass: nothing changes a message, but nothing is made to forbid it):
    the API builds one per request from fields it has validated already
    (docs/hot-path.md). Workers validate what a broker hands them with
    `TaskMessage.validate(payload)`."""

    task_id: str
    run: Annotated[str, Field(pattern=RUN_PATTERN)]
    queue: Queue
    kind: Kind
    variant: Variant
    value: int
    enqueued_at: float  # unix time, seconds

    @classmethod
    def new(cls, run: str, queue: Queue, kind: Kind, variant: Variant, value: int) -> "TaskMessage":
        # 128 random bits as 32 hex digits: the shape of uuid4().hex, for less (docs/hot-path.md).
        return cls(os.urandom(16).hex(), run, queue, kind, variant, value, time.time())

    @staticmethod
    def validate(payload: dict) -> "TaskMessage":
        """A message as a broker delivered it, checked field by field (unknown keys ignored).

        A message as the lab writes it (payload()) is checked here in a few
        lines; anything else goes to pydantic, which converts what it may and
        names what is wrong. Both accept and refuse the same messages
        (tests/unit/test_protocol.py). Fast path: not pydantic alone, because in a
        worker the queue library's code runs between two tasks and takes the
        CPU's caches, and a validator run on cold caches costs far more than
        in a loop (docs/hot-path.md)."""
        try:
            task_id, run, value, enqueued_at = (
                payload["task_id"],
                payload["run"],
                payload["value"],
                payload["enqueued_at"],
            )
            msg = TaskMessage(
                task_id,
                run,
                _QUEUES[payload["queue"]],
                _KINDS[payload["kind"]],
                _VARIANTS[payload["variant"]],
                value,
                enqueued_at,
            )
        except (KeyError, TypeError):
            return _VALIDATOR.validate_python(payload)
        if (
            type(task_id) is str
            and type(run) is str
            and type(value) is int
            and type(enqueued_at) is float
            and _RUN.fullmatch(run)
        ):
            return msg
        return _VALIDATOR.validate_python(payload)

    @property
    def endpoint(self) -> str:
        return f"{self.kind}/{self.variant}"

    @property
    def fields(self) -> str:
        """The prefix of this task's fields in its run's ledger: "<queue>:<kind>/<variant>"."""
        return f"{self.queue}:{self.kind}/{self.variant}"

    def payload(self) -> dict:
        """The message as JSON types."""
        return {
            "task_id": self.task_id,
            "run": self.run,
            "queue": str(self.queue),
            "kind": str(self.kind),
            "variant": str(self.variant),
            "value": self.value,
            "enqueued_at": self.enqueued_at,
        }


class Producer(Protocol):
    """What every adapter module's `Producer(settings)` does for the API (lab/queues.py: `adapter(name)`)."""

    async def start(self) -> None: ...

    async def enqueue(self, msg: TaskMessage) -> None: ...

    async def close(self) -> None: ...


_VALIDATOR = TypeAdapter(TaskMessage)
_RUN = re.compile(RUN_PATTERN)
_QUEUES: dict[str, Queue] = {m.value: m for m in Queue}
_KINDS: dict[str, Kind] = {m.value: m for m in Kind}
_VARIANTS: dict[str, Variant] = {m.value: m for m in Variant}
