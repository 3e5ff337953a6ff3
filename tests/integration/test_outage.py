"""A Redis outage gets a fast 503 from every queue, never a hang or a 500, and
the API recovers by itself once Redis is back.

The 503's 2 s is the API's promise, so it is measured as a client sees it and
only that: from the moment the request's bytes are sent on a connection opened
beforehand, to the moment the answer's status line arrives. Nothing of the
test's own (its HTTP client, its connection) is inside the bound, which is the
promise itself, plus nothing."""

import http.client
import json
import time
from urllib.parse import urlsplit

import pytest

from tests.lab import HOST_QUEUES, HTTP, ON_REDIS, RedisServer, ledger, new_run, start_api, wait_until

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


class Answer:
    def __init__(self, status_code: int, body: bytes):
        self.status_code, self.text = status_code, body.decode(errors="replace")

    def json(self):
        return json.loads(self.text)


def post(api, queue: str, run: str) -> tuple[Answer, float]:
    """One enqueue; its answer, and the seconds from its request's send to its status line."""
    url = urlsplit(api.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)  # 30 s: only a hang
    try:
        conn.connect()
        body = b'{"value": 1}'
        headers = {"Content-Type": "application/json", "X-Lab-Run": run, "Content-Length": str(len(body))}
        sent = time.monotonic()
        conn.request("POST", f"/api/v1/incr/io/simple/{queue}", body=body, headers=headers)
        response = conn.getresponse()  # returns once the status line and headers are read
        answered_in = time.monotonic() - sent
        return Answer(response.status, response.read()), answered_in
    finally:
        conn.close()


def assert_unavailable(api, how: str) -> str:
    """Every queue answers 503 in time; returns the run its requests named."""
    run = new_run("outage")
    for queue in HOST_QUEUES:
        r, elapsed = post(api, queue, run)
        assert r.status_code == 503, f"{queue} while Redis {how}: {r.status_code} {r.text}"
        assert elapsed < DEADLINE_S, f"{queue} took {elapsed:.2f}s to answer while Redis {how}"
        body = r.json()
        assert body["error"] == "queue unavailable" and body["queue"] == queue
        assert body["reason"] in ("timeout", "connection"), f"{queue} while Redis {how}: {body}"
    ready = HTTP.get(f"{api.url}/readyz", timeout=30)
    assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
    assert HTTP.get(f"{api.url}/healthz", timeout=30).status_code == 200
    r = HTTP.get(f"{api.url}/api/v1/runs/{run}", timeout=30)
    assert r.status_code == 503
    return run


def assert_recovers(api) -> None:
    run = new_run("back")

    def accepted():
        return all(post(api, q, run)[0].status_code == 202 for q in HOST_QUEUES)

    wait_until(accepted, 60, "every queue to accept tasks again", interval=0.5)
    assert HTTP.get(f"{api.url}/readyz", timeout=30).status_code == 200
    report = ledger(api.url, run)
    # Every queue answered 202 at least once; nothing that got a 503 was counted.
    assert set(report["queues"]) == set(HOST_QUEUES)


def test_a_stopped_redis_gets_503_within_2_s_and_the_api_recovers_by_itself(isolated):
    redis, api = isolated
    assert_recovers(api)  # every producer connected before the outage
    redis.stop()
    assert_unavailable(api, "is stopped")
    metrics = api.metrics()
    assert metrics.value("lab_enqueue_errors_total") >= len(HOST_QUEUES)
    redis.start()
    assert_recovers(api)


# Celery's and Dramatiq's blocking publish, made on the loop (the default) and in threads of its own.
@pytest.mark.parametrize("isolated", [{}, {"BLOCKING_PUBLISH": "threads"}], indirect=True, ids=["inline", "threads"])
def test_a_frozen_redis_gets_503_within_2_s_and_the_api_recovers_by_itself(isolated):
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
    # and its task run: the ledger then counts it enqueued, test_lost_reply.py.)
    def taken_back():
        background = (ledger(api.url, run) or {"queues": {}})["queues"].get("background", {}).get("io/simple", {})
        return background.get("enqueued", 0) == 0 and background.get("pending", 0) == 0

    wait_until(taken_back, 60, "background's count of a task answered 503 to be taken back", interval=0.5)


def test_readyz_is_503_and_healthz_200_while_redis_is_down(isolated):
    """/readyz: Redis answers the API; /healthz: the process answers (no I/O), whatever Redis does."""
    redis, api = isolated
    assert HTTP.get(f"{api.url}/readyz", timeout=30).status_code == 200
    redis.stop()
    ready = HTTP.get(f"{api.url}/readyz", timeout=30)
    assert ready.status_code == 503 and ready.json()["status"] == "unavailable", ready.text
    health = HTTP.get(f"{api.url}/healthz", timeout=30)
    assert health.status_code == 200 and health.json() == {"status": "ok"}, health.text
    redis.start()
    wait_until(lambda: HTTP.get(f"{api.url}/readyz", timeout=30).status_code == 200, 60, "/readyz 200 again")


def test_an_api_started_while_redis_is_down_recovers_by_itself():
    redis = RedisServer()
    api = start_api(redis.url, name="api-no-redis")
    try:
        assert HTTP.get(f"{api.url}/readyz", timeout=30).status_code == 503
        # A queue's library is imported at its first use, with no deadline (a
        # start-up cost, not the outage's): a first task to each imports it, its
        # producer failing to connect, so that the timed ones measure the outage alone.
        first = new_run("first")
        for queue in ON_REDIS:
            assert post(api, queue, first)[0].status_code == 503, queue
        assert_unavailable(api, "was never up")
        redis.start()
        assert_recovers(api)
    finally:
        api.stop()
        redis.stop()
