"""What every broker other than Redis must do on the session's stack, one
check each, called by that broker's module (test_rabbitmq.py, test_postgres.py)
for the queues it carries: every task run once and counted, the backlog
exported while the worker is down, and a broker away answered with a fast 503
that enqueues nothing, every worker taking tasks again by itself once it is back."""

from collections.abc import Callable

from tests.compose.helpers import (
    exported_depth,
    post_tasks,
    producer_ready,
    run_report,
    settled_exactly,
    wait_settled,
    wait_until,
)
from tests.lab import HTTP, new_run

TASKS = 60
SETTLE_TIMEOUT_S = 300


def producers_ready(stack, queues: tuple[str, ...], timeout: float = 120, again: str = "") -> None:
    for queue in queues:
        wait_until(lambda q=queue: producer_ready(stack, q), timeout, f"the API's {queue} producer to be ready{again}")


def every_task_runs_once(stack, queue: str, name: str) -> None:
    producers_ready(stack, (queue,))
    run = new_run(name)
    post_tasks(stack.api_url, run, {queue: TASKS})
    settled_exactly(stack, run, TASKS, queue)


def backlog_exported_while_worker_down(
    stack, queue: str, name: str, broker_says: Callable[[], object] | None = None
) -> None:
    """`broker_says`, where given, is also waited for while the worker is down:
    the broker's own metrics of the same backlog."""
    producers_ready(stack, (queue,))
    stack.compose("stop", queue, timeout=120)
    run = new_run(f"{name}-backlog")
    try:
        post_tasks(stack.api_url, run, {queue: TASKS})
        wait_until(
            lambda: exported_depth(stack, queue) == TASKS, 60, f"the monitor to export a backlog of {TASKS}", interval=1
        )
        if broker_says:
            wait_until(broker_says, 60, "the broker's own metrics to report the backlog", interval=1)
    finally:
        stack.compose("start", queue, timeout=300)
    settled_exactly(stack, run, TASKS, queue)
    wait_until(lambda: exported_depth(stack, queue) == 0, 60, "the exported backlog to fall to 0", interval=1)


def broker_away_is_a_fast_503(stack, broker: str, queues: tuple[str, ...], name: str) -> None:
    """The broker's service stopped: each queue's request answered 503 within the
    client's timeout (a bound on a hang), /readyz not ready; started again, every
    queue's tasks all run, and the refused requests enqueued nothing."""
    producers_ready(stack, queues)
    run = new_run(f"{name}-restart")
    stack.compose("stop", broker, timeout=120)
    try:
        for queue in queues:
            r = HTTP.post(
                f"{stack.api_url}/api/v1/incr/io/simple/{queue}",
                json={"value": 1},
                headers={"X-Lab-Run": run},
                timeout=10,
            )
            assert r.status_code == 503, (queue, r.status_code, r.text[:300])
            assert not producer_ready(stack, queue), f"/readyz says {queue} is ready while {broker} is away"
    finally:
        stack.compose("start", broker, timeout=300)
        stack.wait_healthy(broker)
    producers_ready(stack, queues, timeout=180, again=" again")
    post_tasks(stack.api_url, run, {queue: TASKS for queue in queues})
    report = wait_settled(stack.api_url, run, TASKS * len(queues), timeout=SETTLE_TIMEOUT_S, interval=1)
    for queue in queues:
        row = report["queues"][queue]["io/simple"]
        assert (row["enqueued"], row["completed"], row["failed"], row["duplicates"]) == (TASKS, TASKS, 0, 0), row
    assert run_report(stack.api_url, run)["totals"]["enqueued"] == TASKS * len(queues)
