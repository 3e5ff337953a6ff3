"""The API's metrics for Prometheus, served by a thread of its own on METRICS_PORT.

A scrape sent to the API's own port waits in line behind every request the
event loop holds: under a small CPU limit and a full load it can outlast
Prometheus' scrape timeout, and the API's panels go blank (docs/hot-path.md).
A thread of its own answers while the
loop is busy; the scrape costs the same CPU. /metrics on the API's port stays,
for people and the tests. With API_WORKERS > 1 every server process binds the
port (SO_REUSEPORT) and any of them answers with every process's samples.
"""

import logging
import socket
import threading
from http.server import ThreadingHTTPServer

from prometheus_client import REGISTRY, MetricsHandler

log = logging.getLogger("lab.api")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


def serve_metrics_in_thread(port: int, addr: str = "0.0.0.0") -> ThreadingHTTPServer | None:
    """Start serving REGISTRY on `port`; None (and a warning) if the port is taken."""
    try:
        server = _Server((addr, port), MetricsHandler.factory(REGISTRY))
    except OSError as exc:
        log.warning("metrics not served on port %d (%s): /metrics on the API's port still answers", port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="lab-metrics", daemon=True).start()
    return server
