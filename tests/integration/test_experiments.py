"""The event-loop experiments: every upstream variant returns the same body;
`async-blocking` stalls the loop (a /healthz sent while it waits upstream is
answered only after it), the others do not; both serialisation modes of the
big response agree; several API processes keep their metrics right."""

import sys
import threading
import time

import pytest

from tests.lab import HTTP, LabProcess, Metrics, free_port, lab_env, post_tasks, start_api, wait_until

UPSTREAM_LATENCY_MS = 1500  # long enough that "answered before the upstream call returned" is unambiguous
VARIANTS = ["async-blocking", "async-threadpool", "sync-def", "async-native"]


@pytest.fixture(scope="module")
def upstream(redis_server):
    port = free_port()
    proc = LabProcess(
        "upstream",
        [sys.executable, "-m", "uvicorn", "services.upstream:app", "--port", str(port), "--log-level", "warning"],
        lab_env(redis_server.url, UPSTREAM_LATENCY_MS=UPSTREAM_LATENCY_MS),
        f"http://127.0.0.1:{port}/healthz",
    ).start()
    proc.url = f"http://127.0.0.1:{port}"
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def api(redis_server, upstream):
    proc = start_api(redis_server.url, name="api-experiments", UPSTREAM_URL=f"{upstream.url}/")
    yield proc
    proc.stop()


def test_every_upstream_variant_returns_the_same_body(api):
    bodies = [HTTP.post(f"{api.url}/api/v1/upstream/{v}", timeout=10).json() for v in VARIANTS]
    assert bodies == [{"upstream": "ok", "latency_ms": UPSTREAM_LATENCY_MS}] * len(VARIANTS)


def healthz_answered_while_upstream_busy(api, upstream, variant: str) -> bool:
    """Send the variant's request; once upstream holds it, ask /healthz; when
    /healthz has answered, is the upstream call still in flight? Upstream counts
    a call out before it replies, so a loop blocked on that call cannot answer
    /healthz while it is still counted; a free loop answers it 1.5 s before."""

    def call():
        assert HTTP.post(f"{api.url}/api/v1/upstream/{variant}", timeout=30).status_code == 200

    def in_flight() -> int:
        return HTTP.get(f"{upstream.url}/inflight", timeout=5).json()["in_flight"]

    thread = threading.Thread(target=call)
    thread.start()
    try:
        wait_until(lambda: in_flight() >= 1, 10, "the upstream call to arrive")
        assert HTTP.get(f"{api.url}/healthz", timeout=30).status_code == 200
        return in_flight() >= 1
    finally:
        thread.join(30)


def test_async_blocking_stalls_the_event_loop(api, upstream):
    assert healthz_answered_while_upstream_busy(api, upstream, "async-blocking") is False


@pytest.mark.parametrize("variant", ["async-threadpool", "sync-def", "async-native"])
def test_other_variants_leave_the_loop_free(api, upstream, variant):
    assert healthz_answered_while_upstream_busy(api, upstream, variant) is True


def test_clients_model_and_prejson_agree(api):
    model = HTTP.get(f"{api.url}/api/v1/clients", params={"count": 200, "mode": "model"}, timeout=30)
    prejson = HTTP.get(f"{api.url}/api/v1/clients", params={"count": 200, "mode": "prejson"}, timeout=30)
    assert model.status_code == prejson.status_code == 200
    assert model.json() == prejson.json()
    first = model.json()[0]
    assert set(first) == {"id", "name", "email", "active", "address", "accounts"}
    assert len(first["accounts"]) == 2 and "iban" in first["accounts"][0]


@pytest.mark.parametrize("query,status", [({"count": 0}, 422), ({"count": 50_001}, 422), ({"mode": "xml"}, 422)])
def test_clients_bad_query(api, query, status):
    assert HTTP.get(f"{api.url}/api/v1/clients", params=query, timeout=10).status_code == status


def test_payload_has_the_size_asked(api):
    for size in (0, 1, 220_000):
        r = HTTP.get(f"{api.url}/api/v1/payload", params={"size": size}, timeout=10)
        assert r.status_code == 200 and len(r.content) == size
    assert HTTP.get(f"{api.url}/api/v1/payload", params={"size": -1}, timeout=10).status_code == 422


def test_several_api_processes_report_every_request(redis_server):
    port, metrics_port = free_port(), free_port()
    proc = LabProcess(
        "api-2-workers",
        [sys.executable, "-m", "services.api"],
        lab_env(redis_server.url, API_WORKERS=2, API_HOST="127.0.0.1", API_LISTEN_PORT=port, METRICS_PORT=metrics_port),
        f"http://127.0.0.1:{port}/metrics",
    ).start()
    try:
        url = f"http://127.0.0.1:{port}"
        run = f"api-workers-{port}"
        responses = post_tasks(url, run, "background", "io/simple", 40)
        assert [r.status_code for r in responses] == [202] * 40
        labels = {"queue": "background", "kind": "io", "variant": "simple"}
        # Whichever process answers /metrics, the sum covers both: each
        # process hands its updates to its files every FLUSH_S (1 s), and the
        # one that answers, before it answers.
        wait_until(
            lambda: all(proc.metrics().value("lab_enqueued_total", **labels) == 40 for _ in range(6)),
            5,
            "six scrapes in a row to count both processes' enqueues",
        )
        wait_until(
            lambda: proc.metrics().value("lab_task_completed_total", **labels) == 40,
            10,
            "both processes' completions in /metrics",
        )
        pids = {HTTP.get(f"{url}/metrics", timeout=5).text.count("lab_cpu_limit_cores{") for _ in range(4)}
        assert pids == {1}  # the cgroup is the container's: reported once, not per process
        # Prometheus' port (each process's metrics thread binds it): the same sums.
        for _ in range(6):
            scraped = Metrics(HTTP.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text)
            assert scraped.value("lab_enqueued_total", **labels) == 40
    finally:
        proc.stop()


def test_probe_reports_success_rate_and_gaps(api):
    port = free_port()
    started = time.time()
    probe = LabProcess(
        "probe",
        [sys.executable, "-m", "uvicorn", "services.probe:app", "--port", str(port), "--log-level", "warning"],
        lab_env("redis://unused", PROBE_TARGET=f"{api.url}/healthz", PROBE_RATE=20),
        f"http://127.0.0.1:{port}/metrics",
    ).start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: HTTP.get(f"{url}/report", params={"since": started}).json()["ok"] >= 10,
            20,
            "ten successful probes",
        )
        report = HTTP.get(f"{url}/report", params={"since": started}).json()
        assert report["success_rate"] == 1.0 and report["worst_gap_s"] > 0
        m = probe.metrics()
        assert m.value("lab_probe_requests_total", outcome="ok") >= 10
        assert m.value("lab_probe_latency_seconds_count") >= 10
    finally:
        probe.stop()
