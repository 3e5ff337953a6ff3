"""What one Prometheus scrape costs each lab container, in CPU (docs/metrics.md).

    uv run python -m scripts.scrape_cost [--scrapes 100] [--idle-s 5] [service ...]

For each service (default: the API and every queue's worker), on the host of
a running `make up` (Linux: it reaches the containers' addresses and reads
their cgroups): the container's CPU over --idle-s untouched, then over
--scrapes scrapes of METRICS_PORT in a row with Prometheus' request headers;
the idle rate is subtracted. Prometheus itself keeps scraping meanwhile: pause
it (`docker compose pause prometheus`) for steadier figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request

from lab.queues import BROKERS
from scripts.bench import cpu_seconds
from scripts.compose import Compose

# What Prometheus sends (2.x and 3.x offer OpenMetrics first and ask for gzip).
HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


def address(container_id: str) -> str:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[0]


def scrape_cost_ms(container_id: str, scrapes: int, idle_s: float, port: int = 9000) -> float:
    """CPU milliseconds one scrape costs the container, its idle use subtracted."""
    request = urllib.request.Request(f"http://{address(container_id)}:{port}/metrics", headers=HEADERS)

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("services", nargs="*", default=["api", *(b.name for b in BROKERS)])
    parser.add_argument("--scrapes", type=int, default=100)
    parser.add_argument("--idle-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    compose = Compose()
    for service in args.services:
        ids = compose.ids(service)
        if not ids:
            print(f"{service:12s} not running", file=sys.stderr)
            continue
        print(f"{service:12s} {scrape_cost_ms(ids[0], args.scrapes, args.idle_s):6.2f} ms of CPU a scrape", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
