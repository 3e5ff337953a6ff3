"""The other ways of running the same work: enqueue after the response (the
published article's way), and the libraries' other worker modes (Celery's
threads and solo pools, RQ's SimpleWorker, Huey's process workers)."""

import asyncio
import sys

import pytest
import redis

from lab.protocol import ENDPOINTS
from services.bare.bench_task import message
from services.bare.drain import bare_backlog, published
from services.bare.queues import BARE, KEYS, done_key
from tests.lab import (
    ON_REDIS,
    LabProcess,
    RedisServer,
    lab_env,
    new_run,
    post_tasks,
    start_api,
    start_worker,
    wait_settled,
    wait_until,
)


@pytest.fixture(scope="module")
def isolated_redis():
    redis = RedisServer().start()
    yield redis
    redis.stop()


def test_enqueue_after_response_still_accounts_for_every_task(isolated_redis):
    api = start_api(isolated_redis.url, name="api-after-response", ENQUEUE_MODE="after-response")
    worker = start_worker("saq", isolated_redis.url, name="saq-after-response")
    try:
        run = new_run("after-response")
        for queue in ("background", "saq"):
            responses = post_tasks(api.url, run, queue, "io/simple", 50)
            assert [r.status_code for r in responses] == [202] * 50
        totals = wait_settled(api.url, run, 100)["totals"]
        assert totals == {
            "enqueued": 100,
            "started": 100,
            "completed": 100,
            "failed": 0,
            "duplicates": 0,
            "purged": 0,
            "pending": 0,
            "unfinished": 0,
        }
        # What `make bench` reads as the lab's drain target in this mode.
        assert published(run, api.url) == 100
    finally:
        worker.stop()
        api.stop()


def test_each_bare_queue_counts_what_its_api_published(isolated_redis):
    """`make bench` in `after-response` mode drains each bare worker's backlog
    as its queue counts it (a bare API killed at its memory limit publishes
    fewer than it answered): each library's plain publish, then the count."""
    client = redis.Redis.from_url(isolated_redis.url)
    client.delete(*KEYS)

    async def publish(name: str, n: int) -> None:
        queue = BARE[name]()
        await queue.start(isolated_redis.url)
        try:
            for value in range(n):
                await queue.publish(message(name, "io", "simple", value))
        finally:
            await queue.close()

    for n, name in enumerate([name for name in BARE if name in ON_REDIS], 3):  # those on RabbitMQ: the compose bench
        asyncio.run(publish(name, n))
        assert bare_backlog(client, name) == n, name
    client.delete(*KEYS)


@pytest.mark.parametrize("name", [name for name in BARE if name in ON_REDIS])
def test_each_bare_worker_runs_the_tasks_its_bare_app_sends(isolated_redis, name):
    """`make bench`'s bare worker takes the task its bare app sends (the lab
    message's shape, services/bare/bench_task.py) and counts its value. At
    least: a plain library may run a task twice (SAQ's sweep at a worker's
    start over a backlog, which the lab's worker guards against and the bare
    one does not), but only each task's value reaches 111."""
    client = redis.Redis.from_url(isolated_redis.url)
    client.delete(*KEYS, done_key(name))
    argv = [sys.executable, "-m", "services.bare.worker", name]
    worker = LabProcess(f"bench-{name}", argv, lab_env(isolated_redis.url), ready_url="").launch()

    async def publish() -> None:
        queue = BARE[name]()
        await queue.start(isolated_redis.url)
        try:
            for value in (1, 10, 100):
                await queue.publish(message(name, "io", "simple", value))
        finally:
            await queue.close()

    try:
        asyncio.run(publish())
        wait_until(lambda: int(client.get(done_key(name)) or 0) >= 111, 60, f"the bare {name} worker ran 1+10+100")
    finally:
        worker.stop()
        client.delete(*KEYS, done_key(name))


# Each library's worker modes other than its default (tests/integration/test_queues.py runs those).
MODES = [
    ("celery", "CELERY_POOL", "threads"),
    ("celery", "CELERY_POOL", "solo"),
    ("rq", "RQ_WORKER_CLASS", "SimpleWorker"),
    ("huey", "HUEY_WORKER_TYPE", "process"),
]


@pytest.fixture(scope="module")
def modes_api(isolated_redis):
    """One API for the worker modes: each test runs one worker at a time, on its own run."""
    api = start_api(isolated_redis.url, name="api-modes")
    yield api
    api.stop()


@pytest.mark.parametrize("queue,knob,mode", MODES, ids=[f"{q}-{m}" for q, _, m in MODES])
def test_worker_modes_run_every_task_shape(isolated_redis, modes_api, queue, knob, mode):
    api = modes_api
    worker = start_worker(queue, isolated_redis.url, name=f"{queue}-{mode}", **{knob: mode})
    try:
        run = new_run(f"{queue}-{mode}")
        for kind, variant in ENDPOINTS:
            assert all(r.status_code == 202 for r in post_tasks(api.url, run, queue, f"{kind}/{variant}", 20))
        report = wait_settled(api.url, run, 20 * len(ENDPOINTS))
        for endpoint, row in report["queues"][queue].items():
            assert (row["completed"], row["failed"], row["duplicates"]) == (20, 0, 0), endpoint
        # The worker's /metrics count every task, whichever process ran it
        # (a process flushes its counts every second: allow it that moment).
        wait_until(
            lambda: worker.metrics().value("lab_task_completed_total", queue=queue) == 20 * len(ENDPOINTS),
            10,
            f"{queue} {mode}: lab_task_completed_total to count every task",
        )
    finally:
        worker.stop()
