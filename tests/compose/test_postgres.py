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
from tests.compose.broker_checks import (
    SETTLE_TIMEOUT_S,
    backlog_exported_while_worker_down,
    broker_away_is_a_fast_503,
    every_task_runs_once,
    producers_ready,
)
from tests.compose.helpers import post_tasks, wait_settled
from tests.compose.panels import check_panels
from tests.lab import new_run

ON_POSTGRES = tuple(b.name for b in BROKERS if b.transport == "postgres")
SERVICES = ("postgres", "postgres-exporter", *ON_POSTGRES)
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
    every_task_runs_once(postgres, queue, "postgres")


@pytest.mark.parametrize("queue", ON_POSTGRES)
def test_its_backlog_is_exported_while_its_worker_is_down(postgres, queue):
    backlog_exported_while_worker_down(postgres, queue, "postgres")


def test_every_postgresql_panel_shows_data_after_a_load(postgres):
    """The PostgreSQL dashboard's queries, each with a non-zero series, while
    tasks keep coming on every queue there until the rates fill their window."""
    producers_ready(postgres, ON_POSTGRES)
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
    """The pool's wait for a connection answers well within the client's timeout."""
    broker_away_is_a_fast_503(postgres, "postgres", ON_POSTGRES, "postgres")


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
