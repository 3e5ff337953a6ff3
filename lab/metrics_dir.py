"""A directory of its own for a program's prometheus_client samples when it
forks children that count too (Celery's prefork pool): each child writes its
samples to files there, and the parent's /metrics adds them up.

Imports nothing but the standard library: it must run before prometheus_client
is imported anywhere, which reads PROMETHEUS_MULTIPROC_DIR once."""

import os
import shutil
import tempfile


class OwnMetricsDir:
    def __init__(self, prefix: str, claim: bool):
        """claim: make it now (the module runs as a program) unless the environment names one."""
        self.pid = os.getpid()  # only the process that made it removes it (a pool child leaving the pool must not)
        self.path: str | None = None
        if claim and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
            self.path = tempfile.mkdtemp(prefix=f"lab-{prefix}-metrics-")
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = self.path

    def remove(self) -> None:
        if self.path is not None and self.pid == os.getpid():
            shutil.rmtree(self.path, ignore_errors=True)
