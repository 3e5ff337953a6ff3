"""Workers outlive a Redis outage: once Redis is back they take tasks again in
the same process, without being restarted (the README's "Fault experiments")."""

import signal
import time

import redis as sync_redis

from tests.lab import (
    HTTP,
    ON_REDIS,
    RedisServer,
    api_process,
    new_run,
    post_tasks,
    start_together,
    wait_settled,
    wait_until,
    worker_process,
)

QUEUES = list(ON_REDIS)
BATCH = 20
OUTAGE_S = 4  # long enough for every worker to hit the dead connection


def lab_with(redis: RedisServer, queues: list[str]):
    api = api_process(redis.url, name="api-redis-loss")
    workers = {q: worker_process(q, redis.url, name=f"{q}-redis-loss") for q in queues}
    start_together(api, *workers.values())
    return api, workers


def run_batch(api, queues: list[str], tag: str) -> None:
    """A batch to every queue at once; each queue's run settles, exact."""
    runs = {queue: new_run(f"{tag}-{queue}") for queue in queues}
    for queue, run in runs.items():
        responses = post_tasks(api.url, run, queue, "io/simple", BATCH)
        assert all(r.status_code == 202 for r in responses), [r.text for r in responses if r.status_code != 202][:3]
    for queue, run in runs.items():
        totals = wait_settled(api.url, run, BATCH, timeout=90)["totals"]
        assert totals["completed"] == BATCH and totals["failed"] == 0, (queue, totals)


def outage(redis: RedisServer, workers: dict, empty: bool) -> None:
    """Redis stops for OUTAGE_S, then starts again with its data (its
    append-only file), or without any when `empty`."""
    redis.stop()
    if empty:
        redis.wipe()
    time.sleep(OUTAGE_S)
    exited = {q: w.proc.returncode for q, w in workers.items() if w.proc.poll() is not None}
    assert not exited, f"workers exited while Redis was down (see their logs): {exited}"
    redis.start()


def api_ready(api, queues: list[str]) -> bool:
    """/readyz: Redis answers the API, and every queue's producer is ready."""
    return HTTP.get(f"{api.url}/readyz", params={"queues": ",".join(queues)}, timeout=5).status_code == 200


def stop_all(api, workers: dict) -> None:
    for w in workers.values():
        w.stop()
    api.stop()


def test_workers_take_tasks_again_after_redis_returns_with_its_data_then_empty():
    """The same processes live through two outages: Redis comes back with its
    data, then comes back empty (no queue, no consumer group, no ledger)."""
    queues = QUEUES
    redis = RedisServer(persist=True).start()
    api, workers = lab_with(redis, queues)
    try:
        run_batch(api, queues, "before")
        pids = {q: w.proc.pid for q, w in workers.items()}
        for empty, tag in ((False, "after-keeps-data"), (True, "after-comes-back-empty")):
            outage(redis, workers, empty)
            wait_until(lambda: api_ready(api, queues), 60, "the API to see Redis again (/readyz 200)", interval=0.2)
            run_batch(api, queues, tag)
            assert {q: w.proc.pid for q, w in workers.items() if w.proc.poll() is None} == pids, (
                f"{tag}: a worker process was replaced or exited"
            )
    finally:
        stop_all(api, workers)
        redis.stop()


def test_dramatiq_requeues_ids_a_lost_fetch_left_in_its_acks_set():
    """When Redis restarts under a fetch it carried out, the reply is lost and
    the fetched ids sit in the acks set of a live worker (Dramatiq's
    housekeeping only requeues a dead worker's). Made here by hand: with the
    worker frozen, ids move from the queue to its acks set as the fetch script
    moves them; then Redis restarts while the worker runs again."""
    redis = RedisServer(persist=True).start()
    api, workers = lab_with(redis, ["dramatiq"])
    worker = workers["dramatiq"]
    r = sync_redis.Redis.from_url(redis.url)
    try:
        broker_id = wait_until(lambda: r.zrange("dramatiq:__heartbeats__", 0, -1), 20, "a heartbeat")[0].decode()
        worker.signal(signal.SIGSTOP)
        run = new_run("lost-fetch")
        assert all(x.status_code == 202 for x in post_tasks(api.url, run, "dramatiq", "io/simple", 5))
        ids = r.lrange("dramatiq:lab", 0, -1)
        assert len(ids) == 5
        for i in ids:
            r.lrem("dramatiq:lab", 0, i)
            r.sadd(f"dramatiq:__acks__.{broker_id}.lab", i)
        redis.stop()
        worker.signal(signal.SIGCONT)
        time.sleep(OUTAGE_S)  # the worker's fetch fails: Dramatiq starts a new consumer
        redis.start()
        totals = wait_settled(api.url, run, 5, timeout=60)["totals"]
        assert (totals["completed"], totals["duplicates"]) == (5, 0), totals
    finally:
        worker.signal(signal.SIGCONT)
        r.close()
        stop_all(api, workers)
        redis.stop()
