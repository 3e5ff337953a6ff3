"""The FastAPI application, composed: `uvicorn services.api.app:app`.

The lifespan makes the process's LabState (services/api/state.py) and starts
what runs beside the routes; create_app() joins the routes (services/api/routes/,
under API_V1 but health and metrics), the error handlers and the middleware."""

import inspect
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from lab.cgroup import register_cgroup_metrics
from lab.heap import freeze_startup_heap
from lab.loop_lag import start_loop_lag_watch
from lab.metrics import ENQUEUED, touch_task_series
from lab.metrics_server import serve_metrics
from lab.protocol import ENDPOINTS, Queue
from lab.settings import get_settings
from services.api import errors
from services.api.background import QUEUE as BACKGROUND
from services.api.enqueue import publish_after_response
from services.api.http_metrics import HttpMetrics
from services.api.routes import clients, health, metrics, payload, runs, tasks, upstream
from services.api.state import LabState

API_V1 = "/api/v1"


@asynccontextmanager
async def lifespan(app: FastAPI):
    settings = get_settings()
    service = settings.service_name or "api"
    # A queue's library is imported, off the event loop, when the queue is first
    # used or readied (GET /readyz?queues=...: make load asks before its load),
    # not here: the API then holds only the libraries of the queues it serves
    # (each costs it several MB, file pages of its own charged to its cgroup too).
    app.state.lab = LabState(settings, publish_after_response)
    # The threadpool that runs `def` handlers and run_in_threadpool calls.
    anyio.to_thread.current_default_thread_limiter().total_tokens = settings.threadpool_tokens
    register_cgroup_metrics(service)
    touch_task_series([BACKGROUND])
    for queue in Queue:
        for kind, variant in ENDPOINTS:
            ENQUEUED.labels(queue=queue, kind=kind, variant=variant)
    lag = start_loop_lag_watch(service, settings.loop_lag_interval_s)
    metrics_server = serve_metrics(settings.metrics_port, shared=settings.api_workers > 1)
    freeze_startup_heap()  # last: what start-up made stays out of every full collection
    try:
        yield
    finally:
        lag.cancel()
        if metrics_server is not None:
            metrics_server.stop()
        await app.state.lab.close()


# What add_api_route takes that an APIRoute keeps under the same name.
_ROUTE_SETTINGS = [
    name
    for name in inspect.signature(APIRouter.add_api_route).parameters
    if name not in ("self", "path", "endpoint", "route_class_override")
]


def under(prefix: str, router: APIRouter) -> list[BaseRoute]:
    """The routes of `router` with `prefix` before their paths, made as
    include_router would make them, for the app's own route table. Fast path:
    not include_router, whose router is matched through a layer of its own on
    every request (docs/hot-path.md)."""
    prefixed = APIRouter(prefix=prefix)
    for route in router.routes:
        assert isinstance(route, APIRoute), route
        settings = {name: getattr(route, name) for name in _ROUTE_SETTINGS if hasattr(route, name)}
        prefixed.add_api_route(route.path, route.endpoint, **settings)
    return prefixed.routes


def create_app() -> FastAPI:
    settings = get_settings()
    app = FastAPI(
        title="FastAPI task-queue lab",
        description="Enqueue the same tasks on every task queue and account for every one.",
        lifespan=lifespan,
    )
    errors.install(app)
    # The enqueue route comes first: the table is matched in order.
    app.router.routes.extend(under(API_V1, tasks.router))
    app.router.routes.extend(under(API_V1, runs.router))
    app.router.routes.extend(health.router.routes)
    for experiment in (upstream, clients, payload):
        app.router.routes.extend(under(API_V1, experiment.router))
    app.router.routes.extend(metrics.router.routes)
    app.add_middleware(HttpMetrics)
    app.add_middleware(errors.BodySizeLimit, limit=settings.max_body_bytes)
    return app


app = create_app()
