"""The liveness probe (compose service `probe`) of the event-loop scenarios."""

from __future__ import annotations

import json
import time

from scripts.compose import Compose, LoadError


def probe_report(compose: Compose, since: float, until: float) -> dict | None:
    """GET /report of the probe service, from inside its container (no published port)."""
    code = (
        "import urllib.request as u;"
        f"print(u.urlopen('http://127.0.0.1:9000/report?since={since:.3f}&until={until:.3f}',"
        "timeout=10).read().decode())"
    )
    proc = compose.exec("probe", "python", "-c", code)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


def start_probe(compose: Compose, say) -> None:
    compose.start_load(("probe",), {})
    if not compose.answers("probe", 9000, "/healthz"):
        raise LoadError("the probe did not answer within 60 s: docker compose --profile load logs probe")
    time.sleep(1)  # a second of probes before the load: the report's window starts with data
    say(
        f"liveness probe running (GET {compose.env.get('PROBE_TARGET') or 'http://api:8000/healthz'}, "
        f"{compose.env.get('PROBE_RATE') or 20}/s)"
    )
