"""The API's HTTP metrics, as a plain ASGI middleware.

The series of prometheus-fastapi-instrumentator (http_requests_total,
http_request_duration_seconds, http_request_duration_highr_seconds,
http_requests_inprogress) at a fraction of its cost per request: each series
is looked up once, no request or response size is measured, and a path's
route template is read from the scope once the router has matched it, then
remembered. /metrics itself is not counted; health and readiness probes are
counted but kept out of the latency percentiles, which describe the work routes.
"""

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.metrics import HTTP_DURATION, HTTP_DURATION_ALL, HTTP_IN_PROGRESS, HTTP_REQUESTS

NOT_COUNTED = frozenset({"/metrics"})
NOT_IN_PERCENTILES = frozenset({"/healthz", "/readyz"})
MAX_PATHS = 1024  # distinct paths remembered; a scan of random URLs must not grow memory


class HttpMetrics:
    def __init__(self, app: ASGIApp):
        self.app = app
        # (method, path) -> route template, learnt from the scope the router
        # fills in ("route"); the first request of a path is not in the in-flight gauge.
        self._handlers: dict[tuple[str, str], str] = {}
        self._series: dict[tuple[str, str], tuple] = {}
        self._requests: dict[tuple[str, str, int], object] = {}

    def series(self, handler: str, method: str) -> tuple:
        series = self._series.get((handler, method))
        if series is None:
            series = (HTTP_IN_PROGRESS.labels(handler, method), HTTP_DURATION.labels(handler, method))
            self._series[(handler, method)] = series
        return series

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in NOT_COUNTED:
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        method, key = scope["method"], (scope["method"], scope["path"])
        handler = self._handlers.get(key)
        if handler is not None:
            self.series(handler, method)[0].inc()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = time.perf_counter() - started
            if handler is not None:
                in_progress, duration = self.series(handler, method)
                in_progress.dec()
            else:
                handler = getattr(scope.get("route"), "path", None) or "none"
                if len(self._handlers) >= MAX_PATHS:
                    self._handlers.clear()
                self._handlers[key] = handler
                duration = self.series(handler, method)[1]
            duration.observe(elapsed)
            if handler not in NOT_IN_PERCENTILES:
                HTTP_DURATION_ALL.observe(elapsed)
            counter = self._requests.get((handler, method, status))
            if counter is None:
                counter = self._requests[(handler, method, status)] = HTTP_REQUESTS.labels(handler, method, str(status))
            counter.inc()
