"""Workers outlive a Redis outage: once Redis is back they take tasks again in
the same process, without being restarted (the README's "Fault experiments")."""

import time

import pytest

from services.protocol import BROKER_QUEUES
from tests.lab import RedisServer, new_run, post_tasks, start_api, start_worker, wait_settled, wait_until

QUEUES = [q.value for q in BROKER_QUEUES]
BATCH = 20
OUTAGE_S = 4  # long enough for every worker to hit the dead connection


def lab_with(redis: RedisServer, queues: list[str]):
    api = start_api(redis.url, name="api-redis-loss")
    workers = {q: start_worker(q, redis.url, name=f"{q}-redis-loss") for q in queues}
    return api, workers


def run_batch(api, queues: list[str], tag: str) -> None:
    for queue in queues:
        run = new_run(f"{tag}-{queue}")
        responses = post_tasks(api.url, run, queue, "io/simple", BATCH)
        assert all(r.status_code == 202 for r in responses), [r.text for r in responses if r.status_code != 202][:3]
        totals = wait_settled(api.url, run, BATCH, timeout=90)["totals"]
        assert totals["completed"] == BATCH and totals["failed"] == 0, (queue, totals)


def outage(redis: RedisServer, workers: dict) -> None:
    redis.stop()
    time.sleep(OUTAGE_S)
    exited = {q: w.proc.returncode for q, w in workers.items() if w.proc.poll() is not None}
    assert not exited, f"workers exited while Redis was down (see their logs): {exited}"
    redis.start()


def stop_all(api, workers: dict) -> None:
    for w in workers.values():
        w.stop()
    api.stop()


@pytest.mark.parametrize("persist", [True, False], ids=["redis-keeps-data", "redis-comes-back-empty"])
def test_workers_take_tasks_again_after_redis_returns(persist):
    queues = QUEUES
    redis = RedisServer(persist=persist).start()
    api, workers = lab_with(redis, queues)
    try:
        run_batch(api, queues, "before")
        pids = {q: w.proc.pid for q, w in workers.items()}
        outage(redis, workers)
        wait_until(lambda: api.metrics() is not None, 10, "the API")
        run_batch(api, queues, "after")
        assert {q: w.proc.pid for q, w in workers.items() if w.proc.poll() is None} == pids, \
            "a worker process was replaced or exited"
    finally:
        stop_all(api, workers)
        redis.stop()
