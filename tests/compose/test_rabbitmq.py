"""The queues on RabbitMQ (the compose profile `rabbitmq`) on the session's stack:
the broker and the workers started the way `make up BROKERS=rabbitmq` starts them,
every task of each counted in the ledger on Redis; each one's backlog exported
while its worker is down, RabbitMQ's own metrics scraped (the RabbitMQ
dashboard), a fast 503 from each while RabbitMQ is away, and after its restart
every worker consuming again with nothing lost. The services are removed again at the end, so the other compose tests
see the stack they expect."""

import time

import pytest

from lab.queues import BROKERS
from tests.compose.broker_checks import (
    TASKS,
    backlog_exported_while_worker_down,
    broker_away_is_a_fast_503,
    every_task_runs_once,
    producers_ready,
)
from tests.compose.helpers import post_tasks, settled_exactly, wait_until
from tests.compose.panels import check_panels
from tests.lab import new_run

QUEUE = "celery-rabbitmq"
ON_RABBITMQ = tuple(b.name for b in BROKERS if b.transport == "rabbitmq")
SERVICES = ("rabbitmq", *ON_RABBITMQ)
PANELS_DEADLINE_S = 120  # a bound on a hang, not a wait
SLOW_TASK_MS = 1000  # each task's awaited sleep in the panels test
THE_OTHER_DASHBOARDS = ("Load", "Queues", "API and event loop", "Redis", "PostgreSQL")


@pytest.fixture(scope="module")
def rabbitmq(stack):
    try:
        stack.compose("--profile", "rabbitmq", "up", "-d", "--wait", *SERVICES, timeout=600)
        yield stack
    finally:
        stack.compose("--profile", "rabbitmq", "rm", "--stop", "--force", *SERVICES, check=False, timeout=300)


def ready_messages(stack) -> float | None:
    result = stack.query('sum(rabbitmq_queue_messages_ready{job="rabbitmq"})')
    return float(result[0]["value"][1]) if result else None


@pytest.mark.parametrize("queue", ON_RABBITMQ)
def test_a_queue_on_rabbitmq_runs_every_task_exactly_once(rabbitmq, queue):
    every_task_runs_once(rabbitmq, queue, "rabbitmq")


@pytest.mark.parametrize("queue", ON_RABBITMQ)
def test_its_backlog_is_exported_while_its_worker_is_down(rabbitmq, queue):
    # RabbitMQ's Prometheus plugin, scraped as the job `rabbitmq`, says the same: what its panels read.
    backlog_exported_while_worker_down(rabbitmq, queue, "rabbitmq", lambda: ready_messages(rabbitmq) == TASKS)


def test_every_rabbitmq_panel_shows_data_after_a_load(rabbitmq):
    """The RabbitMQ dashboard's queries, each with a non-zero series: a backlog
    built while the worker is stopped (ready messages), then drained by a
    worker whose tasks each wait IO_LATENCY_MS, so it holds a full prefetch of
    delivered, unacknowledged messages for as long as the backlog lasts,
    whatever the machine's speed (the plugin samples its queues every few
    seconds). Tasks keep coming while the rates fill their window."""
    producers_ready(rabbitmq, (QUEUE,))
    run = new_run("rabbitmq-panels")
    rabbitmq.compose("stop", QUEUE, timeout=120)
    try:
        post_tasks(rabbitmq.api_url, run, {QUEUE: TASKS})
        wait_until(lambda: ready_messages(rabbitmq), 60, "RabbitMQ's plugin to report ready messages", interval=1)
    finally:
        worker_with(rabbitmq, IO_LATENCY_MS=str(SLOW_TASK_MS))
    sent, deadline = TASKS, time.monotonic() + PANELS_DEADLINE_S
    try:
        while True:
            post_tasks(rabbitmq.api_url, run, {QUEUE: 2})
            sent += 2
            failures = check_panels(
                rabbitmq.prometheus_url, skip_dashboards=THE_OTHER_DASHBOARDS, window_s=300, zero_truth={}
            )
            if not failures or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert failures == [], "\n".join(failures)
        settled_exactly(rabbitmq, run, sent, QUEUE)
    finally:
        worker_with(rabbitmq)  # as the other tests expect it


def worker_with(stack, **variables: str) -> None:
    """The queue's worker (re)created with these compose variables, the rest as started."""
    stack.compose("--profile", "rabbitmq", "up", "-d", "--wait", QUEUE, timeout=300, variables=variables)


def test_a_rabbitmq_restart_is_a_fast_503_and_loses_nothing_accepted(rabbitmq):
    """The breaker answers well within the client's timeout."""
    broker_away_is_a_fast_503(rabbitmq, "rabbitmq", ON_RABBITMQ, "rabbitmq")
