"""POST /incr/{kind}/{variant}/{queue}: enqueue one task on one queue."""

import re
from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias

from fastapi import APIRouter, BackgroundTasks, Body, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from lab.protocol import DEFAULT_RUN, ENDPOINTS, RUN_PATTERN, Kind, Queue, TaskMessage, Variant
from services.api.deps import lab_state
from services.api.enqueue import BACKGROUND, enqueue
from services.api.errors import raw_header

router = APIRouter()


class IncrBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: StrictInt = Field(1, ge=1, le=1000)


class Accepted(BaseModel):
    task_id: str
    queue: Queue
    kind: Kind
    variant: Variant
    run: str


# Fast path: the path's names are typed as Literals of the enums' values and
# turned into members by a dict, not typed as the enums: FastAPI looks at each
# parameter's annotation on every request, and a look at an Enum class takes a
# slow way through its metaclass. The schema and the 422 are the same
# (docs/hot-path.md).
if TYPE_CHECKING:  # a Literal made from data is no type to mypy: the names are strings
    KindName: TypeAlias = str
    VariantName: TypeAlias = str
    QueueName: TypeAlias = str
else:
    KindName = Literal[tuple(k.value for k in Kind)]
    VariantName = Literal[tuple(v.value for v in Variant)]
    QueueName = Literal[tuple(q.value for q in Queue)]
_KINDS: dict[str, Kind] = {m.value: m for m in Kind}
_VARIANTS: dict[str, Variant] = {m.value: m for m in Variant}
_QUEUES: dict[str, Queue] = {m.value: m for m in Queue}

RUN_HEADER = "X-Lab-Run"
_RUN_OK = re.compile(RUN_PATTERN).fullmatch
# Fast path: the run header is documented here and read from the raw headers
# in the handler, not declared with Header(), which re-inspects the
# parameter's type on every request (docs/hot-path.md).
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


# Fast path: the answer is written out directly, not validated and serialised
# through a response model; `responses` keeps it documented (docs/hot-path.md).
@router.post(
    "/incr/{kind}/{variant}/{queue}",
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
    task_kind, task_variant, task_queue = _KINDS[kind], _VARIANTS[variant], _QUEUES[queue]
    if (task_kind, task_variant) not in ENDPOINTS:
        raise HTTPException(
            404,
            {
                "error": f"unknown task {task_kind}/{task_variant}",
                "field": "path.variant",
                "allowed": [f"{k}/{v}" for k, v in ENDPOINTS],
            },
        )
    msg = TaskMessage.new(run, task_queue, task_kind, task_variant, body.value)
    state = lab_state(request)  # a plain call, not a Depends (services/api/deps.py)
    # `background` has nothing to publish: its task is scheduled either way.
    if state.settings.enqueue_mode == "after-response" and task_queue != BACKGROUND:
        state.outbox.put(msg)
    else:
        await enqueue(state, msg, background)
    # Every value is an enum's, a hex id or a run name (RUN_PATTERN): nothing to escape.
    answer = (
        f'{{"task_id": "{msg.task_id}", "queue": "{task_queue}", "kind": "{task_kind}", "variant": "{task_variant}", '
        f'"run": "{run}"}}'
    )
    return Response(answer.encode(), status_code=202, media_type="application/json")
