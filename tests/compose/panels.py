"""Run every Grafana panel's PromQL against a live Prometheus.

A helper, not a test module: the compose test calls `check_panels` after a real
load, and the CLI lists every dashboard / panel / query with its series count:

    python -m tests.compose.panels --prometheus http://127.0.0.1:9090
    python -m tests.compose.panels --prometheus URL --set queue=arq --skip Load

Dashboard variables are replaced the way Grafana would for the Prometheus
datasource: `$var`, `${var}`, `${var:format}` and `[[var]]`. A custom variable
set to "All" becomes its allValue (or every option as a regex alternation), a
textbox its current value; `substitutions` overrides any of them (a list of
values becomes a regex alternation). Built-ins: $__rate_interval (8s: four 2 s scrapes, as Grafana derives it),
$__interval (15s), $__range / $__range_s / $__range_ms (the query window),
$__interval_ms, all overridable too.

Only the standard library: it runs wherever the tests run.
"""

import argparse
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "grafana" / "dashboards"

WINDOW_S = 600  # range queries cover the last 10 minutes
STEP_S = 15

_VAR = re.compile(r"\$\{(\w+)(?::([\w-]+))?\}|\[\[(\w+)(?::([\w-]+))?\]\]|\$(\w+)")


class PanelQueryError(RuntimeError):
    """Prometheus rejected a panel's query (a broken dashboard, not missing data)."""


@dataclass
class QueryResult:
    dashboard: str
    panel: str
    ref_id: str
    expr: str  # after substitution
    series: int  # series with at least one non-NaN value
    error: str | None = None
    nonzero: int = 0  # series with at least one value neither NaN nor zero

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.dashboard, self.panel, self.ref_id)

    @property
    def title(self) -> str:
        return f"{self.dashboard} / {self.panel}"


def load_dashboards(directory: Path = DASHBOARDS) -> list[tuple[Path, dict]]:
    return [(path, json.loads(path.read_text())) for path in sorted(directory.glob("*.json"))]


def iter_panels(dashboard: dict) -> Iterator[dict]:
    """Every panel, rows' nested panels included (rows themselves excluded)."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def _as_value(value: str | Iterable[str]) -> str:
    if isinstance(value, str):
        return value
    values = list(value)
    return values[0] if len(values) == 1 else "(" + "|".join(re.escape(v) for v in values) + ")"


def variable_values(dashboard: dict) -> dict[str, str]:
    """What each dashboard variable stands for with its saved (default) selection."""
    values: dict[str, str] = {}
    for var in dashboard.get("templating", {}).get("list", []):
        name, kind = var["name"], var.get("type")
        current = (var.get("current") or {}).get("value", "")
        selected = current if isinstance(current, list) else [current]
        options = [o["value"] for o in var.get("options", []) if o.get("value") != "$__all"]
        if kind == "custom" and not options:
            options = [v.strip() for v in var.get("query", "").split(",") if v.strip()]
        if "$__all" in selected:
            values[name] = var.get("allValue") or _as_value(options)
        elif kind in ("textbox", "constant"):
            values[name] = _as_value(selected) if selected != [""] else var.get("query", "")
        elif selected and selected != [""]:
            values[name] = _as_value(selected)
        else:  # a query variable with nothing saved: anything
            values[name] = ".+"
    return values


def builtin_values(window_s: int = WINDOW_S, step_s: int = STEP_S) -> dict[str, str]:
    return {
        "__rate_interval": "8s",
        "__interval": f"{step_s}s",
        "__interval_ms": str(step_s * 1000),
        "__range": f"{window_s}s",
        "__range_s": str(window_s),
        "__range_ms": str(window_s * 1000),
    }


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace every variable reference; an unknown variable raises KeyError.
    `$1`, `${1}`: regex group references (label_replace), left alone as Grafana does."""

    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(3) or m.group(5)
        if name.isdigit():
            return m.group(0)
        if name not in values:
            raise KeyError(f"unknown variable ${name} in: {expr}")
        return values[name]

    return _VAR.sub(repl, expr)


def dashboard_values(
    dashboard: dict,
    substitutions: Mapping[str, str | Iterable[str]] | None = None,
    window_s: int = WINDOW_S,
    step_s: int = STEP_S,
) -> dict[str, str]:
    values = builtin_values(window_s, step_s) | variable_values(dashboard)
    for name, value in (substitutions or {}).items():
        values[name.lstrip("$")] = _as_value(value)
    return values


def _query(prometheus_url: str, expr: str, window_s: int, step_s: int, instant: bool) -> list[dict]:
    now = time.time()
    if instant:
        path, params = "/api/v1/query", {"query": expr, "time": f"{now:.3f}"}
    else:
        path = "/api/v1/query_range"
        params = {"query": expr, "start": f"{now - window_s:.3f}", "end": f"{now:.3f}", "step": str(step_s)}
    request = urllib.request.Request(
        prometheus_url.rstrip("/") + path,
        data=urllib.parse.urlencode(params).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:  # 400/422: a bad query; the body says why
        try:
            body = json.load(exc)
        except ValueError:
            raise PanelQueryError(f"HTTP {exc.code} for {expr}") from None
    if body.get("status") != "success":
        raise PanelQueryError(f"{body.get('errorType')}: {body.get('error')}")
    data = body["data"]
    if data["resultType"] in ("scalar", "string"):
        return [{"metric": {}, "value": data["result"]}]
    return data["result"]


def _values(series: dict) -> list[float]:
    points = series.get("values") or ([series["value"]] if "value" in series else [])
    return [float(v) for _, v in points if not math.isnan(float(v))]


def _has_values(series: dict) -> bool:
    return bool(_values(series))


def _has_nonzero(series: dict) -> bool:
    return any(v != 0 for v in _values(series))


# Queries whose zero is the truth after a healthy load: no task failed, none ran
# twice, no enqueue failed, nothing was throttled, restarted or OOM-killed.
# Each must still return its series (a broken query returns none); every other
# query must return a series with a non-zero value.
ZERO_TRUTH: dict[tuple[str, str, str], str] = {
    ("Load", "Locust failures per second", "A"): "no request fails",
    ("Load", "Load generator CPU throttling: share of periods held back", "A"): "Locust runs without a CPU limit",
    ("Queues", "Enqueue rate vs completion rate", "C"): "no task fails",
    ("Queues", "Failures, duplicates and pending", "A"): "no task fails",
    ("Queues", "Failures, duplicates and pending", "B"): "no task runs twice",
    ("Queues", "Restarts, OOM kills and replicas up", "A"): "no restart here (test_chaos.py makes one and reads it)",
    ("Queues", "Restarts, OOM kills and replicas up", "C"): "no OOM kill here (test_chaos.py makes one and reads it)",
}


def query_panels(
    prometheus_url: str,
    substitutions: Mapping[str, str | Iterable[str]] | None = None,
    skip_dashboards: Iterable[str] = (),
    *,
    window_s: int = WINDOW_S,
    step_s: int = STEP_S,
    instant: bool = False,
    directory: Path = DASHBOARDS,
) -> list[QueryResult]:
    """One result per (dashboard, panel, target); query errors are recorded, not raised."""
    skip = {s.lower() for s in skip_dashboards}
    results = []
    for path, dashboard in load_dashboards(directory):
        title = dashboard.get("title", path.stem)
        if {title.lower(), str(dashboard.get("uid", "")).lower(), path.stem.lower()} & skip:
            continue
        values = dashboard_values(dashboard, substitutions, window_s, step_s)
        for panel in iter_panels(dashboard):
            for target in panel.get("targets", []):
                if target.get("hide") or not target.get("expr"):
                    continue
                expr = substitute(target["expr"], values)
                try:
                    answer = _query(prometheus_url, expr, window_s, step_s, instant)
                    series, nonzero, error = sum(map(_has_values, answer)), sum(map(_has_nonzero, answer)), None
                except PanelQueryError as exc:
                    series, nonzero, error = 0, 0, str(exc)
                results.append(
                    QueryResult(title, panel.get("title", "?"), target.get("refId", "?"), expr, series, error, nonzero)
                )
    return results


def check_panels(
    prometheus_url: str,
    substitutions: dict[str, str] | None = None,
    skip_dashboards: Iterable[str] = (),
    *,
    window_s: int = WINDOW_S,
    step_s: int = STEP_S,
    instant: bool = False,
    zero_truth: Mapping[tuple[str, str, str], str] = ZERO_TRUTH,
) -> list[str]:
    """The queries that fail, as "Dashboard / Panel [refId]: why": a query
    without a series holding a non-zero value, or, for a query of `zero_truth`
    (dashboard, panel, refId), one without any series. A panel passes only if
    every one of its queries does, so a broken query cannot pass on a sibling.

    `substitutions` sets dashboard variables (e.g. {"queue": "arq|celery"}); the
    rest keep their saved defaults. `skip_dashboards` names dashboards (title,
    uid or file name) not to query. Range queries over the last `window_s`
    seconds (or one instant query). A query Prometheus rejects raises
    PanelQueryError: that is a broken panel, not missing data.
    """
    results = query_panels(
        prometheus_url, substitutions, skip_dashboards, window_s=window_s, step_s=step_s, instant=instant
    )
    errors = [f"{r.title} [{r.ref_id}]: {r.error} -- {r.expr}" for r in results if r.error]
    if errors:
        raise PanelQueryError("\n".join(errors))
    unknown = set(zero_truth) - {r.key for r in results}
    failures = [f"{d} / {p} [{ref}]: named in ZERO_TRUTH but no such query" for d, p, ref in sorted(unknown)]
    for r in results:
        if r.key in zero_truth:
            if r.series == 0:
                failures.append(f"{r.title} [{r.ref_id}]: no series (zero is its truth, but it must answer): {r.expr}")
            elif " or " in r.expr:
                # Zero-filled (`X or Y * 0`): X itself must answer, or the fill hides a query that reads nothing.
                own = r.expr.split(" or ", 1)[0]
                answer = _query(prometheus_url, own, window_s, step_s, instant)
                if not any(map(_has_values, answer)):
                    failures.append(f"{r.title} [{r.ref_id}]: its own side answers nothing, only the fill: {own}")
        elif r.nonzero == 0:
            failures.append(f"{r.title} [{r.ref_id}]: no series with a non-zero value ({r.series} series): {r.expr}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.compose.panels", description=__doc__.split("\n")[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus base URL")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="a dashboard variable's value (regex for multi-value ones), repeatable",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="DASHBOARD",
        help="a dashboard (title, uid or file name) not to query, repeatable",
    )
    parser.add_argument("--window", type=int, default=WINDOW_S, help="range query window, seconds")
    parser.add_argument("--step", type=int, default=STEP_S, help="range query step, seconds")
    parser.add_argument("--instant", action="store_true", help="instant queries instead of range queries")
    args = parser.parse_args(argv)
    substitutions = dict(item.split("=", 1) for item in args.set)

    results = query_panels(
        args.prometheus, substitutions, args.skip, window_s=args.window, step_s=args.step, instant=args.instant
    )
    panels: dict[str, list[QueryResult]] = {}
    for r in results:
        panels.setdefault(r.title, []).append(r)
    empty = []
    for title, rows in panels.items():
        total = sum(r.series for r in rows)
        print(f"{title}  ({total} series)")
        for r in rows:
            status = f"ERROR {r.error}" if r.error else f"{r.series} series, {r.nonzero} non-zero"
            print(f"    [{r.ref_id}] {status}: {r.expr}")
        if total == 0:
            empty.append(title)
    errors = sum(1 for r in results if r.error)
    print(f"\n{len(panels)} panels, {len(results)} queries, {len(empty)} panels without series, {errors} query errors")
    for title in empty:
        print(f"  no series: {title}")
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
