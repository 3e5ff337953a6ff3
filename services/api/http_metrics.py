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

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lab.metrics import Count, Observe, metrics_registry

# The API's HTTP traffic, under the names and labels of
# prometheus-fastapi-instrumentator; `handler` is the route template. Defined
# here, not in lab/metrics.py: the workers serve no HTTP and export none of it.
HTTP_REQUESTS = Counter(
    "http_requests",
    "Requests by route template, method and status.",
    ("handler", "method", "status"),
    registry=metrics_registry(),
)
HTTP_DURATION = Histogram(
    "http_request_duration_seconds",
    "Latency by route template.",
    ("handler", "method"),
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=metrics_registry(),
)
HTTP_DURATION_ALL = Histogram(
    "http_request_duration_highr_seconds",
    "Latency of the API's work routes (health, readiness and /metrics left out), fine buckets for percentiles.",
    buckets=(
        0.001,
        0.0025,
        0.005,
        0.0075,
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.15,
        0.2,
        0.3,
        0.4,
        0.5,
        0.75,
        1,
        1.5,
        2,
        3,
        4,
        5,
        7.5,
        10,
        30,
        60,
    ),
    registry=metrics_registry(),
)
HTTP_IN_PROGRESS = Gauge(
    "http_requests_inprogress",
    "Requests in flight.",
    ("handler", "method"),
    multiprocess_mode="livesum",
    registry=metrics_registry(),
)


NOT_COUNTED = frozenset({"/metrics"})
NOT_IN_PERCENTILES = frozenset({"/healthz", "/readyz"})
MAX_PATHS = 1024  # distinct paths remembered; a scan of random URLs must not grow memory


class HttpMetrics:
    def __init__(self, app: ASGIApp):
        self.app = app
        # (method, path) -> the series of its route (template, learnt from the
        # scope the router fills in, "route"); the first request of a path is
        # not in the in-flight gauge.
        self._routes: dict[tuple[str, str], _RouteSeries] = {}
        self._all = Observe(HTTP_DURATION_ALL)

    def route(self, scope: Scope, key: tuple[str, str]) -> "_RouteSeries":
        handler = getattr(scope.get("route"), "path", None) or "none"
        if len(self._routes) >= MAX_PATHS:
            self._routes.clear()
        series = self._routes[key] = _RouteSeries(handler, key[0])
        return series

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in NOT_COUNTED:
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        key = (scope["method"], scope["path"])
        series = self._routes.get(key)
        if series is not None:
            series.in_progress.value += 1
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
            if series is not None:
                series.in_progress.value -= 1
            else:
                series = self.route(scope, key)
            series.duration(elapsed)
            if series.in_percentiles:
                self._all(elapsed)
            series.requests(status).value += 1


class _RouteSeries:
    """The series of one route and method, looked up once (lab/metrics.py: Count, Observe)."""

    __slots__ = ("handler", "method", "in_progress", "duration", "in_percentiles", "_requests")

    def __init__(self, handler: str, method: str):
        self.handler, self.method = handler, method
        self.in_progress = Count(HTTP_IN_PROGRESS.labels(handler, method))
        self.duration = Observe(HTTP_DURATION.labels(handler, method))
        self.in_percentiles = handler not in NOT_IN_PERCENTILES
        self._requests: dict[int, Count] = {}

    def requests(self, status: int):
        counter = self._requests.get(status)
        if counter is None:
            counter = self._requests[status] = Count(HTTP_REQUESTS.labels(self.handler, self.method, str(status)))
        return counter
