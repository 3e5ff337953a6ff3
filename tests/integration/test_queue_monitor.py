"""The backlog of every queue is reported even while its worker is down, and
falls to zero once a worker drains it: arq's (a sorted set the worker empties)
and taskiq's (a stream whose entries stay once acknowledged: the backlog is the
consumer group's lag, not the stream's length)."""

import sys

import pytest

from tests.lab import (
    ON_REDIS,
    LabProcess,
    RedisServer,
    free_port,
    lab_env,
    new_run,
    post_tasks,
    start_api,
    start_together,
    wait_until,
    worker_process,
)


@pytest.fixture
def no_workers():
    redis = RedisServer().start()
    api = start_api(redis.url, name="api-monitor")
    port = free_port()
    monitor = LabProcess(
        "queue-monitor",
        [sys.executable, "-m", "services.queue_monitor"],
        lab_env(redis.url, METRICS_PORT=port, QUEUE_DEPTH_INTERVAL_S="0.2"),
        f"http://127.0.0.1:{port}/metrics",
    ).start()
    yield redis, api, monitor
    monitor.stop()
    api.stop()
    redis.stop()


def test_depth_while_workers_are_down_then_drained(no_workers):
    redis, api, monitor = no_workers
    run = new_run("backlog")
    for queue in ON_REDIS:
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, queue, "io/simple", 7))

    def depths():
        m = monitor.metrics()
        return {q: m.value("lab_queue_depth", queue=q) for q in ON_REDIS}

    wait_until(lambda: set(depths().values()) == {7}, 10, "every queue to report a backlog of 7")
    drained = ("arq", "taskiq")
    workers = start_together(*(worker_process(q, redis.url) for q in drained))
    try:
        wait_until(lambda: all(depths()[q] == 0 for q in drained), 30, "arq's and taskiq's backlogs to drain")
        assert {q: d for q, d in depths().items() if q not in drained} == {q: 7 for q in ON_REDIS if q not in drained}
    finally:
        for worker in workers:
            worker.stop()
