"""A Redis outage gets a fast 503 from every queue, never a hang or a 500, and
the API recovers by itself once Redis is back."""

import time

import httpx
import pytest

from lab.protocol import Queue
from tests.lab import HTTP, RedisServer, ledger, new_run, start_api, wait_until

DEADLINE_S = 2.0  # the API's promise: an answer within 2 s, whatever Redis does


@pytest.fixture
def isolated(request):
    """A Redis and an API of their own: this test stops Redis. A test may
    give the API's settings with @pytest.mark.parametrize("isolated", [{...}], indirect=True)."""
    redis = RedisServer().start()
    api = start_api(redis.url, name="api-outage", **getattr(request, "param", {}))
    yield redis, api
    redis.thaw() if redis.proc and redis.proc.poll() is None else None
    api.stop()
    redis.stop()


def post(api, queue: str, run: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    r = HTTP.post(f"{api.url}/api/v1/incr/io/simple/{queue}", json={"value": 1}, headers={"X-Lab-Run": run}, timeout=30)
    return r, time.monotonic() - started


def assert_unavailable(api, how: str) -> str:
    """Every queue answers 503 in time; returns the run its requests named."""
    run = new_run("outage")
    for queue in Queue:
        r, elapsed = post(api, queue.value, run)
        assert r.status_code == 503, f"{queue} while Redis {how}: {r.status_code} {r.text}"
        assert elapsed < DEADLINE_S, f"{queue} took {elapsed:.2f}s to answer while Redis {how}"
        body = r.json()
        assert body["error"] == "queue unavailable" and body["queue"] == queue.value
        assert body["reason"] in ("timeout", "connection")
    ready = HTTP.get(f"{api.url}/readyz", timeout=5)
    assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
    assert HTTP.get(f"{api.url}/healthz", timeout=5).status_code == 200
    r = HTTP.get(f"{api.url}/api/v1/runs/{run}", timeout=5)
    assert r.status_code == 503
    return run


def assert_recovers(api) -> None:
    run = new_run("back")

    def accepted():
        return all(post(api, q.value, run)[0].status_code == 202 for q in Queue)

    wait_until(accepted, 20, "every queue to accept tasks again", interval=0.5)
    assert HTTP.get(f"{api.url}/readyz", timeout=5).status_code == 200
    report = ledger(api.url, run)
    # Every queue answered 202 at least once; nothing that got a 503 was counted.
    assert set(report["queues"]) == {q.value for q in Queue}


def test_redis_stopped_then_restarted(isolated):
    redis, api = isolated
    assert_recovers(api)  # every producer connected before the outage
    redis.stop()
    assert_unavailable(api, "is stopped")
    metrics = api.metrics()
    assert metrics.value("lab_enqueue_errors_total") >= len(Queue)
    redis.start()
    assert_recovers(api)


# Celery's and Dramatiq's blocking publish, made on the loop (the default) and in threads of its own.
@pytest.mark.parametrize("isolated", [{}, {"BLOCKING_PUBLISH": "threads"}], indirect=True, ids=["inline", "threads"])
def test_redis_frozen_then_thawed(isolated):
    """A Redis that accepts connections but never answers: only timeouts help."""
    redis, api = isolated
    assert_recovers(api)
    redis.freeze()
    run = assert_unavailable(api, "is frozen")
    redis.thaw()
    assert_recovers(api)

    # `background` counts its task before answering; the count sent to the
    # frozen Redis runs once it thaws, and is taken back: its request got a
    # 503 and its task never ran. (A broker's publish may land the same way
    # and its task run: the ledger then reads pending -1, flagged by the record.)
    def taken_back():
        background = (ledger(api.url, run) or {"queues": {}})["queues"].get("background", {}).get("io/simple", {})
        return background.get("enqueued", 0) == 0 and background.get("pending", 0) == 0

    wait_until(taken_back, 10, "background's count of a task answered 503 to be taken back", interval=0.5)


def test_api_starts_while_redis_is_down():
    redis = RedisServer()
    api = start_api(redis.url, name="api-no-redis")
    try:
        assert HTTP.get(f"{api.url}/readyz", timeout=5).status_code == 503
        assert_unavailable(api, "was never up")
        redis.start()
        assert_recovers(api)
    finally:
        api.stop()
        redis.stop()
