"""`make locust-ui`: Locust's web UI on 127.0.0.1 against the lab's API, for
interactive runs; the parameters are checked first as the locustfile would."""

from __future__ import annotations

import httpx

from lab import load_params
from labctl.config import knobs
from labctl.errors import LabError, ParamError
from labctl.platform.compose import Compose
from labctl.polling import wait_until
from labctl.render.console import Console


def check(worker: str, endpoint: str, run: str) -> None:
    """ParamError with the reason when the locustfile would refuse these parameters."""
    raw = {"worker": worker, "endpoint": endpoint, "run": run}
    try:
        load_params.parse_params({k: v for k, v in raw.items() if v})
    except load_params.ParamError as exc:
        raise ParamError(f"{exc}\nusage: make locust-ui worker=arq|...|all [endpoint=io/simple run=NAME]") from None


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 400
    except httpx.HTTPError:
        return False


def locust_ui(worker: str, endpoint: str, run: str, ui: Console) -> int:
    check(worker, endpoint, run)
    Compose(profile="load").build("locust-master")
    compose = Compose(profile="locust-ui")
    env = {"LOAD_WORKER": worker, "LOAD_ENDPOINT": endpoint, "LOAD_RUN": run}
    compose.start_service("locust-ui", env, recreate=True)
    port = knobs().locust_ui_port
    url = f"http://127.0.0.1:{port}/"
    if not wait_until(lambda: _answers(url), timeout_s=30, every_s=0.5):
        logs = compose.logs("locust-ui", tail=20)
        raise LabError(f"Locust's web UI did not come up; its last lines:\n{logs}")
    ui.say(f"Locust: http://127.0.0.1:{port}  (make locust-ui-down to stop it)")
    return 0
