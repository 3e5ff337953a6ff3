"""What the dashboards read during a run, against the run's own record.

A helper, not a test module: tests/compose/test_load.py calls `readings` on its
run, and the CLI prints the same table for any recorded run whose Prometheus
data is still there:

    python -m tests.compose.panel_truth --prometheus http://127.0.0.1:9090 results/<run>.json

At given fractions of the load (50 % and 80 % by default) it evaluates the
dashboards' own queries, read from grafana/dashboards/*.json with the run's
queue as `$queue`, at that instant, as the panel would have shown them then:
  - Load / "Requests per second: sent by Locust, received by the API": Locust's
    query (summed over its series) and the API's, against the run's rate at
    that moment (every request of a queue run enqueues one task: the ledger
    timeline's enqueue count), and shown beside the record's req/s over the
    whole load, which a run whose rate moves does not hold at every moment;
  - Queues / "Enqueue rate vs completion rate": the enqueue and completion
    rates against the run's ledger timeline (record["timeline"], once a
    second, each row at the time the ledger was read).
  A rate's truth is the ledger's increase over the very scrapes the panel's
  rate was computed from, extrapolated over its window as Prometheus does:
  the recording rule's evaluation the panel showed, and the samples of the
  counter it read then, each target's own (a busy target misses scrapes, and a
  rate over fewer samples covers less of its window). Where those samples are
  not known (a panel read from something else), the ledger's rate over the
  window ending at each lag a scrape and a rule evaluation allow (up to 4 s).
  - Queues / "Backlog: tasks waiting in each queue" against the ledger's
    pending count at the sample's scrape, allowing the queue monitor's poll
    (QUEUE_DEPTH_INTERVAL_S) and the tasks running (concurrency x replicas):
    pending counts a task until it settles, the queue only until it is taken.
A reading is true when it is within TOLERANCE of its truth. Where a panel shows a gap at
that instant (a target's scrape failed on a busy machine, its series stale until the next
one), every query is read at the first second after it where all of them answer.

Only the standard library: it runs wherever the tests run.
"""

import argparse
import json
import re
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.compose import panels

TOLERANCE = 0.15
FRACTIONS = (0.5, 0.8)
RATE_WINDOW_S = 10  # the recording rules' rate10s
RULE_LAG_S = (0, 1, 2, 3, 4)  # a rule's rate trails the instant by a scrape and an evaluation
MONITOR_POLL_S = 1.0  # services/queue_monitor.py samples the queues this often (QUEUE_DEPTH_INTERVAL_S)

LOAD_PANEL = ("Load", "Requests per second: sent by Locust, received by the API")
RATE_PANEL = ("Queues", "Enqueue rate vs completion rate")
BACKLOG_PANEL = ("Queues", "Backlog: tasks waiting in each queue")


@dataclass
class Reading:
    what: str  # e.g. "Load: Locust", "Queues: completion rate"
    fraction: float  # of the load's length
    at: float  # unix time
    seen: float | None  # what the panel's query answered then
    truth: float | None
    slack: float = 0.0  # an absolute allowance on top of the tolerance (tasks running, a count between two reads)
    mean: float | None = None  # the record's figure over the whole load, where the truth is the moment's

    @property
    def ok(self) -> bool:
        if self.seen is None or self.truth is None:
            return False
        return abs(self.seen - self.truth) <= TOLERANCE * abs(self.truth) + self.slack

    def line(self) -> str:
        seen = "-" if self.seen is None else f"{self.seen:.1f}"
        truth = "-" if self.truth is None else f"{self.truth:.1f}"
        ratio = f"{self.seen / self.truth:.2f}" if self.seen is not None and self.truth else "-"
        mean = "-" if self.mean is None or self.seen is None else f"{self.mean:.1f} ({self.seen / self.mean:.2f})"
        ok = "yes" if self.ok else "NO"
        return f"| {self.what} | {100 * self.fraction:.0f} % | {seen} | {truth} | {ratio} | {ok} | {mean} |"


def panel_targets(dashboard: str, title: str, queue: str | None = None) -> dict[str, str]:
    """refId -> the panel's query as it stands in the dashboard file, variables replaced (`$queue` = queue)."""
    for _, board in panels.load_dashboards():
        if board.get("title") != dashboard:
            continue
        values = panels.dashboard_values(board, {"queue": queue} if queue else None)
        for panel in panels.iter_panels(board):
            if panel.get("title") == title:
                return {t["refId"]: panels.substitute(t["expr"], values) for t in panel["targets"] if t.get("expr")}
    raise KeyError(f"no panel {dashboard} / {title} in grafana/dashboards")


def instant(prometheus_url: str, expr: str, at: float) -> list[tuple[dict, float, float]]:
    """(labels, value, sample time) of every series `expr` answers at `at`."""
    query = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{prometheus_url.rstrip('/')}/api/v1/query?{query}", timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise panels.PanelQueryError(f"{body.get('error')}: {expr}")
    return [(r["metric"], float(r["value"][1]), float(r["value"][0])) for r in body["data"]["result"]]


def total(prometheus_url: str, expr: str, at: float) -> float | None:
    """The sum of every series' value at `at` (a panel's lines stacked), None without any."""
    answer = [v for _, v, _ in instant(prometheus_url, expr, at) if v == v]
    return sum(answer) if answer else None


def answered_from(prometheus_url: str, exprs: list[str], at: float, until: float) -> float:
    """The first instant from `at` (a second at a time, up to `until`) at which every one of
    `exprs` answers: a scrape that failed on a busy machine leaves its series stale, and the
    panel shows a gap there until the next scrape, not a wrong value. `at` when none does."""
    when = at
    while when <= until:
        if all(instant(prometheus_url, expr, when) for expr in exprs):
            return when
        when += 1.0
    return at


class Timeline:
    """The record's ledger timeline: at, enqueued, completed, failed, pending, once a second."""

    def __init__(self, record: dict):
        timeline = record.get("timeline") or {}
        fields = timeline.get("fields") or []
        self.rows = [dict(zip(fields, row)) for row in timeline.get("rows") or []]

    def value(self, field: str, at: float) -> float | None:
        """`field` at `at`, interpolated between the two rows around it."""
        rows = self.rows
        if not rows or at < rows[0]["at"] or at > rows[-1]["at"]:
            return None
        for a, b in zip(rows, rows[1:]):
            if a["at"] <= at <= b["at"]:
                span = b["at"] - a["at"]
                share = (at - a["at"]) / span if span else 0.0
                return a[field] + share * (b[field] - a[field])
        return float(rows[-1][field])

    def bounds(self, field: str, at: float) -> tuple[float, float] | None:
        """A count's range at `at`: from the row at or before it to the row at or after it.
        Before the first row, from 0: the ledger counts the run's own tasks, none before it."""
        before = [r[field] for r in self.rows if r["at"] <= at] or [0]
        after = [r[field] for r in self.rows if r["at"] >= at]
        return (float(before[-1]), float(after[0])) if after else None

    def rate(self, field: str, end: float, window_s: float = RATE_WINDOW_S) -> float | None:
        first, last = self.value(field, end - window_s), self.value(field, end)
        return None if first is None or last is None else (last - first) / window_s

    def values_between(self, field: str, start: float, end: float) -> list[float]:
        inside = [float(r[field]) for r in self.rows if start <= r["at"] <= end]
        around = [self.value(field, start), self.value(field, end)]
        return inside + [v for v in around if v is not None]


def samples(prometheus_url: str, selector: str, range_s: float, at: float) -> dict[str, list[tuple[float, float]]]:
    """instance -> the (time, value) samples of `selector` in the `range_s` before `at`, each
    instance's series summed per sample time (a target's series are scraped together)."""
    query = urllib.parse.urlencode({"query": f"{selector}[{range_s:g}s]", "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{prometheus_url.rstrip('/')}/api/v1/query?{query}", timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise panels.PanelQueryError(f"{body.get('error')}: {selector}")
    by_instance: dict[str, dict[float, float]] = {}
    for series in body["data"]["result"]:
        points = by_instance.setdefault(series["metric"].get("instance", ""), {})
        for t, v in series["values"]:
            points[float(t)] = points.get(float(t), 0.0) + float(v)
    return {instance: sorted(points.items()) for instance, points in by_instance.items()}


def extrapolation(points: list[tuple[float, float]], start: float, end: float) -> float | None:
    """What Prometheus multiplies a counter's increase over `points` by to make its rate
    over the window [start, end] (promql's extrapolatedRate); None below two samples."""
    if len(points) < 2:
        return None
    (first_t, first_v), (last_t, last_v) = points[0], points[-1]
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    average = sampled / (len(points) - 1)
    to_start, to_end = first_t - start, end - last_t
    increase = last_v - first_v
    if increase > 0 and first_v >= 0:
        to_start = min(to_start, sampled * first_v / increase)
    threshold = average * 1.1
    covered = (
        sampled + (to_start if to_start < threshold else average / 2) + (to_end if to_end < threshold else average / 2)
    )
    return covered / sampled / (end - start)


RULES = sorted((panels.ROOT / "prometheus" / "rules").glob("*.yml"))
_RULE_RATE = re.compile(r"rate\((\w+)\[(\d+)s\]\)")


def rule_counter(rule: str) -> tuple[str, float] | None:
    """The counter a `...:rate10s` recording rule takes the rate of, and the rate's range."""
    for path in RULES:
        found = re.search(rf"- record: {re.escape(rule)}\n\s+expr: (.*)", path.read_text())
        if found and (rate := _RULE_RATE.search(found.group(1))):
            return rate.group(1), float(rate.group(2))
    return None


def sampled_truths(
    prometheus_url: str, expr: str, at: float, timeline: "Timeline", field: str
) -> list[tuple[float, float]]:
    """The ledger's `field` rate as the panel query `expr` (a recording rule's rate, its
    label matchers) computed it at `at`, as (truth, allowance): over the samples the rule
    read at the evaluation the panel showed, extrapolated alike, every target's share of
    the truth alike. Between two rows of the timeline a count is only known to lie between
    theirs (a loaded API answers the reads seconds apart): the allowance is half that
    range. Two candidates: those samples, and those without the newest, which a scrape
    still under way when the rule was evaluated had not yet written."""
    found = re.search(r"(\w+:\w+:rate\d+s)(\{[^}]*\})?", expr)
    counter = rule_counter(found.group(1)) if found else None
    if not found or counter is None:
        return []
    rule, matchers = found.group(1), found.group(2) or ""
    evaluated = [v for _, v, _ in instant(prometheus_url, f"timestamp({rule}{matchers})", at)]
    if not evaluated:
        return []
    metric, range_s = counter
    evaluated_at = max(evaluated)
    start = evaluated_at - range_s
    by_instance = samples(prometheus_url, f"{metric}{matchers}", range_s, evaluated_at)
    truths = []
    for drop_newest in (False, True):
        low = high = 0.0
        for points in by_instance.values():
            points = points[:-1] if drop_newest else points
            factor = extrapolation(points, start, evaluated_at)
            first, last = timeline.bounds(field, points[0][0]), timeline.bounds(field, points[-1][0])
            if factor is None or first is None or last is None:
                break
            low += max(0.0, last[0] - first[1]) * factor / len(by_instance)
            high += (last[1] - first[0]) * factor / len(by_instance)
        else:
            truths.append(((low + high) / 2, (high - low) / 2))
    return truths


def _closest(seen: float | None, candidates: list[float | None]) -> float | None:
    """The candidate truth nearest the reading (the lag is unknown within its bounds)."""
    known = [c for c in candidates if c is not None]
    if not known:
        return None
    return min(known, key=lambda c: abs(c - seen)) if seen is not None else known[0]


def running_slack(record: dict) -> float:
    """Tasks a worker may hold taken and not yet settled: its concurrency, per replica."""
    limits = ((record.get("limits") or {}).get("workers") or {}).get(record.get("worker")) or {}
    return float((limits.get("concurrency") or 1) * (limits.get("replicas") or 1))


def rate_truths(
    prometheus_url: str, expr: str, at: float, timeline: "Timeline", field: str
) -> list[tuple[float | None, float]]:
    """The truths, each with its allowance, a rate reading may be held to: over the samples
    it was computed from, else over the window ending at each lag a scrape and a rule
    evaluation allow."""
    if not timeline.rows:
        return []
    return [*sampled_truths(prometheus_url, expr, at, timeline, field)] or [
        (timeline.rate(field, at - lag), 0.0) for lag in RULE_LAG_S
    ]


def nearest(seen: float | None, candidates: list[tuple[float | None, float]]) -> tuple[float | None, float]:
    """The (truth, allowance) that leaves the reading least outside it."""
    known = [(t, a) for t, a in candidates if t is not None]
    if not known:
        return None, 0.0
    if seen is None:
        return known[0]
    return min(known, key=lambda c: max(0.0, abs(seen - c[0]) - c[1]))


def readings(prometheus_url: str, record: dict, fractions=FRACTIONS) -> list[Reading]:
    """Every checked panel query at each fraction of the record's load."""
    start, end, queue = record["load_started_at"], record["load_ended_at"], record.get("worker")
    load = panel_targets(*LOAD_PANEL)
    rates = panel_targets(*RATE_PANEL, queue=queue)
    backlog = panel_targets(*BACKLOG_PANEL, queue=queue)
    timeline = Timeline(record)
    out = []
    queries = [load["A"], load["B"], *([rates["A"], rates["B"], backlog["A"]] if timeline.rows else [])]
    for fraction in fractions:
        at = answered_from(prometheus_url, queries, start + fraction * (end - start), end)
        for ref, what in (("A", "Load: Locust"), ("B", "Load: API")):
            seen = total(prometheus_url, load[ref], at)
            moment, allowance = nearest(seen, rate_truths(prometheus_url, load[ref], at, timeline, "enqueued"))
            truth = moment if timeline.rows else record["rps"]
            out.append(Reading(what, fraction, at, seen, truth, slack=allowance, mean=record["rps"]))
        if not timeline.rows:
            continue
        for ref, field, what in (("A", "enqueued", "enqueue rate"), ("B", "completed", "completion rate")):
            seen = total(prometheus_url, rates[ref], at)
            truth, allowance = nearest(seen, rate_truths(prometheus_url, rates[ref], at, timeline, field))
            out.append(Reading(f"Queues: {what}", fraction, at, seen, truth, slack=allowance))
        depth = instant(prometheus_url, backlog["A"], at)
        seen, scraped = (depth[0][1], depth[0][2]) if depth else (None, at)
        truth = _closest(seen, timeline.values_between("pending", scraped - MONITOR_POLL_S - 1, scraped))
        out.append(Reading("Queues: backlog", fraction, at, seen, truth, slack=running_slack(record)))
    return out


def table(rows: list[Reading]) -> str:
    head = (
        "| panel query | at | panel | truth then | panel / truth | within 15 % | the record's mean (panel / mean) |\n"
        "|---|---:|---:|---:|---:|---|---:|"
    )
    return "\n".join([head, *(r.line() for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.compose.panel_truth", description=__doc__.split("\n")[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus base URL")
    parser.add_argument("records", nargs="+", type=Path, help="results/<run>.json of queue runs")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.records:
        record = json.loads(path.read_text())
        rows = readings(args.prometheus, record)
        print(f"\n{record['run']}: {record.get('duration_s')} s of load at {record.get('rps')} req/s")
        print(table(rows))
        failed += sum(not r.ok for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
