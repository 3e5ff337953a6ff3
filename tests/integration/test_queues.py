"""Every queue runs every task shape, and every task is accounted for: the
ledger is exact and the executing process's /metrics agree with it, the
library's own metrics too where it has an exporter."""

import pytest

from lab.protocol import ENDPOINTS
from tests.lab import HOST_QUEUES, new_run, post_tasks, wait_settled, wait_until

CASES = [(q, f"{k}/{v}") for q in HOST_QUEUES for k, v in ENDPOINTS]
COUNT = {"io/simple": 100}  # the rest: 30 each
VALUE = 3
# The libraries' own exporters (Dramatiq's and taskiq's Prometheus middleware),
# served on the worker's /metrics: their counts are not per task shape.
LIBRARY_COUNTS = {
    "dramatiq": (
        {"queue_name": "lab", "actor_name": "lab_task"},
        ("dramatiq_messages_total", "dramatiq_message_duration_milliseconds_count"),
    ),
    "taskiq": ({"task_name": "lab_task"}, ("received_tasks_total", "success_tasks_total", "execution_time_count")),
}


@pytest.mark.parametrize("queue,endpoint", CASES, ids=[f"{q}-{e}" for q, e in CASES])
def test_every_task_completes_once(lab, queue, endpoint):
    kind, variant = endpoint.split("/")
    count = COUNT.get(endpoint, 30)
    labels = {"queue": queue, "kind": kind, "variant": variant}
    runner = lab.process_for(queue)
    before, api_before = runner.metrics(), lab.api.metrics()
    run = new_run(f"{queue}-{kind}-{variant}")

    responses = post_tasks(lab.api.url, run, queue, endpoint, count, value=VALUE)

    assert [r.status_code for r in responses] == [202] * count
    bodies = [r.json() for r in responses]
    assert len({b["task_id"] for b in bodies}) == count
    assert all(b["run"] == run and b["queue"] == queue and b["kind"] == kind for b in bodies)

    report = wait_settled(lab.api.url, run, count)
    row = report["queues"][queue][endpoint]
    assert row == {
        "enqueued": count,
        "started": count,
        "completed": count,
        "failed": 0,
        "duplicates": 0,
        "purged": 0,
        "pending": 0,
        "unfinished": 0,
        "value": count * VALUE,
        "work": count * VALUE,
    }
    assert list(report["queues"]) == [queue]

    def delta(name, proc_before, proc):
        return proc.metrics().value(name, **labels) - proc_before.value(name, **labels)

    # A worker bumps its counters right after the ledger write: allow it that moment.
    wait_until(
        lambda: delta("lab_task_completed_total", before, runner) == count,
        10,
        f"{queue} lab_task_completed_total to rise by {count}",
    )
    assert delta("lab_task_started_total", before, runner) == count
    assert delta("lab_task_failed_total", before, runner) == 0
    assert delta("lab_task_duplicates_total", before, runner) == 0
    assert delta("lab_task_duration_seconds_count", before, runner) == count
    assert delta("lab_task_latency_seconds_count", before, runner) == count
    assert delta("lab_enqueued_total", api_before, lab.api) == count

    if queue in LIBRARY_COUNTS:
        library_labels, names = LIBRARY_COUNTS[queue]

        def library_delta(name):
            return runner.metrics().value(name, **library_labels) - before.value(name, **library_labels)

        # Both middlewares count after the task returned, after its settle.
        wait_until(
            lambda: all(library_delta(name) == count for name in names),
            10,
            f"{queue}'s own {', '.join(names)} to rise by {count}",
        )
