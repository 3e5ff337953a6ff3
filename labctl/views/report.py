"""`make report run=NAME`: PNG plots of a run from Prometheus, next to its JSON.

The report asks Prometheus (query_range over the run's window, the lab's
running Prometheus: its data volume outlives `make down`) for four panels:
throughput (requests sent, tasks enqueued and completed per second), backlog
(queue depth; for the event-loop scenarios the API's loop lag and the probe's
time since its last success), latency (Locust's p50/p95/p99, and the tasks' end
to end p95) and CPU against the limit of each container involved.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from labctl.clients.prometheus import Prometheus
from labctl.errors import LabError, LabNotRunning
from labctl.platform.orchestrator import orchestrator
from labctl.records.run import RunRecord
from labctl.records.store import Store
from labctl.render.console import Console
from labctl.render.run_figure import Panel, Series, figure_png

RATE = "[10s]"  # five scrapes at the 2 s scrape interval

# A line of a panel: (legend template, PromQL, line style); a panel: (title, y label, its lines).
Query = tuple[str, str, dict[str, Any]]
PanelSpec = tuple[str, str, list[Query]]


def _shared_queries(record: RunRecord) -> tuple[Query, list[Query], list[Query]]:
    """The requests sent, Locust's latency quantiles and the CPU against the limits: in both kinds of panels."""
    subjects = record.subjects or ["api"]
    services = "|".join(dict.fromkeys([*subjects, "api"]))
    gen = "locust-master|locust-worker"
    locust_q: list[Query] = [
        ("Locust p50", f"histogram_quantile(0.5, sum by (le) (rate(locust_response_time_seconds_bucket{RATE})))", {}),
        ("Locust p95", f"histogram_quantile(0.95, sum by (le) (rate(locust_response_time_seconds_bucket{RATE})))", {}),
        ("Locust p99", f"histogram_quantile(0.99, sum by (le) (rate(locust_response_time_seconds_bucket{RATE})))", {}),
    ]
    sent: Query = ("requests sent (Locust)", f"sum(rate(locust_requests_total{RATE}))", {"color": "black", "lw": 2})
    cpu: list[Query] = [
        ("{service} CPU", f'sum by (service) (rate(lab_cpu_seconds_total{{service=~"{services}|{gen}"}}{RATE}))', {}),
        ("{service} limit", f'max by (service) (lab_cpu_limit_cores{{service=~"{services}"}})', {"ls": "--", "lw": 1}),
    ]
    return sent, locust_q, cpu


def _queue_panels(record: RunRecord, sent: Query, locust_q: list[Query], cpu: list[Query]) -> list[PanelSpec]:
    """A queue run's panels: enqueued against completed, the backlog, the tasks' end-to-end latency."""
    queues = "|".join((record.tasks.per_queue if record.tasks else {}) or [record.worker or ".*"])
    return [
        (
            "Throughput",
            "per second",
            [
                sent,
                (
                    "{queue} enqueued",
                    f'sum by (queue) (rate(lab_enqueued_total{{queue=~"{queues}"}}{RATE}))',
                    {"ls": ":"},
                ),
                (
                    "{queue} completed",
                    f'sum by (queue) (rate(lab_task_completed_total{{queue=~"{queues}"}}{RATE}))',
                    {},
                ),
            ],
        ),
        (
            "Backlog (tasks waiting)",
            "tasks",
            [
                ("{queue}", f'max by (queue) (lab_queue_depth{{queue=~"{queues}"}})', {}),
            ],
        ),
        (
            "Latency",
            "seconds",
            [
                *locust_q,
                (
                    "{queue} task end-to-end p95",
                    (
                        "histogram_quantile(0.95, sum by (le, queue) "
                        f'(rate(lab_task_latency_seconds_bucket{{queue=~"{queues}"}}{RATE})))'
                    ),
                    {"ls": "--"},
                ),
            ],
        ),
        ("CPU vs limit", "cores", cpu),
    ]


def _api_panels(sent: Query, locust_q: list[Query], cpu: list[Query]) -> list[PanelSpec]:
    """Any other run's panels: the API's answers, the event loop and the probe."""
    return [
        (
            "Throughput",
            "per second",
            [
                sent,
                (
                    "API {handler} {status}",
                    f'sum by (handler, status) (rate(http_requests_total{{job="api"}}{RATE}))',
                    {},
                ),
                ("probe {outcome}", f"sum by (outcome) (rate(lab_probe_requests_total{RATE}))", {"ls": ":"}),
            ],
        ),
        (
            "Event loop",
            "seconds",
            [
                ("API event-loop lag", 'max(lab_event_loop_lag_seconds{service="api"})', {}),
                ("probe: time since last success", "max(lab_probe_seconds_since_success)", {"ls": "--"}),
            ],
        ),
        ("Latency", "seconds", locust_q),
        ("CPU vs limit", "cores", cpu),
    ]


def panels_for(record: RunRecord) -> list[PanelSpec]:
    """(title, y label, [(legend template, PromQL, line style)]) for the run's four panels."""
    sent, locust_q, cpu = _shared_queries(record)
    if record.scenario == "queue":
        return _queue_panels(record, sent, locust_q, cpu)
    return _api_panels(sent, locust_q, cpu)


def fetch(prom: Prometheus, panel: PanelSpec, start: float, t0: float, t1: float, step: float) -> Panel:
    """One panel's series from Prometheus, x in seconds since the load's start."""
    title, ylabel, queries = panel
    series = []
    for legend, expr, style in queries:
        for found in prom.query_range(expr, t0, t1, step):
            xs = [float(t) - start for t, _ in found["values"]]
            ys = [float(v) for _, v in found["values"]]
            series.append(Series(legend.format_map(_Default(found["metric"])), xs, ys, style))
    return Panel(title, ylabel, series)


class _Default(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


def report(directory: Path, run: str, ui: Console) -> int:
    store = Store(directory)
    record = store.run(run)
    addr = orchestrator().port("prometheus", 9090)
    if not addr:
        raise LabNotRunning("Prometheus is not running: `make up` (its data survives `make down`)")
    start = record.load_started_at
    end = record.window_end or (record.tasks.last_settled_at if record.tasks else None) or record.load_ended_at
    if not start or not end or not record.load_ended_at:
        raise LabError(f"{store.path(run)} has no time window")
    t0, t1 = start - 20, end + 20
    step = max(1.0, round((t1 - t0) / 300))
    prom = Prometheus(addr)
    panels = [fetch(prom, panel, start, t0, t1, step) for panel in panels_for(record)]
    out = store.write_bytes(run, ".png", figure_png(record, panels, (start, record.load_ended_at, end)))
    ui.say(
        f"wrote {out} ({time.strftime('%H:%M:%S', time.localtime(start))} - "
        f"{time.strftime('%H:%M:%S', time.localtime(end))}, step {step:g} s)"
    )
    if empty := [p.title for p in panels if not p.series]:
        ui.say(f"no data for: {', '.join(empty)} (scraped? `make up` with Prometheus; the window is {t1 - t0:.0f} s)")
    return 0
