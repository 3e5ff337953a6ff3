"""Bad input gets a clear 4xx naming the field, and enqueues nothing."""

import httpx
import pytest

from tests.lab import ledger, new_run

URL = "/api/v1/incr/io/simple/arq"


@pytest.fixture
def client(lab):
    with httpx.Client(base_url=lab.api.url, timeout=10) as c:
        yield c


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
def test_bad_body_is_422_naming_the_field(lab, client, name, body, field):
    run = new_run("bad")
    before = lab.api.metrics().value("lab_enqueued_total")
    r = client.post(URL, json=body, headers={"X-Lab-Run": run})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid request"
    assert field in [d["field"] for d in r.json()["detail"]]
    assert ledger(lab.api.url, run) is None  # the run was never even created
    assert lab.api.metrics().value("lab_enqueued_total") == before


@pytest.mark.parametrize(
    "content,headers",
    [
        (b"", {"content-type": "application/json"}),
        (b"{not json", {"content-type": "application/json"}),
        (b"value=1", {"content-type": "application/x-www-form-urlencoded"}),
    ],
    ids=["missing body", "malformed json", "form"],
)
def test_missing_or_malformed_body_is_4xx(lab, client, content, headers):
    run = new_run("bad")
    r = client.post(URL, content=content, headers={**headers, "X-Lab-Run": run})
    assert 400 <= r.status_code < 500, r.text
    assert "error" in r.json()
    assert ledger(lab.api.url, run) is None


@pytest.mark.parametrize(
    "path,field",
    [
        ("/api/v1/incr/disk/simple/arq", "path.kind"),
        ("/api/v1/incr/io/turbo/arq", "path.variant"),
        ("/api/v1/incr/io/simple/rabbitmq", "path.queue"),
        ("/api/v1/incr/io/process/arq", "path.variant"),  # a real variant, not of io
        ("/api/v1/incr/cpu/sync/celery", "path.variant"),
    ],
)
def test_unknown_task_or_queue_is_4xx_naming_the_field(lab, client, path, field):
    run = new_run("bad")
    r = client.post(path, json={"value": 1}, headers={"X-Lab-Run": run})
    assert r.status_code in (404, 422), r.text
    body = r.json()
    fields = [d["field"] for d in body.get("detail", [])] + [body.get("field")]
    assert field in fields
    assert ledger(lab.api.url, run) is None


@pytest.mark.parametrize("run", ["", "has space", "a:b", "x" * 65, "*", "../etc"])
def test_bad_run_header_is_422(lab, client, run):
    r = client.post(URL, json={"value": 1}, headers={"X-Lab-Run": run})
    assert r.status_code == 422, r.text
    assert "header.X-Lab-Run" in [d["field"] for d in r.json()["detail"]]


def test_oversized_body_is_413_by_length_and_by_stream(lab, client):
    run = new_run("big")
    big = b'{"value": 1, "pad": "' + b"x" * 10_000 + b'"}'
    r = client.post(URL, content=big, headers={"content-type": "application/json", "X-Lab-Run": run})
    assert r.status_code == 413 and r.json()["error"] == "request body too large"

    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(10):
            yield b"x" * 1000

    r = client.post(URL, content=chunks(), headers={"content-type": "application/json", "X-Lab-Run": run})
    assert r.status_code == 413, r.text
    assert ledger(lab.api.url, run) is None


def test_deeply_nested_json_is_4xx(lab, client):
    run = new_run("deep")
    r = client.post(URL, content=b"[" * 4000, headers={"content-type": "application/json", "X-Lab-Run": run})
    assert 400 <= r.status_code < 500, r.text
    r = client.post(
        URL,
        content=b'{"value":' * 400 + b"1" + b"}" * 400,
        headers={"content-type": "application/json", "X-Lab-Run": run},
    )
    assert 400 <= r.status_code < 500, r.text
    assert ledger(lab.api.url, run) is None


def test_default_value_and_default_run(lab, client):
    r = client.post("/api/v1/incr/io/simple/background", json={})
    assert r.status_code == 202 and r.json()["run"] == "default"


def test_unknown_run_is_404(lab, client):
    r = client.get(f"/api/v1/runs/{new_run('never')}")
    assert r.status_code == 404 and r.json()["field"] == "path.run"


def test_health_endpoints(lab, client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ok"}
    text = client.get("/metrics").text
    assert "lab_event_loop_lag_seconds" in text and "http_requests_total" in text
