"""Measure how late the event loop runs a timer: the lag every handler suffers."""

import asyncio
from collections import deque

from lab.metrics import EVENT_LOOP_LAG

WINDOW_S = 5.0  # report the worst lag over this window, so a scrape never misses a stall


async def watch_loop_lag(service: str, interval_s: float) -> None:
    gauge = EVENT_LOOP_LAG.labels(service=service)
    samples: deque[tuple[float, float]] = deque()
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(interval_s)
        now = loop.time()
        samples.append((now, max(0.0, now - start - interval_s)))
        while samples and samples[0][0] < now - WINDOW_S:
            samples.popleft()
        gauge.set(max(lag for _, lag in samples))


def start_loop_lag_watch(service: str, interval_s: float) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(watch_loop_lag(service, interval_s), name="loop-lag")
