"""The one task message every queue carries, and the names the API accepts."""

import time
import uuid
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

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


class Queue(StrEnum):
    background = "background"
    arq = "arq"
    saq = "saq"
    faststream = "faststream"
    celery = "celery"


# The five task shapes of the experiment; any other kind/variant pair is rejected.
ENDPOINTS: tuple[tuple[Kind, Variant], ...] = (
    (Kind.io, Variant.simple),
    (Kind.io, Variant.sync),
    (Kind.io, Variant.thread),
    (Kind.cpu, Variant.simple),
    (Kind.cpu, Variant.process),
)
BROKER_QUEUES: tuple[Queue, ...] = (Queue.arq, Queue.saq, Queue.faststream, Queue.celery)


class TaskMessage(BaseModel):
    """What travels through every broker, as JSON."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    task_id: str
    run: str = Field(pattern=RUN_PATTERN)
    queue: Queue
    kind: Kind
    variant: Variant
    value: int
    enqueued_at: float  # unix time, seconds

    @classmethod
    def new(cls, run: str, queue: Queue, kind: Kind, variant: Variant, value: int) -> "TaskMessage":
        # The API validated every field already (path, header, body): built
        # without a second validation, which is a good part of a request's cost.
        return cls.model_construct(
            task_id=uuid.uuid4().hex,
            run=run,
            queue=queue,
            kind=kind,
            variant=variant,
            value=value,
            enqueued_at=time.time(),
        )

    @property
    def endpoint(self) -> str:
        return f"{self.kind}/{self.variant}"

    def payload(self) -> dict:
        """The message as JSON types (what model_dump(mode="json") gives, for a fraction of its cost)."""
        return {"task_id": self.task_id, "run": self.run, "queue": str(self.queue), "kind": str(self.kind),
                "variant": str(self.variant), "value": self.value, "enqueued_at": self.enqueued_at}
