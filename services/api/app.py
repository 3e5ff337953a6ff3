"""The FastAPI application: `uvicorn services.api.app:app`."""

import asyncio
import logging
from contextlib import asynccontextmanager
from functools import partial

import anyio.to_thread
from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from lab.cgroup import register_cgroup_metrics
from lab.heap import freeze_startup_heap
from lab.ledger import Ledger
from lab.loop_lag import start_loop_lag_watch
from lab.metrics import ENQUEUED, flush, touch_task_series
from lab.protocol import ENDPOINTS, Queue
from lab.queues import BROKER_NAMES, adapter
from lab.redis_clients import async_client
from lab.runner import TaskRunner
from lab.settings import Settings, get_settings
from services.api import errors
from services.api.background import BackgroundQueue
from services.api.experiments import clients_for
from services.api.experiments import router as experiments_router
from services.api.http_metrics import HttpMetrics
from services.api.metrics_server import serve_metrics_in_thread
from services.api.outbox import Outbox
from services.api.routes import publish_after_response, router

log = logging.getLogger("lab.api")
# ENQUEUE_MODE=after-response: tasks published at once, at most (a publish is a
# Redis round trip or two: a few are enough to keep up with what a CPU limit
# lets the API answer).
AFTER_RESPONSE_PUBLISHERS = 16


class Lab:
    """What the routes need, created once per API process."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = async_client(settings)
        self.ledger = Ledger(self.redis)
        self.background = BackgroundQueue(TaskRunner(settings))
        self.outbox = Outbox(partial(publish_after_response, self), AFTER_RESPONSE_PUBLISHERS)
        self.upstream_sync, self.upstream_async = clients_for(settings)
        self.producers: dict[Queue, object] = {}
        self._lock = asyncio.Lock()

    async def producer(self, queue: Queue):
        """The queue's producer, connected on first use, so the API starts (and
        reports not-ready) even while Redis is down."""
        if queue not in self.producers:
            async with self._lock:
                if queue not in self.producers:
                    producer = adapter(queue).Producer(self.settings)
                    await producer.start()
                    self.producers[queue] = producer
        return self.producers[queue]

    async def close(self) -> None:
        await self.outbox.flush(self.settings.shutdown_grace_s)
        try:  # the enqueue counts still in memory (a stopped Redis loses them: logged)
            await asyncio.wait_for(self.ledger.enqueues.written(), self.settings.shutdown_grace_s)
        except TimeoutError:
            log.warning("enqueue counts not written before shutdown: Redis unreachable")
        for producer in self.producers.values():
            try:
                await producer.close()
            except Exception:
                log.exception("closing a producer")
        await self.background.runner.close()
        flush()  # with API_WORKERS > 1, this process's last updates into its files, which outlive it
        await self.upstream_async.aclose()
        self.upstream_sync.close()
        await self.redis.aclose()


@asynccontextmanager
async def lifespan(app: FastAPI):
    settings = get_settings()
    service = settings.service_name or "api"
    app.state.lab = Lab(settings)
    for name in BROKER_NAMES:  # every queue library imported now, not in the first request to it
        adapter(name)
    # The threadpool that runs `def` handlers and run_in_threadpool calls.
    anyio.to_thread.current_default_thread_limiter().total_tokens = settings.threadpool_tokens
    register_cgroup_metrics(service)
    touch_task_series([Queue.background])
    for queue in Queue:
        for kind, variant in ENDPOINTS:
            ENQUEUED.labels(queue=queue, kind=kind, variant=variant)
    lag = start_loop_lag_watch(service, settings.loop_lag_interval_s)
    metrics_server = serve_metrics_in_thread(settings.metrics_port)
    freeze_startup_heap()  # last: what start-up made stays out of every full collection
    try:
        yield
    finally:
        lag.cancel()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        await app.state.lab.close()


def metrics() -> Response:
    """Everything in REGISTRY: this process's metrics and the cgroup's, or, with
    API_WORKERS > 1, every server process's samples added up."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


def create_app() -> FastAPI:
    settings = get_settings()
    app = FastAPI(
        title="FastAPI task-queue lab",
        description="Enqueue the same tasks on every task queue and account for every one.",
        lifespan=lifespan,
    )
    errors.install(app)
    # The routes join the app's own table: an included router is matched
    # through a layer of its own on every request (FastAPI 0.165), which cost
    # as much CPU as a Redis round trip. The enqueue route comes first.
    for routes in (router, experiments_router):
        app.router.routes.extend(routes.routes)
    app.add_middleware(HttpMetrics)
    app.add_api_route("/metrics", metrics, include_in_schema=False)
    app.add_middleware(errors.BodySizeLimit, limit=settings.max_body_bytes)
    return app


app = create_app()
