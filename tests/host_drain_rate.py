"""How fast each queue's worker empties a backlog on the host: N io/simple tasks
are queued while no worker runs, then one worker starts and the time until the
last one settles is measured. One worker process, default concurrency, no
container limits, a Redis of its own (the tests' harness of real processes).

    uv run python -m tests.host_drain_rate [--count 2000] [--queues "arq saq ..."] (default: every broker queue)
                                           [--set ARQ_POLL_DELAY=0.05 ...]

A measurement, not a test: it sits beside the harness it uses.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from lab.settings import Settings
from labctl.queues import QUEUES
from labctl.render.console import Console
from labctl.render.table import markdown_table
from tests.lab import SHORTENED, RedisServer, ledger, new_run, post_tasks, start_api, start_worker, wait_settled

# What tests.lab shortens, back at the lab's defaults.
LIBRARY_DEFAULTS = {knob: str(Settings.model_fields[knob.lower()].default) for knob in SHORTENED}


def measure(queue: str, count: int, knobs: dict[str, str]) -> dict[str, Any]:
    redis = RedisServer().start()
    api = start_api(redis.url, name=f"api-drain-{queue}")
    try:
        run = new_run(f"drain-{queue}")
        responses = post_tasks(api.url, run, queue, "io/simple", count, concurrency=50)
        assert all(r.status_code == 202 for r in responses)
        worker = start_worker(queue, redis.url, name=f"{queue}-drain", **knobs)
        started = time.time()
        try:
            report = wait_settled(api.url, run, count, timeout=1800)
        finally:
            worker.stop()
        seconds = report["last_settled_at"] - started
        totals = (ledger(api.url, run) or {}).get("totals", {})
        return {
            "queue": queue,
            "count": count,
            "seconds": round(seconds, 2),
            "tasks_per_s": round(count / seconds, 1),
            **totals,
        }
    finally:
        api.stop()
        redis.stop()


def host_drain_rates(queues: list[str], count: int, settings: list[str], ui: Console) -> None:
    knobs = {**LIBRARY_DEFAULTS, **dict(kv.split("=", 1) for kv in settings)}
    ui.say(f"knobs: {knobs}")
    rows = []
    for queue in queues:
        r = measure(queue, count, knobs)
        rows.append(
            [r["queue"], r["count"], r["seconds"], r["tasks_per_s"], r["completed"], r["duplicates"], r["failed"]]
        )
    ui.say(
        markdown_table(("queue", "tasks", "seconds", "tasks/s", "completed", "duplicates", "failed"), rows, {"queue"})
    )


def main(
    count: Annotated[int, typer.Option(help="tasks queued before the worker starts")] = 2000,
    queues: Annotated[str, typer.Option(help="broker queues (default: every one)")] = "",
    set_: Annotated[list[str] | None, typer.Option("--set", help="extra worker settings, KNOB=VALUE")] = None,
) -> None:
    host_drain_rates(queues.split() or list(QUEUES[1:]), count, set_ or [], Console())


if __name__ == "__main__":
    typer.run(main)
