"""What one Prometheus scrape costs each lab container, in CPU (docs/metrics.md).

    uv run python -m labctl scrape-cost [--scrapes 100] [--idle-s 5] [service ...]

For each service (default: the API and every queue's worker), on the host of
a running `make up` (Linux: it reaches the containers' addresses and reads
their cgroups): the container's CPU over --idle-s untouched, then over
--scrapes scrapes of METRICS_PORT in a row with Prometheus' request headers;
the idle rate is subtracted. Prometheus itself keeps scraping meanwhile: pause
it (`docker compose pause prometheus`) for steadier figures.
"""

from __future__ import annotations

import time
import urllib.request

from labctl.platform import docker
from labctl.platform.cgroups import cpu_seconds
from labctl.platform.compose import Compose
from labctl.render.console import Console

# What Prometheus sends (2.x and 3.x offer OpenMetrics first and ask for gzip).
HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


def scrape_cost_ms(container_id: str, scrapes: int, idle_s: float, port: int = 9000) -> float:
    """CPU milliseconds one scrape costs the container, its idle use subtracted."""
    request = urllib.request.Request(f"http://{docker.address(container_id)}:{port}/metrics", headers=HEADERS)

    def cpu() -> float:
        return cpu_seconds(container_id) or 0.0

    before = cpu()
    time.sleep(idle_s)
    idle_rate = (cpu() - before) / idle_s
    before, began = cpu(), time.monotonic()
    for _ in range(scrapes):
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
    elapsed = time.monotonic() - began
    return (cpu() - before - idle_rate * elapsed) / scrapes * 1000


def scrape_costs(services: list[str], scrapes: int, idle_s: float, ui: Console) -> int:
    compose = Compose()
    for service in services:
        ids = compose.ids(service)
        if not ids:
            ui.say(f"{service:12s} not running")
            continue
        ui.say(f"{service:12s} {scrape_cost_ms(ids[0], scrapes, idle_s):6.2f} ms of CPU a scrape")
    return 0
