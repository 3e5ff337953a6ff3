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


async def sample(redis, failing: dict[str, str], timeout: float) -> None:
    """Every queue at once, each bounded by `timeout`: a broker that does not
    answer leaves the others' samples on time. failing: each queue's last
    error, so an outage is logged as it starts and ends, not every second."""
    await asyncio.gather(*(sample_queue(queue, redis, failing, timeout) for queue in BROKER_NAMES))


async def sample_queue(queue: str, redis, failing: dict[str, str], timeout: float) -> None:
    gauge = QUEUE_DEPTH.labels(queue=queue)
    try:
        gauge.set(await asyncio.wait_for(adapter(queue).depth(redis), timeout))
        if failing.pop(queue, None) is not None:
            log.warning("depth of %s: answers again", queue)
    except Exception as exc:  # the broker down: say "unknown", never a stale number
        gauge.set(float("nan"))
        error = f"{type(exc).__name__}: {exc or f'no answer within {timeout:g} s'}"
        if failing.get(queue) != error:
            log.warning("depth of %s: %s", queue, error)
        failing[queue] = error


async def run() -> None:
    settings = get_settings()
    redis = async_client(settings)
    for queue in BROKER_NAMES:  # the libraries imported before the first timed sample
        adapter(queue)
    runtime = WorkerRuntime(settings, settings.service_name or "queue-monitor")
    await runtime.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    failing: dict[str, str] = {}
    while not stop.is_set():
        await sample(redis, failing, 2 * settings.redis_timeout_s)
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
