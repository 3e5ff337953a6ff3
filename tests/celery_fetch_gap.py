"""How often a Celery worker on Redis, stopped with a signal in the middle of a
backlog, loses the message it was fetching. kombu's Redis transport pops a message
(BRPOP) and only then records it in its hash of unacknowledged messages, in a
second command: a worker that dies in between takes the message with it
(celery/celery#7950). lab/queues.py counts it as Celery's `lost_in_fetch`.

Each round queues a backlog of short io/simple tasks with no worker running,
starts one worker, signals it (SIGKILL: its whole process group, as a node's
death would) at a random moment once tasks complete, notes what Redis holds
(the list and the unacknowledged hash), and starts a second worker after the
visibility timeout (2 x TASK_TIMEOUT_S) so that its first restore takes every
unacknowledged message back. A task still pending once the second worker has
emptied the queue was lost. A Redis of its own, the tests' harness of real
processes, no container limits.

    uv run python -m tests.celery_fetch_gap [--rounds 25] [--signal KILL|TERM] [--backlog 1000]

A measurement, not a test: it sits beside the harness it uses.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from typing import Annotated, Any

import redis
import typer

from tests.lab import RedisServer, ledger, new_run, post_tasks, queue_depth, start_api, start_worker, wait_until

QUEUE, UNACKED = "celery", "unacked"  # kombu's hash of the messages delivered and not acknowledged
TASK_TIMEOUT_S = 5  # the visibility timeout is twice it
IO_LATENCY_MS = 10  # short tasks: the worker fetches all the time
QUIET_S = 40  # a round ends when nothing more completes for this long (or nothing is pending)


def totals(api_url: str, run: str) -> dict[str, int]:
    return (ledger(api_url, run) or {"totals": {}})["totals"]


def stop(worker, sig: signal.Signals) -> None:
    if sig is signal.SIGKILL:
        os.killpg(worker.proc.pid, sig)  # the pool's children die with it
    else:
        worker.signal(sig)  # Celery's warm shutdown
    worker.proc.wait(60)


def settle(api_url: str, run: str) -> dict[str, int]:
    """The run's totals once nothing is pending, or once nothing has completed for QUIET_S."""
    last = {"completed": -1, "at": time.monotonic()}

    def quiet() -> dict[str, int] | None:
        now = totals(api_url, run)
        if now["pending"] == 0:
            return now
        if now["completed"] != last["completed"]:
            last.update(completed=now["completed"], at=time.monotonic())
        return now if time.monotonic() - last["at"] > QUIET_S else None

    return wait_until(quiet, 600, "the run to settle or stall", interval=0.5)


def one_round(api, server: RedisServer, client: redis.Redis, i: int, sig: signal.Signals, backlog: int) -> dict:
    run = new_run(f"fetch-gap-{i}")
    post_tasks(api.url, run, QUEUE, "io/simple", backlog)
    worker = start_worker(QUEUE, server.url, name=f"celery-gap-{i}", TASK_TIMEOUT_S=TASK_TIMEOUT_S,
                          IO_LATENCY_MS=IO_LATENCY_MS)  # fmt: skip
    wait_until(lambda: totals(api.url, run).get("completed", 0) >= 20, 60, "tasks under way")
    time.sleep(random.uniform(0, 1.0))
    stop(worker, sig)
    at_stop = totals(api.url, run)
    held = {"listed": int(queue_depth(server.url, QUEUE)), "unacked": client.hlen(UNACKED)}
    time.sleep(2 * TASK_TIMEOUT_S + 1)  # past the visibility timeout: the next worker's first restore takes all back
    second = start_worker(QUEUE, server.url, name=f"celery-gap-{i}-b", TASK_TIMEOUT_S=TASK_TIMEOUT_S)
    try:
        end = settle(api.url, run)
    finally:
        second.stop()
    return {
        "round": i,
        "pending_at_stop": at_stop["pending"],
        "listed_at_stop": held["listed"],
        "unacked_at_stop": held["unacked"],
        "lost": end["pending"],
        "duplicates": end["duplicates"],
        "left_in_redis": int(queue_depth(server.url, QUEUE)) + client.hlen(UNACKED),
    }


def main(
    rounds: Annotated[int, typer.Option(min=1, help="workers stopped, one a round")] = 25,
    sig: Annotated[str, typer.Option("--signal", help="KILL or TERM")] = "KILL",
    backlog: Annotated[int, typer.Option(min=100, help="tasks queued a round")] = 1000,
    seed: Annotated[int, typer.Option(help="for the moments of the stops")] = 20261201,
) -> None:
    random.seed(seed)
    signum = signal.Signals[f"SIG{sig.upper()}"]
    server = RedisServer().start()
    api = start_api(server.url, name="api-fetch-gap", TASK_TIMEOUT_S=TASK_TIMEOUT_S)
    client = redis.Redis.from_url(server.url)
    rows: list[dict[str, Any]] = []
    try:
        for i in range(rounds):
            rows.append(one_round(api, server, client, i, signum, backlog))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        api.stop()
        server.stop()
    lost = [r["lost"] for r in rows]
    print(f"{signum.name}: {sum(1 for n in lost if n)} of {len(rows)} rounds lost a task; "
          f"{sum(lost)} tasks lost, at most {max(lost)} a round")  # fmt: skip


if __name__ == "__main__":
    typer.run(main)
