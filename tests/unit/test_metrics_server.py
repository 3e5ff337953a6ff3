"""The /metrics server of every lab process (lab/metrics_server.py), on a real port."""

import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families

from lab.metrics_server import serve_metrics
from labctl.tools.scrape_cost import HEADERS as PROMETHEUS_HEADERS  # OpenMetrics first, text as a fallback, gzip
from tests.lab import free_port

HEALTHCHECK = Path(__file__).parents[2] / "services" / "healthcheck.sh"
SEEN = Counter("lab_test_metrics_server_seen", "A series this test looks for.", ("where",))


def get(url: str, headers: dict | None = None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_serves_the_text_format_uncompressed_whatever_the_scraper_offers():
    SEEN.labels(where="here").inc(3)
    port = free_port()
    server = serve_metrics(port, "127.0.0.1")
    assert server is not None
    try:
        status, headers, body = get(f"http://127.0.0.1:{port}/metrics", PROMETHEUS_HEADERS)
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain;")  # not application/openmetrics-text
        assert headers.get("Content-Encoding") is None
        assert int(headers["Content-Length"]) == len(body)
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
        }
        assert samples[("lab_test_metrics_server_seen_total", (("where", "here"),))] == 3.0
        # The health probes' page is not the exposition; anything else is a 404.
        status, _, page = get(f"http://127.0.0.1:{port}/")
        assert status == 200 and b"lab_test" not in page and len(page) < 100
        assert get(f"http://127.0.0.1:{port}/favicon.ico")[0] == 404
    finally:
        server.stop()


def test_a_taken_port_is_reported_not_raised():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert serve_metrics(taken.getsockname()[1], "127.0.0.1") is None


def test_only_the_processes_of_one_api_share_a_port():
    """API_WORKERS > 1: every server process binds the port (shared). Any
    other second server on a taken port is refused, not handed half the
    scrapes."""
    port = free_port()
    first = serve_metrics(port, "127.0.0.1")
    assert first is not None
    try:
        assert serve_metrics(port, "127.0.0.1") is None
    finally:
        first.stop()
    port = free_port()
    first, second = serve_metrics(port, "127.0.0.1", shared=True), serve_metrics(port, "127.0.0.1", shared=True)
    try:
        assert first is not None and second is not None
    finally:
        for server in (first, second):
            if server is not None:
                server.stop()


def test_a_health_probe_that_hangs_up_after_the_status_line_leaves_no_traceback(capsys):
    """services/healthcheck.sh reads the status line and closes. The answer left
    in two sends (the head, then the body), the body met the probe's reset in
    about one probe in ten, and the server printed a ConnectionResetError."""
    port = free_port()
    server = serve_metrics(port, "127.0.0.1")
    assert server is not None
    try:
        for _ in range(300):
            assert subprocess.run(["bash", str(HEALTHCHECK), str(port), "/"], check=False).returncode == 0
    finally:
        server.stop()
    assert "Traceback" not in capsys.readouterr().err
