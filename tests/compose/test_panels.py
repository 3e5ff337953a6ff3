"""Every dashboard panel, its template variables set to real values, returns
data from the stack's Prometheus after a load on every queue."""

import os
from pathlib import Path

import pytest

from tests.compose.helpers import QUEUES as ALL_QUEUES
from tests.compose.panels import check_panels, query_panels

pytestmark = pytest.mark.compose

QUEUES = "|".join(ALL_QUEUES)


def test_every_panel_shows_data_after_a_load(stack, loaded_run):
    assert loaded_run["totals"]["pending"] == 0
    # The Load dashboard shows Locust's own metrics: only after a `make load`
    # (test_load runs first). Its series went stale when Locust exited, so look back.
    skip = [] if stack.query("count_over_time(locust_users[15m])") else ["Load"]
    substitutions = {"queue": QUEUES, "kind": "io", "variant": "simple"}
    empty = check_panels(stack.prometheus_url, substitutions, skip_dashboards=skip)
    assert empty == [], f"panels without data: {empty}"

    # The panel -> query listing, for whoever reads the run.
    listing = Path(os.environ.get("LAB_TEST_LOGS", "/tmp/lab-test-logs")) / "panels.txt"
    listing.parent.mkdir(parents=True, exist_ok=True)
    rows = query_panels(stack.prometheus_url, substitutions, skip_dashboards=skip)
    listing.write_text("\n".join(f"{r.title} [{r.ref_id}] {r.series} series: {r.expr}" for r in rows) + "\n")
