"""Every query of every dashboard panel, its template variables set to real
values, returns a series with a non-zero value from the stack's Prometheus after
loads that exercise it: the session's task run on every queue, its
`make load worker=arq` (the Load dashboard: never skipped), a few refused requests (the
4xx panel) and a Redis memory limit (the limit's line). Queries whose zero is
their truth (failures, duplicates, OOM kills: tests.compose.panels.ZERO_TRUTH)
must still return their series."""

import os
import time
from pathlib import Path

import httpx

from tests.compose.helpers import QUEUES as ALL_QUEUES
from tests.compose.panels import check_panels, query_panels

QUEUES = "|".join(ALL_QUEUES)
STEP_S = 2  # the rules' evaluation interval: no short burst falls between two steps


def refused_requests(api_url: str, seconds: float = 6) -> None:
    """Bad bodies (422) spread over a few rule evaluations, for the 4xx query."""
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=api_url, timeout=10) as client:
        while time.monotonic() < deadline:
            r = client.post(f"/api/v1/incr/io/simple/{ALL_QUEUES[0]}", json={"value": "not a number"})
            assert r.status_code == 422, r.text
            time.sleep(0.5)


def test_every_panel_query_shows_data_after_a_load(stack, loaded_run, arq_queue_run):
    assert loaded_run["totals"]["pending"] == 0
    since = min(arq_queue_run["record"]["load_started_at"], loaded_run["first_enqueued_at"])
    stack.compose("exec", "-T", "redis", "redis-cli", "config", "set", "maxmemory", "1gb")
    try:
        refused_requests(stack.api_url)
        time.sleep(6)  # two scrapes and rule evaluations after the last request
    finally:
        stack.compose("exec", "-T", "redis", "redis-cli", "config", "set", "maxmemory", "0")
    window_s = int(time.time() - since) + 60
    substitutions = {"queue": QUEUES, "kind": "io", "variant": "simple"}
    rows = query_panels(stack.prometheus_url, substitutions, window_s=window_s, step_s=STEP_S)

    # The query listing, for whoever reads the run (written before the verdict).
    listing = Path(os.environ.get("LAB_TEST_LOGS", "/tmp/lab-test-logs")) / "panels.txt"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(
        "\n".join(f"{r.title} [{r.ref_id}] {r.series} series, {r.nonzero} non-zero: {r.expr}" for r in rows) + "\n"
    )
    assert {r.dashboard for r in rows} >= {"Load", "Queues", "API and event loop", "Redis"}
    failures = check_panels(stack.prometheus_url, substitutions, window_s=window_s, step_s=STEP_S)
    assert failures == [], "queries without data (listing: " + str(listing) + "):\n" + "\n".join(failures)
