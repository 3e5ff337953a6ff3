"""The lab's API as the scripts call it: its published address, readiness, and a run's ledger."""

from __future__ import annotations

import httpx

from scripts.compose import Compose, LoadError


def api_address(compose: Compose, queues: tuple[str, ...] = ()) -> str:
    """host:port of the running API, ready to answer, with the producers of `queues`
    ready too (their library imported before the load, not in its first requests);
    LoadError says what to do otherwise."""
    api = compose.port("api", 8000)
    if not api:
        raise LoadError("the lab is not running (no published API port): start it with `make up`")
    try:
        # A library's first import at a low CPU limit takes seconds: a longer wait than a ping's.
        httpx.get(f"http://{api}/readyz", params={"queues": ",".join(queues)}, timeout=60).raise_for_status()
    except httpx.HTTPError as exc:
        raise LoadError(f"the API at {api} is not ready ({exc}): `make ps`, `make logs svc=api`") from None
    return api


def ledger(api: str, run: str) -> dict | None:
    """GET /api/v1/runs/{run}: the run's ledger, or None (no such run, or no answer)."""
    try:
        r = httpx.get(f"http://{api}/api/v1/runs/{run}", timeout=5)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None
