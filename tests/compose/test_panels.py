"""Every query of every dashboard panel, its template variables set to real
values, returns a series with a non-zero value from the stack's Prometheus after
loads that exercise it: the session's task run on every queue, its
`make load worker=arq` (the Load dashboard: never skipped), Redis frozen for a
moment under a few requests (their fast 503s: the enqueue-error panels), a Redis
memory limit (the limit's line), and refused requests and Celery tasks sent round
after round until the panels show them over several scrapes (the 4xx panel,
Flower's events): the test waits for the panels, not for a time.
Queries whose zero is their truth (failures, duplicates: tests.compose.panels.ZERO_TRUTH)
must still return their series, and a zero-filled one (`X or Y * 0`) from X
itself, so that the fill cannot stand in for a query that reads nothing. The
restart and OOM-kill panels are shown non-zero by tests/compose/test_chaos.py, the
RabbitMQ dashboard's by tests/compose/test_rabbitmq.py, the PostgreSQL dashboard's by
tests/compose/test_postgres.py."""

import os
import time
from pathlib import Path

import httpx

from tests.compose.helpers import QUEUES as ALL_QUEUES
from tests.compose.panels import check_panels, query_panels

QUEUES = "|".join(ALL_QUEUES)
# The dashboards of the brokers the session's stack does not run (their profiles):
# tests/compose/test_rabbitmq.py proves RabbitMQ's, tests/compose/test_postgres.py PostgreSQL's.
OTHER_BROKERS = ("RabbitMQ", "PostgreSQL")
STEP_S = 2  # the rules' evaluation interval: no short burst falls between two steps


# How long the panels may take to show what was sent: a bound on a hang, not a wait.
PANELS_DEADLINE_S = 120
FROZEN_REQUESTS = 5


def spread_requests(client: httpx.Client) -> None:
    """One round of what must show over several scrapes: a bad body (422), for the 4xx
    query, and a Celery task, so that Flower's event counter, scraped every 5 s, rises
    between two of its scrapes (a counter born with all of a short burst in it never shows
    an increase to a rate). Sent round after round until the panels show them."""
    r = client.post(f"/api/v1/incr/io/simple/{ALL_QUEUES[0]}", json={"value": "not a number"})
    assert r.status_code == 422, r.text
    r = client.post("/api/v1/incr/io/simple/celery", json={"value": 1})
    assert r.status_code == 202, r.text


def requests_while_redis_is_frozen(stack) -> list[int]:
    """Redis frozen (`docker pause`) while a few tasks are POSTed: the API answers
    each with a fast 503 and counts an enqueue error; then Redis thaws."""
    # Thawed and healthy again after, as found, for any `up --wait` after this test.
    with stack.paused("redis"), httpx.Client(base_url=stack.api_url, timeout=10) as client:
        return [
            client.post("/api/v1/incr/io/simple/faststream", json={"value": 1}).status_code
            for _ in range(FROZEN_REQUESTS)
        ]


def test_every_panel_query_shows_data_after_a_load(stack, loaded_run, arq_queue_run):
    assert loaded_run["totals"]["pending"] == 0
    since = min(arq_queue_run["record"]["load_started_at"], loaded_run["first_enqueued_at"])
    substitutions = {"queue": QUEUES, "kind": "io", "variant": "simple"}

    def window_s() -> int:
        return int(time.time() - since) + 60

    # Redis with a memory limit (the limit's line) until the panels have read it.
    stack.compose("exec", "-T", "redis", "redis-cli", "config", "set", "maxmemory", "1gb")
    try:
        statuses = requests_while_redis_is_frozen(stack)
        assert set(statuses) == {503}, statuses
        deadline = time.monotonic() + PANELS_DEADLINE_S
        headers = {"X-Lab-Run": "compose-panels-spread"}
        with httpx.Client(base_url=stack.api_url, timeout=10, headers=headers) as client:
            while True:
                spread_requests(client)
                failures = check_panels(
                    stack.prometheus_url, substitutions, OTHER_BROKERS, window_s=window_s(), step_s=STEP_S
                )
                if not failures or time.monotonic() > deadline:
                    break
                time.sleep(1)
    finally:
        stack.compose("exec", "-T", "redis", "redis-cli", "config", "set", "maxmemory", "0")

    # The query listing, for whoever reads the run (written before the verdict).
    rows = query_panels(stack.prometheus_url, substitutions, OTHER_BROKERS, window_s=window_s(), step_s=STEP_S)
    listing = Path(os.environ.get("LAB_TEST_LOGS", "/tmp/lab-test-logs")) / "panels.txt"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(
        "\n".join(f"{r.title} [{r.ref_id}] {r.series} series, {r.nonzero} non-zero: {r.expr}" for r in rows) + "\n"
    )
    assert {r.dashboard for r in rows} >= {"Load", "Queues", "API and event loop", "Redis"}
    assert failures == [], "queries without data (listing: " + str(listing) + "):\n" + "\n".join(failures)
