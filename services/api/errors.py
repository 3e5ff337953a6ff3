"""Every error the API returns is a JSON body; none is a traceback.

4xx {"error": "...", "detail": [{"field": "body.value", "message": "..."}]}
503 {"error": "queue unavailable", "queue": "...", "reason": "timeout|connection|..."}
"""

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("lab.api")


class QueueUnavailable(Exception):
    def __init__(self, queue: str, reason: str, detail: str):
        self.queue, self.reason, self.detail = queue, reason, detail


def _field(loc) -> str:
    return ".".join(str(part) for part in loc)


async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    detail = [{"field": _field(e.get("loc", ())), "message": e.get("msg", "")} for e in exc.errors()]
    return JSONResponse({"error": "invalid request", "detail": detail}, status_code=422)


async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    body = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
    return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))


async def queue_unavailable(_: Request, exc: QueueUnavailable) -> JSONResponse:
    return JSONResponse(
        {"error": "queue unavailable", "queue": exc.queue, "reason": exc.reason, "detail": exc.detail},
        status_code=503,
        headers={"Retry-After": "1"},
    )


async def upstream_unavailable(_: Request, exc: httpx.HTTPError) -> JSONResponse:
    """The remote API of the event-loop experiments failed or is not running."""
    return JSONResponse(
        {"error": "upstream unavailable", "detail": f"{type(exc).__name__}: {exc}"[:300]}, status_code=502
    )


async def unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error")
    return JSONResponse({"error": "internal error", "type": type(exc).__name__}, status_code=500)


def install(app: FastAPI) -> None:
    # Each handler takes the exception class it is registered for.
    handlers: dict[type[Exception], Callable[[Request, Any], Awaitable[JSONResponse]]] = {
        RequestValidationError: validation_error,
        StarletteHTTPException: http_error,
        QueueUnavailable: queue_unavailable,
        RecursionError: _too_deep,
        httpx.HTTPError: upstream_unavailable,
        Exception: unexpected,
    }
    for exc_class, handler in handlers.items():
        app.add_exception_handler(exc_class, handler)


async def _too_deep(_: Request, exc: RecursionError) -> JSONResponse:
    return JSONResponse({"error": "request body nested too deeply"}, status_code=400)


def raw_header(scope: Scope, name: bytes) -> bytes | None:
    """A request header's first value, from the raw ASGI headers (`name` in
    lower case), not through Starlette's Headers mapping, which decodes every
    header it passes on the way (fast path: docs/hot-path.md)."""
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


class BodySizeLimit:
    """Reject a request body larger than `limit` bytes with 413, before reading it
    all: by Content-Length when given, by counting the stream otherwise."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = raw_header(scope, b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.limit:
                return await self._reject(send)
            # The server reads no more than Content-Length bytes as this
            # request's body: nothing left to count.
            return await self.app(scope, receive, send)
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # An HTTPException passes through FastAPI's body parsing untouched.
                    raise HTTPException(413, {"error": "request body too large", "limit_bytes": self.limit})
            return message

        await self.app(scope, limited_receive, send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps({"error": "request body too large", "limit_bytes": self.limit}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
