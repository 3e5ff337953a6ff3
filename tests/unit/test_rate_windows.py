"""Every range a recording rule or a panel reads holds at least three scrapes
of every target it reads: a rate over fewer samples reads nothing, or one
jump, for a whole window. Static: prometheus/prometheus.yml's scrape
intervals against the ranges in prometheus/rules/*.yml and the dashboards."""

import re
from pathlib import Path

import pytest
import yaml

from tests.compose import panels as panels_mod

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "prometheus" / "prometheus.yml").read_text())
RULES = sorted((ROOT / "prometheus" / "rules").glob("*.yml"))
MIN_SAMPLES = 3

# The job that exports a metric, by the metric's prefix; every other metric
# comes from the lab's own processes, scraped at the global interval.
EXPORTER_JOBS = {"flower_": "flower", "redis_": "redis-exporter", "locust_": "locust-master"}

_RANGE = re.compile(r"([A-Za-z_:][\w:]*)\s*(?:\{[^{}]*\})?\s*\[(\d+)([smh])\]")
_SUBQUERY = re.compile(r"\[(\d+)([smh]):(?:\d+[smh])?\]")
_METRIC = re.compile(r"\b([a-z_][\w]*(?::[\w]+)*)\s*(?=\{|\[|\)|$|\s)")
_UNIT = {"s": 1, "m": 60, "h": 3600}


def seconds(text: str) -> float:
    return float(text[:-1]) * _UNIT[text[-1]]


def scrape_interval(metric: str) -> float:
    """Seconds between two samples of `metric`: its job's scrape interval, or
    the rule group's evaluation interval for a recorded series."""
    default = seconds(CONFIG["global"]["scrape_interval"])
    if ":" in metric:
        return seconds(CONFIG["global"]["evaluation_interval"])
    for prefix, job in EXPORTER_JOBS.items():
        if metric.startswith(prefix):
            config = next(c for c in CONFIG["scrape_configs"] if c["job_name"] == job)
            return seconds(config.get("scrape_interval", CONFIG["global"]["scrape_interval"]))
    return default


def queries() -> list[tuple[str, str]]:
    """(where, expr) for every rule and every panel target, Grafana's variables replaced."""
    out = []
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [(f"{path.name}: {r['record']}", r["expr"]) for r in group["rules"]]
    for path, dashboard in panels_mod.load_dashboards():
        values = {**panels_mod.variable_values(dashboard), **panels_mod.builtin_values()}
        for panel in panels_mod.iter_panels(dashboard):
            for target in panel.get("targets", []):
                if expr := target.get("expr"):
                    where = f"{path.name}: {panel.get('title')} [{target.get('refId')}]"
                    out.append((where, panels_mod.substitute(expr, values)))
    return out


def windows(expr: str) -> list[tuple[str, float]]:
    """(metric, range seconds) for every range selector, and every metric under a subquery's range."""
    found = [(m.group(1), float(m.group(2)) * _UNIT[m.group(3)]) for m in _RANGE.finditer(expr)]
    for sub in _SUBQUERY.finditer(expr):
        inner = expr[: sub.start()]
        found += [(name, float(sub.group(1)) * _UNIT[sub.group(2)]) for name in _metrics(inner)]
    return found


def _metrics(expr: str) -> set[str]:
    words = set(_METRIC.findall(re.sub(r'"[^"]*"', "", expr)))
    functions = {"sum", "max", "min", "avg", "by", "without", "rate", "increase", "changes", "or", "and", "on"}
    return {w for w in words if w not in functions and ("_" in w or ":" in w)}


QUERIES = queries()


def test_the_windows_are_found():
    """The reader sees the ranges it must check (a parser that finds none passes everything)."""
    assert windows("rate(flower_events_total[20s])") == [("flower_events_total", 20.0)]
    assert ("process_start_time_seconds", 8.0) in windows("changes(max by (job) (process_start_time_seconds)[8s:])")
    assert sum(len(windows(expr)) for _, expr in QUERIES) > 30


@pytest.mark.parametrize("where, expr", QUERIES, ids=[w for w, _ in QUERIES])
def test_every_range_holds_three_scrapes_of_what_it_reads(where, expr):
    for metric, window_s in windows(expr):
        every = scrape_interval(metric)
        assert window_s >= MIN_SAMPLES * every, (
            f"{where}: {metric} over {window_s:g} s holds fewer than {MIN_SAMPLES} samples "
            f"(one every {every:g} s): {expr}"
        )
