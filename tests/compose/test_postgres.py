"""The queues on PostgreSQL (the compose profile `postgres`) on the session's
stack: PostgreSQL, its exporter and the workers started the way `make up
BROKERS=postgres` starts them, every task of each counted in the ledger on
Redis; each one's backlog exported while its worker is down, PostgreSQL's own
metrics scraped (the PostgreSQL dashboard), a fast 503 from each while
PostgreSQL is away, and after its restart every worker taking jobs again with
nothing lost. The services are removed again at the end, so the other compose
tests see the stack they expect."""

import time

import pytest

from lab.queues import BROKERS
from tests.compose.helpers import (
    exported_depth,
    post_tasks,
    producer_ready,
    run_report,
    settled_exactly,
    wait_settled,
    wait_until,
)
from tests.compose.panels import check_panels
from tests.lab import HTTP, new_run

ON_POSTGRES = tuple(b.name for b in BROKERS if b.transport == "postgres")
SERVICES = ("postgres", "postgres-exporter", *ON_POSTGRES)
TASKS = 60
SETTLE_TIMEOUT_S = 300
PANELS_DEADLINE_S = 120  # a bound on a hang, not a wait
THE_OTHER_DASHBOARDS = ("Load", "Queues", "API and event loop", "Redis", "RabbitMQ")
# Queries whose zero is their truth here: they must still return their series.
ZERO_TRUTH = {("PostgreSQL", "Transactions per second", "B"): "no transaction rolls back"}


@pytest.fixture(scope="module")
def postgres(stack):
    try:
        stack.compose("--profile", "postgres", "up", "-d", "--wait", *SERVICES, timeout=600)
        yield stack
    finally:
        stack.compose("--profile", "postgres", "rm", "--stop", "--force", *SERVICES, check=False, timeout=300)


@pytest.mark.parametrize("queue", ON_POSTGRES)
def test_a_queue_on_postgres_runs_every_task_exactly_once(postgres, queue):
    wait_until(lambda: producer_ready(postgres, queue), 120, f"the API's {queue} producer to be ready")
    run = new_run("postgres")
    post_tasks(postgres.api_url, run, {queue: TASKS})
    settled_exactly(postgres, run, TASKS, queue)


@pytest.mark.parametrize("queue", ON_POSTGRES)
def test_its_backlog_is_exported_while_its_worker_is_down(postgres, queue):
    wait_until(lambda: producer_ready(postgres, queue), 120, f"the API's {queue} producer to be ready")
    postgres.compose("stop", queue, timeout=120)
    run = new_run("postgres-backlog")
    try:
        post_tasks(postgres.api_url, run, {queue: TASKS})
        wait_until(
            lambda: exported_depth(postgres, queue) == TASKS,
            60,
            f"the monitor to export a backlog of {TASKS}",
            interval=1,
        )
    finally:
        postgres.compose("start", queue, timeout=300)
    settled_exactly(postgres, run, TASKS, queue)
    wait_until(lambda: exported_depth(postgres, queue) == 0, 60, "the exported backlog to fall to 0", interval=1)


def test_every_postgresql_panel_shows_data_after_a_load(postgres):
    """The PostgreSQL dashboard's queries, each with a non-zero series, while
    tasks keep coming on every queue there until the rates fill their window."""
    for queue in ON_POSTGRES:
        wait_until(lambda q=queue: producer_ready(postgres, q), 120, f"the API's {queue} producer to be ready")
    run = new_run("postgres-panels")
    sent, deadline = 0, time.monotonic() + PANELS_DEADLINE_S
    while True:
        post_tasks(postgres.api_url, run, {queue: 2 for queue in ON_POSTGRES})
        sent += 2
        failures = check_panels(
            postgres.prometheus_url, skip_dashboards=THE_OTHER_DASHBOARDS, window_s=300, zero_truth=ZERO_TRUTH
        )
        if not failures or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert failures == [], "\n".join(failures)
    report = wait_settled(postgres.api_url, run, sent * len(ON_POSTGRES), timeout=SETTLE_TIMEOUT_S, interval=1)
    assert report["totals"]["completed"] == sent * len(ON_POSTGRES), report["totals"]


def test_a_postgres_restart_is_a_fast_503_and_loses_nothing_accepted(postgres):
    for queue in ON_POSTGRES:
        wait_until(lambda q=queue: producer_ready(postgres, q), 120, f"the API's {queue} producer to be ready")
    run = new_run("postgres-restart")
    postgres.compose("stop", "postgres", timeout=120)
    try:
        for queue in ON_POSTGRES:
            # The client's timeout bounds a hang; the pool's wait answers well within it.
            r = HTTP.post(
                f"{postgres.api_url}/api/v1/incr/io/simple/{queue}",
                json={"value": 1},
                headers={"X-Lab-Run": run},
                timeout=10,
            )
            assert r.status_code == 503, (queue, r.status_code, r.text[:300])
            assert not producer_ready(postgres, queue), f"/readyz says {queue} is ready while PostgreSQL is away"
    finally:
        postgres.compose("start", "postgres", timeout=300)
        postgres.wait_healthy("postgres")
    for queue in ON_POSTGRES:
        wait_until(lambda q=queue: producer_ready(postgres, q), 180, f"the API's {queue} producer to be ready again")
    # Every worker takes jobs again by itself: each queue's tasks all run.
    post_tasks(postgres.api_url, run, {queue: TASKS for queue in ON_POSTGRES})
    report = wait_settled(postgres.api_url, run, TASKS * len(ON_POSTGRES), timeout=SETTLE_TIMEOUT_S, interval=1)
    for queue in ON_POSTGRES:
        row = report["queues"][queue]["io/simple"]
        assert (row["enqueued"], row["completed"], row["failed"], row["duplicates"]) == (TASKS, TASKS, 0, 0), row
    # the refused requests enqueued nothing
    assert run_report(postgres.api_url, run)["totals"]["enqueued"] == TASKS * len(ON_POSTGRES)


# Run in the API's container, against the stack's PostgreSQL: a pool of one
# connection, waited for 0.2 s at a time, held until a second request's first
# wait timed out (the pool counts it); released, that request still gets it.
BUSY_POOL = """
import asyncio
from lab.postgres import pool
from lab.settings import get_settings

async def main():
    lab_pool = pool(get_settings().model_copy(update={"redis_timeout_s": 0.2}), max_size=1)
    await lab_pool.open(wait=True, timeout=30)

    async def second():
        async with lab_pool.connection() as conn:
            return (await (await conn.execute("SELECT 1")).fetchone())[0]

    async with lab_pool.connection():
        waiter = asyncio.create_task(second())
        while not lab_pool.get_stats().get("requests_errors"):
            await asyncio.sleep(0.05)
        assert not waiter.done(), waiter
    print("answered", await waiter, "after", lab_pool.get_stats()["requests_errors"], "timed-out waits")
    await lab_pool.close()

asyncio.run(asyncio.wait_for(main(), 120))
"""


def test_a_busy_pool_makes_a_request_wait_its_turn_not_fail(postgres):
    """While PostgreSQL answers, a request that found every connection of the
    API's pool taken waits on (a 503 here would be the pool's, not the broker's)."""
    out = postgres.compose("exec", "-T", "api", "python", "-c", BUSY_POOL, timeout=180).stdout
    assert "answered 1 after" in out, out
