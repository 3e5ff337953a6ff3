"""Run the API: `python -m services.api` (what the container runs).

With API_WORKERS > 1, uvicorn starts several server processes; each writes its
metrics to files in PROMETHEUS_MULTIPROC_DIR and any of them serves the sum.
That directory must be set before prometheus_client is imported, hence here.
"""

import os
import shutil
import tempfile

import uvicorn

from lab.settings import get_settings


def main() -> None:
    settings = get_settings()
    workers = settings.api_workers
    own_dir = workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if own_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="lab-api-metrics-")
    try:
        uvicorn.run(
            "services.api.app:app",
            host=settings.api_host,
            port=settings.api_listen_port,
            workers=workers,
            log_level="warning",
            # No access log, as the bare API (--no-access-log): at "warning" no
            # line is written, yet each request still built the line's arguments.
            access_log=False,
            timeout_graceful_shutdown=settings.shutdown_grace_s,
        )
    finally:
        if own_dir:
            shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
