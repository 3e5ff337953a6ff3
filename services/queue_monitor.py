"""Queue monitor: exports `lab_queue_depth{queue}` for every broker queue.

It runs as a process of its own, so the backlog of a queue keeps being
reported while that queue's worker is down (or being throttled to a crawl).
The `background` queue lives inside the API process; the API reports it.

Run: python -m services.queue_monitor   (metrics on METRICS_PORT, default 9000)
"""

import asyncio
import logging
import signal

from lab.metrics import QUEUE_DEPTH
from lab.queues import BROKER_NAMES, adapter
from lab.redis_clients import async_client
from lab.settings import get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

log = logging.getLogger("lab.queue_monitor")


async def sample(redis) -> None:
    for queue in BROKER_NAMES:
        gauge = QUEUE_DEPTH.labels(queue=queue)
        try:
            gauge.set(await adapter(queue).depth(redis))
        except Exception as exc:  # Redis down: say "unknown", never a stale number
            gauge.set(float("nan"))
            log.warning("depth of %s: %s", queue, exc)


async def run() -> None:
    settings = get_settings()
    redis = async_client(settings)
    runtime = WorkerRuntime(settings, settings.service_name or "queue-monitor")
    await runtime.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    while not stop.is_set():
        await sample(redis)
        try:
            await asyncio.wait_for(stop.wait(), settings.queue_depth_interval_s)
        except TimeoutError:
            pass
    await runtime.stop()
    await redis.aclose()


def main() -> None:
    setup_logging()
    asyncio.run(run())


if __name__ == "__main__":
    main()
