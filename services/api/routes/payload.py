"""GET /payload: a body of a chosen size."""

from functools import lru_cache
from typing import Annotated

from fastapi import APIRouter, Query, Response

router = APIRouter()

MAX_PAYLOAD = 10 * 1024 * 1024


@lru_cache(maxsize=8)
def _payload(size: int) -> bytes:
    return b"x" * size


@router.get("/payload")
async def payload(size: Annotated[int, Query(ge=0, le=MAX_PAYLOAD)] = 1024) -> Response:
    return Response(content=_payload(size), media_type="application/octet-stream")
