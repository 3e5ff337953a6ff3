"""Bad input gets exactly the answer docs/api.md promises, and enqueues nothing:
422 naming the field for a bad body, path or run header, 404 for a kind/variant
pair that does not exist, 413 for a body over MAX_BODY_BYTES, 400 for JSON
nested too deeply."""

import httpx
import pytest

from tests.lab import ledger, new_run, start_api

URL = "/api/v1/incr/io/simple/arq"


@pytest.fixture(scope="module")
def api(redis_server):
    """An API of its own: what it answers needs no worker (an accepted task waits in its queue)."""
    api = start_api(redis_server.url, name="api-input")
    yield api
    api.stop()


@pytest.fixture
def client(api):
    with httpx.Client(base_url=api.url, timeout=10) as c:
        yield c


def enqueued(api) -> float:
    return api.metrics().value("lab_enqueued_total")


def refused(api, client, path: str, run: str, **request) -> httpx.Response:
    """POST `path`; the answer, once it is known that nothing was enqueued:
    neither the API's enqueue counter nor the run's ledger moved."""
    before = enqueued(api)
    r = client.post(path, **request)
    assert r.status_code != 202, r.text
    assert ledger(api.url, run) is None  # the run was never even created
    assert enqueued(api) == before
    return r


def invalid_fields(r: httpx.Response) -> list[str]:
    """The fields a 422 names (docs/api.md: {"error": "invalid request", "detail": [{"field": ...}]})."""
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "invalid request", body
    return [d["field"] for d in body["detail"]]


BAD_BODIES = [
    ("zero", {"value": 0}, "body.value"),
    ("too big", {"value": 1001}, "body.value"),
    ("negative", {"value": -5}, "body.value"),
    ("string", {"value": "5"}, "body.value"),
    ("float", {"value": 1.5}, "body.value"),
    ("bool", {"value": True}, "body.value"),
    ("null", {"value": None}, "body.value"),
    ("extra field", {"value": 1, "queue": "celery"}, "body.queue"),
    ("array", [1, 2], "body"),
    ("scalar", 7, "body"),
]


@pytest.mark.parametrize("name,body,field", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_body_is_422_naming_the_field(api, client, name, body, field):
    run = new_run("bad")
    r = refused(api, client, URL, run, json=body, headers={"X-Lab-Run": run})
    assert field in invalid_fields(r)


def test_value_is_taken_from_1_to_1000_and_refused_outside(api, client):
    """docs/api.md: body {"value": 1..1000}. Both bounds are taken; one past either is a 422 on body.value."""
    run = new_run("bounds")
    for value in (1, 1000):
        r = client.post(URL, json={"value": value}, headers={"X-Lab-Run": run})
        assert r.status_code == 202, (value, r.text)
    taken = ledger(api.url, run)["queues"]["arq"]["io/simple"]
    assert (taken["enqueued"], taken["value"]) == (2, 1001), taken
    for value in (0, 1001):
        outside = new_run("bounds")
        r = refused(api, client, URL, outside, json={"value": value}, headers={"X-Lab-Run": outside})
        assert invalid_fields(r) == ["body.value"], (value, r.text)


@pytest.mark.parametrize(
    "content,headers,field",
    [
        (b"", {"content-type": "application/json"}, "body"),
        (b"{not json", {"content-type": "application/json"}, "body.1"),
        (b"value=1", {"content-type": "application/x-www-form-urlencoded"}, "body"),
    ],
    ids=["missing body", "malformed json", "form"],
)
def test_missing_or_malformed_body_is_422_naming_the_body(api, client, content, headers, field):
    run = new_run("bad")
    r = refused(api, client, URL, run, content=content, headers={**headers, "X-Lab-Run": run})
    assert invalid_fields(r) == [field], r.text


@pytest.mark.parametrize(
    "path,field",
    [
        ("/api/v1/incr/disk/simple/arq", "path.kind"),
        ("/api/v1/incr/io/turbo/arq", "path.variant"),
        ("/api/v1/incr/io/simple/rabbitmq", "path.queue"),
    ],
)
def test_unknown_kind_variant_or_queue_is_422_naming_it(api, client, path, field):
    run = new_run("bad")
    r = refused(api, client, path, run, json={"value": 1}, headers={"X-Lab-Run": run})
    assert invalid_fields(r) == [field], r.text


@pytest.mark.parametrize("path", ["/api/v1/incr/io/process/arq", "/api/v1/incr/cpu/sync/celery"])
def test_a_kind_variant_pair_that_does_not_exist_is_404_and_enqueues_nothing(api, client, path):
    """Both names are known, their pair is not a task shape."""
    run = new_run("bad")
    r = refused(api, client, path, run, json={"value": 1}, headers={"X-Lab-Run": run})
    assert r.status_code == 404, r.text
    body = r.json()
    assert body["field"] == "path.variant" and body["error"].startswith("unknown task"), body


@pytest.mark.parametrize("run", ["", "has space", "a:b", "x" * 65, "*", "../etc"])
def test_bad_run_header_is_422_and_enqueues_nothing(api, client, run):
    before = enqueued(api)
    r = client.post(URL, json={"value": 1}, headers={"X-Lab-Run": run})
    assert invalid_fields(r) == ["header.X-Lab-Run"], r.text
    assert enqueued(api) == before


def test_oversized_body_is_413_by_length_and_by_stream(api, client):
    run = new_run("big")
    big = b'{"value": 1, "pad": "' + b"x" * 10_000 + b'"}'
    r = refused(api, client, URL, run, content=big, headers={"content-type": "application/json", "X-Lab-Run": run})
    assert r.status_code == 413 and r.json()["error"] == "request body too large", r.text

    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(10):
            yield b"x" * 1000

    r = refused(api, client, URL, run, content=chunks(), headers={"content-type": "application/json", "X-Lab-Run": run})
    assert r.status_code == 413 and r.json()["error"] == "request body too large", r.text


def test_deeply_nested_json_is_400(api, client):
    """Nested deeper than the JSON parser goes (within MAX_BODY_BYTES): 400 and a JSON error, never a 500."""
    run = new_run("deep")
    r = refused(
        api, client, URL, run, content=b"[" * 4000, headers={"content-type": "application/json", "X-Lab-Run": run}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"], r.text


def test_nested_json_the_parser_reads_is_422_on_its_field(api, client):
    """Deep, but within what the parser reads: the value is simply not an integer."""
    run = new_run("deep")
    body = b'{"value":' * 400 + b"1" + b"}" * 400
    r = refused(api, client, URL, run, content=body, headers={"content-type": "application/json", "X-Lab-Run": run})
    assert invalid_fields(r) == ["body.value"], r.text


def test_an_accepted_task_is_202_with_the_default_value_and_run(client):
    """An empty body and no run header: value 1, run `default`; 202 and what was accepted."""
    r = client.post("/api/v1/incr/io/simple/background", json={})
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["queue"], body["kind"], body["variant"], body["run"]) == ("background", "io", "simple", "default")
    assert len(body["task_id"]) >= 16, body


def test_unknown_run_is_404(client):
    r = client.get(f"/api/v1/runs/{new_run('never')}")
    assert r.status_code == 404 and r.json()["field"] == "path.run"


def test_health_endpoints(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ok"}
    text = client.get("/metrics").text
    assert "lab_event_loop_lag_seconds" in text and "http_requests_total" in text
