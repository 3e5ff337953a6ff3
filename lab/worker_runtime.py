"""What every worker process runs beside its queue library: logging, the
/metrics endpoint (lab/metrics_server.py), the event-loop lag watch and the
cgroup metrics, plus the TaskRunner that executes messages."""

import asyncio
import logging

from lab.cgroup import register_cgroup_metrics
from lab.heap import freeze_startup_heap
from lab.loop_lag import start_loop_lag_watch
from lab.metrics import touch_task_series
from lab.metrics_server import MetricsServer, serve_metrics
from lab.protocol import BROKER_QUEUES
from lab.queues import BROKERS
from lab.runner import TaskRunner
from lab.settings import Settings, get_settings

LIBRARY_LOGGERS = tuple(name for b in BROKERS for name in b.loggers)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    level = get_settings().library_log_level
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level)


def service_name(settings: Settings, queue: str) -> str:
    return settings.service_name or queue


def serve_worker_metrics(service: str, settings: Settings) -> MetricsServer | None:
    """/metrics on METRICS_PORT for a worker process, with its container's
    cgroup metrics under `service`; None if the port is taken
    (lab/metrics_server.py)."""
    register_cgroup_metrics(service)
    return serve_metrics(settings.metrics_port)


class WorkerRuntime:
    """Started from the queue library's own startup hook, inside its event loop,
    so /metrics answers only once the worker is really consuming."""

    def __init__(self, settings: Settings, queue: str):
        self.settings = settings
        self.service = service_name(settings, queue)
        self.queue = queue if queue in BROKER_QUEUES else None
        self.runner = TaskRunner(settings)
        self._server: MetricsServer | None = None
        self._lag: asyncio.Task | None = None

    async def start(self) -> None:
        if self.queue:
            touch_task_series([self.queue])
        self._lag = start_loop_lag_watch(self.service, self.settings.loop_lag_interval_s)
        self._server = serve_worker_metrics(self.service, self.settings)
        freeze_startup_heap()  # last: the library's and the lab's start-up stay out of every full collection

    async def stop(self) -> None:
        if self._lag:
            self._lag.cancel()
        if self._server:
            # Off the loop: stop() waits for the server thread's next poll (up to half a second).
            await asyncio.to_thread(self._server.stop)
        await self.runner.close()
