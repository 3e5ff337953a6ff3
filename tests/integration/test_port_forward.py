"""The port forwarder that `make stack-up` runs on 127.0.0.1 of a Swarm manager
(services/port_forward.py), as a real process in front of a real HTTP server:
bodies pass intact both ways, every connection is its own, and a target that
is down closes the client's connection instead of leaving it hanging. Beside it,
services/fetch.py, which reads a service's page from inside its container."""

import hashlib
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.lab import ROOT, free_port, wait_until


class Echo(BaseHTTPRequestHandler):
    """POST: the body's sha256 and length; GET: 1 MiB of a known pattern."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._send(f"{hashlib.sha256(body).hexdigest()} {len(body)}".encode())

    def do_GET(self):
        self._send(bytes(range(256)) * 4096)

    def _send(self, data: bytes):
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def forwarded():
    """(forwarder port to the echo server, forwarder port to a closed port)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    to_echo, to_nothing = free_port(), free_port()
    closed = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.port_forward",
            f"{to_echo}=127.0.0.1:{server.server_address[1]}",
            f"{to_nothing}=127.0.0.1:{closed}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: proc.stdout.readline().startswith("forwarding"), 10, "the forwarder listening")
        wait_until(lambda: "forwarding" in proc.stdout.readline(), 10, "both ports listening")
        yield to_echo, to_nothing
    finally:
        proc.terminate()
        proc.wait(10)
        server.shutdown()


def test_bodies_pass_intact_both_ways_on_separate_connections(forwarded):
    to_echo, _ = forwarded
    upload = bytes(reversed(range(256))) * 8192  # 2 MiB
    with httpx.Client(base_url=f"http://127.0.0.1:{to_echo}", timeout=10) as client:
        assert client.post("/", content=upload).text == f"{hashlib.sha256(upload).hexdigest()} {len(upload)}"
        assert client.get("/").content == bytes(range(256)) * 4096
    for _ in range(5):  # a new connection each time
        assert httpx.get(f"http://127.0.0.1:{to_echo}/", timeout=10).status_code == 200


def test_a_target_that_is_down_closes_the_connection(forwarded):
    _, to_nothing = forwarded
    # Closed at once: not a timeout, which a hanging connection would give.
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.get(f"http://127.0.0.1:{to_nothing}/", timeout=10)


class Report(Echo):
    """GET: a JSON report of 100 KB, as the probe's /report answers."""

    def do_GET(self):
        self._send(json.dumps({"ok": list(range(20_000))}).encode())


def test_fetch_prints_a_body_whole_and_fails_on_a_closed_port():
    """services/fetch.py, how labctl reads the probe's /report from inside its container."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Report)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fetch = [sys.executable, "-m", "services.fetch"]
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/report"
        got = subprocess.run([*fetch, url], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert got.returncode == 0 and json.loads(got.stdout) == {"ok": list(range(20_000))}
    finally:
        server.shutdown()
    closed = subprocess.run([*fetch, f"http://127.0.0.1:{free_port()}/"], cwd=ROOT, capture_output=True, timeout=30)
    assert closed.returncode != 0 and not closed.stdout
