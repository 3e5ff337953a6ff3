"""The lab's API as the experiments call it: its published address, readiness,
a run's ledger, and the liveness probe's report."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx

from labctl.errors import LabNotRunning
from labctl.platform.lab import Lab


def api_address(lab: Lab, queues: tuple[str, ...] = ()) -> str:
    """host:port of the running API, ready to answer, with the producers of `queues`
    ready too (their library imported before the load, not in its first requests);
    LabNotRunning says what to do otherwise."""
    api = lab.port("api", 8000)
    if not api:
        raise LabNotRunning("the lab is not running (no published API port): start it with `make up`")
    try:
        # A library's first import at a low CPU limit takes seconds: a longer wait than a ping's.
        httpx.get(f"http://{api}/readyz", params={"queues": ",".join(queues)}, timeout=60).raise_for_status()
    except httpx.HTTPError as exc:
        raise LabNotRunning(f"the API at {api} is not ready ({exc}): `make ps`, `make logs svc=api`") from None
    return api


def ledger(api: str, run: str) -> dict[str, Any] | None:
    """GET /api/v1/runs/{run}: the run's ledger, or None (no such run, or no answer)."""
    try:
        r = httpx.get(f"http://{api}/api/v1/runs/{run}", timeout=5)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def probe_report(lab: Lab, since: float, until: float) -> dict[str, Any] | None:
    """GET /report of the liveness probe (compose service `probe`), from inside its container (no published port)."""
    url = f"http://127.0.0.1:9000/report?since={since:.3f}&until={until:.3f}"
    proc = lab.exec("probe", "python", "-m", "services.fetch", url)
    if proc.returncode != 0:
        return None
    return cast(dict[str, Any], json.loads(proc.stdout))
