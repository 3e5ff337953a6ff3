"""/metrics for Prometheus, served on METRICS_PORT by a thread of the API and of
every worker.

A thread of its own answers while the process's event loop or its tasks are
busy: a scrape sent to the API's own port waited in line behind every request
the loop held, past Prometheus' scrape timeout (docs/hot-path.md). One thread
answers scrapes one after another; a client that sends nothing is dropped
after TIMEOUT_S.

The page is Prometheus' text format, uncompressed, whatever the scraper
offers: every Prometheus accepts it, and each scrape costs the process less
than OpenMetrics (whose writer checks every label name character by
character) or gzip, which saves nothing on a compose network
(docs/metrics.md, "What a scrape costs"). / answers a one-line page, for the
containers' health probes. With API_WORKERS > 1 every server process binds
the port (`shared`: SO_REUSEPORT) and any of them answers with every
process's samples; any other process that finds its port taken says so,
instead of silently sharing it with a stranger.
"""

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

log = logging.getLogger("lab.metrics")
TIMEOUT_S = 5.0


class _Handler(BaseHTTPRequestHandler):
    timeout = TIMEOUT_S
    # The head and the body leave in one send, flushed after do_GET: a health
    # probe reads the status line and hangs up, and a second send (the body)
    # would then meet its reset and print a traceback.
    wbufsize = 1 << 16

    def do_GET(self) -> None:
        if self.path.startswith("/metrics"):
            self._answer(200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY))
        elif self.path == "/":
            self._answer(200, "text/html", b'<a href="/metrics">metrics</a>\n')
        else:
            self._answer(404, "text/plain", b"not found\n")

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002  # the base class's name
        pass  # a line per scrape, every 2 s, says nothing


class MetricsServer(HTTPServer):
    def __init__(self, address: tuple[str, int], shared: bool = False):
        self.shared = shared
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        if self.shared:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def serve_metrics(port: int, addr: str = "0.0.0.0", shared: bool = False) -> MetricsServer | None:
    """Start serving REGISTRY on `port` from a daemon thread; None (and a
    warning) if the port is taken. `shared`: processes of one service that
    bind the same port, each answering for all (API_WORKERS > 1)."""
    try:
        server = MetricsServer((addr, port), shared)
    except OSError as exc:
        log.warning("metrics not served on port %d (%s)", port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="lab-metrics", daemon=True).start()
    return server
