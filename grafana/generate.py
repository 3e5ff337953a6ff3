"""Writes the lab's Grafana dashboards, grafana/dashboards/*.json, from the panel lists below.

    python grafana/generate.py            # (re)write grafana/dashboards/*.json
    python grafana/generate.py --check    # exit 1 naming every file that differs from this script's output
    python grafana/generate.py --out DIR  # write them elsewhere

Edit this file, never the JSON: tests/unit/test_dashboards_generated.py fails when the
committed JSON is not exactly this script's output. Every panel is a time series
with one body (timeseries()); a dashboard is a list of rows, each row's panels
laid out left to right, 8 units high, wrapping onto a new line at 24 units.
Only the standard library: it runs wherever Python does.
"""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DASHBOARDS = Path(__file__).resolve().parent / "dashboards"
PROMETHEUS = {"type": "prometheus", "uid": "prometheus"}
GRAFANA = {"type": "grafana", "uid": "-- Grafana --"}
# A JSON object of Grafana's dashboard model: a dashboard, a panel, a variable, ...
Json = dict[str, Any]
WIDTH, HEIGHT = 24, 8  # Grafana's grid is 24 units wide; every panel is 8 high

# The task metrics' labels, filtered by the Queues dashboard's variables.
QKV = '{queue=~"$queue", kind=~"$kind", variant=~"$variant"}'
# Scrape jobs that run no queue's tasks: left out of the restart, OOM and replica counts.
NOT_WORKERS = '{job!~"prometheus|redis-exporter|flower|locust-.*|probe"}'
LOCUST = '{service=~"locust-master|locust-worker"}'  # the load generator's own containers


# ---- panels ------------------------------------------------------------------------
def override(regex: str, properties: Json) -> Json:
    """Field properties for the series whose name matches /regex/."""
    return {
        "matcher": {"id": "byRegexp", "options": regex},
        "properties": [{"id": key, "value": value} for key, value in properties.items()],
    }


def dashed(regex: str) -> Json:
    """The series whose name matches /regex/ drawn dashed (a limit, a p50 beside its p95, ...)."""
    return override(regex, {"custom.lineStyle": {"fill": "dash", "dash": [10, 10]}})


def dotted(regex: str) -> Json:
    """The series whose name matches /regex/ drawn dotted (a p99 beside its p95)."""
    return override(regex, {"custom.lineStyle": {"fill": "dot", "dash": [0, 10]}})


def targets(queries: dict[str, str], refs: str) -> list[Json]:
    """One Prometheus range query per legend: expr pair, refIds taken from refs in order."""
    if len(refs) < len(queries):
        raise ValueError(f"{len(queries)} queries, only {len(refs)} refIds: {refs!r}")
    return [
        {
            "datasource": PROMETHEUS,
            "editorMode": "code",
            "expr": expr,
            "legendFormat": legend,
            "range": True,
            "instant": False,
            "refId": ref,
        }
        for ref, (legend, expr) in zip(refs, queries.items())
    ]


def timeseries(
    title: str,
    description: str,
    unit: str,
    queries: dict[str, str],
    w: int = 12,
    overrides: Sequence[Json] = (),
    red_line: float | None = None,
    bars: bool = False,
    refs: str = "ABCDEFGHIJ",
) -> Json:
    """A time series from 0 up, its legend a table of last and max values.

    queries: legend format -> PromQL expression. w: width (of 24). red_line draws
    a red threshold line at that value; bars draws bars instead of lines.
    """
    steps: list[Json] = [{"color": "green", "value": None}]
    if red_line is not None:
        steps.append({"color": "red", "value": red_line})
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": PROMETHEUS,
        "gridPos": {"h": HEIGHT, "w": w},  # x and y: layout()
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "color": {"mode": "palette-classic"},
                "custom": {
                    "drawStyle": "bars" if bars else "line",
                    "lineWidth": 1,
                    "fillOpacity": 80 if bars else 10,
                    "gradientMode": "none",
                    "showPoints": "never",
                    "pointSize": 4,
                    "spanNulls": False,
                    "lineInterpolation": "linear",
                    "axisPlacement": "auto",
                    "axisLabel": "",
                    "stacking": {"mode": "none", "group": "A"},
                    "thresholdsStyle": {"mode": "off" if red_line is None else "line"},
                },
                "thresholds": {"mode": "absolute", "steps": steps},
                "mappings": [],
                "min": 0,
            },
            "overrides": list(overrides),
        },
        "options": {
            "legend": {
                "showLegend": True,
                "displayMode": "table",
                "placement": "bottom",
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets(queries, refs),
        "id": None,  # layout()
    }


def row(title: str, *panels: Json) -> list[Json]:
    """A row header and the panels under it."""
    header = {
        "type": "row",
        "title": title,
        "collapsed": False,
        "id": None,
        "gridPos": {"h": 1, "w": WIDTH},
        "panels": [],
    }
    return [header, *panels]


def layout(rows: list[list[Json]]) -> list[Json]:
    """Places and numbers the panels: each row header on a line of its own, its panels left to right below it."""
    out, y = [], 0
    for header, *panels in rows:
        header["gridPos"].update(x=0, y=y)
        x, y = 0, y + 1
        for panel in panels:
            if x + panel["gridPos"]["w"] > WIDTH:
                x, y = 0, y + HEIGHT
            panel["gridPos"].update(x=x, y=y)
            x += panel["gridPos"]["w"]
        y += HEIGHT if panels else 0
        out += [header, *panels]
    for number, panel in enumerate(out, 1):
        panel["id"] = number
    return out


# ---- variables ---------------------------------------------------------------------
ALL = {"selected": True, "text": ["All"], "value": ["$__all"]}


def query_variable(name: str, label: str, description: str, query: str) -> Json:
    """Multi-value, with All, its values read from Prometheus whenever the time range changes."""
    return {
        "type": "query",
        "name": name,
        "label": label,
        "description": description,
        "datasource": PROMETHEUS,
        "query": {"qryType": 1, "query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,
        "regex": "",
        "sort": 0,
        "multi": True,
        "includeAll": True,
        "allValue": ".+",
        "current": ALL,
        "options": [],
        "hide": 0,
        "skipUrlSync": False,
    }


def custom_variable(name: str, label: str, description: str, values: list[str]) -> Json:
    """Multi-value, with All, over a fixed list of values."""
    options = [{"selected": True, "text": "All", "value": "$__all"}]
    options += [{"selected": False, "text": value, "value": value} for value in values]
    return {
        "type": "custom",
        "name": name,
        "label": label,
        "description": description,
        "query": ",".join(values),
        "multi": True,
        "includeAll": True,
        "allValue": ".+",
        "current": ALL,
        "options": options,
        "hide": 0,
        "skipUrlSync": False,
    }


def textbox(name: str, label: str, description: str) -> Json:
    """Free text, empty by default."""
    return {
        "type": "textbox",
        "name": name,
        "label": label,
        "description": description,
        "query": "",
        "current": {"selected": False, "text": "", "value": ""},
        "options": [{"selected": True, "text": "", "value": ""}],
        "hide": 0,
        "skipUrlSync": False,
    }


# ---- dashboards --------------------------------------------------------------------
def dashboard(
    uid: str,
    title: str,
    description: str,
    rows: list[list[Json]],
    variables: Sequence[Json] = (),
    run_tags: Sequence[str] = ("lab-run",),
) -> Json:
    """A dashboard of the Lab folder: the run annotations (tagged run_tags), links to the other lab dashboards."""
    return {
        "id": None,
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["lab"],
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,  # shared crosshair
        "liveNow": False,
        "refresh": "2s",  # Grafana's minimum; Prometheus scrapes and evaluates the rules every 2 s
        "schemaVersion": 39,
        "version": 1,
        "weekStart": "",
        "time": {"from": "now-15m", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": GRAFANA,
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                },
                {
                    # The regions load runs write (grafana/README.md, "Run annotations").
                    "datasource": GRAFANA,
                    "enable": True,
                    "hide": False,
                    "iconColor": "purple",
                    "name": "Lab runs",
                    "target": {"type": "tags", "tags": list(run_tags), "matchAny": False, "limit": 100},
                },
            ]
        },
        "links": [
            {
                "title": "Lab dashboards",
                "type": "dashboards",
                "tags": ["lab"],
                "asDropdown": False,
                "includeVars": False,
                "keepTime": True,
                "targetBlank": False,
                "icon": "external link",
                "tooltip": "",
                "url": "",
            }
        ],
        "templating": {"list": list(variables)},
        "panels": layout(rows),
    }


# ---- the dashboards ------------------------------------------------------------------
def per_queue(metric: str) -> str:
    """metric filtered by the Queues dashboard's variables, summed per queue."""
    return f"sum by (queue) ({metric}{QKV})"


def quantiles_per_queue(histogram: str) -> dict[str, str]:
    """The p50, p95 and p99 of a task histogram per queue over the rules' window, from its per-(queue, kind,
    variant) bucket rates filtered by the dashboard's variables."""
    buckets = f"sum by (queue, le) (queue_kind_variant:{histogram}_bucket:rate10s{QKV})"
    return {
        f"{{{{queue}}}} {p}": f"histogram_quantile({q}, {buckets})"
        for p, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
    }


def or_zero(expr: str, like: str) -> str:
    """expr, or 0 for each queue that `like` has and expr has no series for yet."""
    return f"{expr} or {like} * 0"


ENQUEUED = per_queue("lab_enqueued_total")
STARTED = per_queue("lab_task_started_total")
COMPLETED = per_queue("lab_task_completed_total")
FAILED = per_queue("lab_task_failed_total")

QUEUES = dashboard(
    "lab-queues",
    "Queues",
    "Every task queue side by side: throughput, backlog, timing and the workers' resources. Variables: queue, kind and variant filter the task metrics (labels queue/kind/variant). `run` is NOT a metric label (the ledger's run lives only in Redis): it only filters the 'Lab runs' annotations, which the load tool writes with tags [\"lab-run\", <run>, <worker>]; leave it empty to see every run, type a run name to see only that one. See grafana/README.md.",
    [
        row(
            "Throughput and backlog",
            timeseries(
                "Enqueue rate vs completion rate",
                "Tasks per second accepted by each queue (API side) against tasks completed and failed (worker side), over 10 s. When completions stay below enqueues the backlog grows.",
                "suffix:tasks/s",
                {
                    "{{queue}} enqueued": per_queue("queue_kind_variant:lab_enqueued:rate10s"),
                    "{{queue}} completed": per_queue("queue_kind_variant:lab_task_completed:rate10s"),
                    "{{queue}} failed": per_queue("queue_kind_variant:lab_task_failed:rate10s"),
                },
                overrides=[dashed("/completed$/")],
            ),
            timeseries(
                "Backlog: tasks waiting in each queue",
                "Tasks enqueued and not yet started. Broker queues: measured in Redis by the queue monitor (max over its replicas). background: scheduled in the API processes (sum over replicas). Not split by kind/variant.",
                "short",
                {
                    "{{queue}}": 'max by (queue) (lab_queue_depth{queue=~"$queue", queue!="background"})'
                    ' or sum by (queue) (lab_queue_depth{queue=~"$queue", queue="background"})',
                },
            ),
            timeseries(
                "Completed vs enqueued, cumulative",
                "Counters since each process started (a restart resets its share). The gap between the two lines of a queue is what is still pending or failed.",
                "short",
                {"{{queue}} enqueued": ENQUEUED, "{{queue}} completed": COMPLETED},
                overrides=[dashed("/completed$/")],
            ),
            timeseries(
                "Failures, duplicates and pending",
                "Cumulative counts per queue: tasks whose work raised; executions of a task that had already been settled (delivered twice); enqueue attempts that failed (any kind/variant); pending = enqueued - completed - failed. All are counters since each process started: after a worker restart its completed count starts again from 0 and pending jumps up; the ledger (GET /api/v1/runs/<run>) is exact.",
                "short",
                {
                    "{{queue}} failed": or_zero(FAILED, STARTED),
                    "{{queue}} duplicates": or_zero(per_queue("lab_task_duplicates_total"), STARTED),
                    "{{queue}} enqueue errors": or_zero(
                        'sum by (queue) (lab_enqueue_errors_total{queue=~"$queue"})', ENQUEUED
                    ),
                    "{{queue}} pending": f"{ENQUEUED} - ({or_zero(COMPLETED, ENQUEUED)}) - ({or_zero(FAILED, ENQUEUED)})",
                },
            ),
        ),
        row(
            "Timing",
            timeseries(
                "Task duration p50 and p95",
                "Execution time of a task's work, from start to end, over 10 s.",
                "s",
                {
                    "{{queue}} {{kind}}/{{variant}} p50": f"queue_kind_variant:lab_task_duration_seconds:p50_10s{QKV}",
                    "{{queue}} {{kind}}/{{variant}} p95": f"queue_kind_variant:lab_task_duration_seconds:p95_10s{QKV}",
                },
                w=8,
                overrides=[dashed("/p50$/")],
            ),
            timeseries(
                "Wait from enqueue to start: p50, p95, p99 per queue",
                "Time a task spent queued, from enqueued_at (set by the API) to the start of its execution, over 10 s: "
                "what make capacity holds under max_wait.",
                "s",
                quantiles_per_queue("lab_task_wait_seconds"),
                w=8,
                overrides=[dashed("/p50$/"), dotted("/p99$/")],
            ),
            timeseries(
                "End-to-end latency, enqueue to completion: p50, p95, p99 per queue",
                "From enqueued_at to the end of the task's work, for tasks completed for the first time, over 10 s.",
                "s",
                quantiles_per_queue("lab_task_latency_seconds"),
                w=8,
                overrides=[dashed("/p50$/"), dotted("/p99$/")],
            ),
        ),
        row(
            "Workers",
            timeseries(
                "Tasks in progress",
                "Tasks executing right now, summed over the worker's processes and replicas.",
                "short",
                {"{{queue}}": per_queue("lab_tasks_in_progress")},
            ),
            timeseries(
                "Worker CPU, % of its limit",
                "CPU used by each container that runs the queue's tasks (the API for background), as a share of its CPU limit (the host's cores when it has none). 100% = saturated.",
                "percentunit",
                {"{{queue}} ({{job}} {{instance}})": 'instance:lab_cpu_usage:ratio_rate10s{queue=~"$queue"}'},
                red_line=1,
            ),
            timeseries(
                "CPU throttling: share of periods held back",
                "Of the CPU scheduler's 100 ms periods in which the container ran, the share in which it used up its CPU limit and was held back until the next one (cgroup cpu.stat: nr_throttled / nr_periods). Above 0 the limit, not the work, sets the pace; 100% = held back in every period.",
                "percentunit",
                {
                    "{{queue}} ({{job}} {{instance}})": 'instance:lab_cpu_throttled_periods:ratio_rate10s{queue=~"$queue"}'
                },
                w=8,
            ),
            timeseries(
                "Worker memory vs limit",
                "Memory: the working set, as docker stats shows it (cgroup usage minus inactive page cache, peak over 10 s), against the container's limit (dashed; the host's memory when it has none). Reaching it means an OOM kill.",
                "bytes",
                {
                    "{{queue}} used ({{job}} {{instance}})": 'instance:lab_memory_bytes:max10s{queue=~"$queue"}',
                    "{{queue}} limit ({{job}} {{instance}})": 'instance:lab_memory_limit_bytes:min10s{queue=~"$queue"}',
                },
                w=8,
                overrides=[dashed("/limit/")],
            ),
            timeseries(
                "Restarts, OOM kills and replicas up",
                "Restarts (bars): 1 where the newest process start time of a service (max of process_start_time_seconds by job) is newer than any it had in the five minutes before, for a rate interval after the new process is first scraped, however long it took to answer scrapes again (a worker starting at 0.2 CPU can take longer than a rate interval); a restarted container counts even when it comes back at a new address; an OOM kill with restart: unless-stopped is one too. Replicas up (line): scraped targets of the service that answered; Docker's DNS drops a stopped container, so a dead one shows as a drop here rather than as up == 0. OOM kills (bars): processes the kernel killed for lack of memory while the container lived on (lab_oom_kills_total: a Celery or process-pool child, which restarts nothing). When the main process is the one killed, its counter dies with the container: that OOM kill shows as a restart right after memory reached its limit.",
                "short",
                {
                    "{{job}} restarts": (
                        f"max by (job) (process_start_time_seconds{NOT_WORKERS}) > bool max by (job) "
                        f"(max_over_time(process_start_time_seconds{NOT_WORKERS}[5m] offset $__rate_interval))"
                    ),
                    "{{job}} OOM kills": f"sum by (job) (increase(lab_oom_kills_total{NOT_WORKERS}[$__rate_interval]))",
                    "{{job}} replicas up": f"sum by (job) (up{NOT_WORKERS})",
                },
                w=8,
                overrides=[override("/replicas up$/", {"custom.drawStyle": "line", "custom.fillOpacity": 0})],
                bars=True,
                refs="ACB",
            ),
        ),
        row(
            "Celery as Flower sees it",
            timeseries(
                "Celery workers online (Flower)",
                "Celery workers Flower currently sees as online (from their heartbeats).",
                "short",
                {"celery workers online": "sum(flower_worker_online)"},
                w=8,
            ),
            timeseries(
                "Celery task events per second (Flower)",
                "Task events the Celery workers send (-E), as Flower receives them, by type.",
                "suffix:events/s",
                {"celery {{type}}": "type:flower_events:rate20s"},
                w=16,
            ),
        ),
    ],
    variables=[
        query_variable(
            "queue",
            "Queue",
            "Queues to show (label queue): every queue the API serves (lab/queues.py), read from lab_enqueued_total.",
            "label_values(lab_enqueued_total, queue)",
        ),
        custom_variable("kind", "Kind", "Task kind (label kind).", ["io", "cpu"]),
        custom_variable(
            "variant",
            "Variant",
            "Task variant (label variant): io/simple, io/sync, io/thread, cpu/simple, cpu/process.",
            ["simple", "sync", "thread", "process"],
        ),
        textbox(
            "run",
            "Run (annotations only)",
            "Filters the 'Lab runs' annotations by their run tag; empty = every run. Not a metric label: the graphs are not filtered by it.",
        ),
    ],
    run_tags=["lab-run", "$run"],
)

API = dashboard(
    "lab-api",
    "API and event loop",
    "The API's HTTP traffic, the time to enqueue, the event-loop lag of the API and of every worker, and the API container's CPU and memory against its limits.",
    [
        row(
            "HTTP",
            timeseries(
                "Requests per second by route and status",
                "Requests the API answered, by route template and status code, over 10 s (/metrics excluded).",
                "reqps",
                {
                    "{{handler}} {{status}}": 'sum by (handler, status) (job_handler_method_status:http_requests:rate10s{job="api"})'
                },
            ),
            timeseries(
                "Response time p50, p95 and p99 (all routes)",
                "From the fine-grained histogram, which has no route label: every work route together; health and readiness probes and /metrics are left out.",
                "s",
                {
                    "p50": 'job:http_request_duration_highr_seconds:p50_10s{job="api"}',
                    "p95": 'job:http_request_duration_highr_seconds:p95_10s{job="api"}',
                    "p99": 'job:http_request_duration_highr_seconds:p99_10s{job="api"}',
                },
            ),
            timeseries(
                "Client and server errors (4xx, 5xx) per second",
                "Error responses per second: by class (a flat 0 means none), and by route and status when there are some. 503 = a queue's broker did not accept the task in time.",
                "reqps",
                {
                    "{{class}}": 'job_class:http_requests:rate10s{job="api"}',
                    "{{handler}} {{status}}": 'sum by (handler, status) (job_handler_method_status:http_requests:rate10s{job="api", status=~"[45].."})',
                },
                w=8,
            ),
            timeseries(
                "Requests in flight",
                "Requests being handled right now, by route.",
                "short",
                {"{{handler}}": 'sum by (handler) (http_requests_inprogress{job="api"})'},
                w=8,
            ),
            timeseries(
                "Mean response time by route",
                "Mean duration per route over 10 s (exact: sum over count of the per-route histogram, whose buckets run from 1 ms to 10 s).",
                "s",
                {"{{handler}}": 'job_handler:http_request_duration_seconds:mean10s{job="api"}'},
                w=8,
            ),
        ),
        row(
            "Enqueueing",
            timeseries(
                "Time to hand a task to its queue, p50 and p95",
                "How long the API took to record a task and hand it to its queue's broker.",
                "s",
                {
                    "{{queue}} p50": "queue:lab_enqueue_seconds:p50_10s",
                    "{{queue}} p95": "queue:lab_enqueue_seconds:p95_10s",
                },
                overrides=[dashed("/p50$/")],
            ),
            timeseries(
                "Enqueue errors per second by queue and reason",
                "Enqueue attempts that failed (timeout, connection, broker); reason=none is the zero line of a queue that enqueued without errors.",
                "suffix:errors/s",
                {"{{queue}} {{reason}}": "queue_reason:lab_enqueue_errors:rate10s"},
            ),
        ),
        row(
            "Event loop",
            timeseries(
                "Event-loop lag, API and every worker",
                "Worst delay of each process's event loop over the last 5 s (how late a 0.25 s timer fired). Lag delays every request or task that process handles.",
                "s",
                {"{{service}} ({{instance}})": "max by (service, instance) (lab_event_loop_lag_seconds)"},
                w=24,
            ),
        ),
        row(
            "API container",
            timeseries(
                "API CPU, % of its limit",
                "CPU used by the API container(s) as a share of the CPU limit. The API also runs the background queue's tasks.",
                "percentunit",
                {"api ({{instance}})": 'instance:lab_cpu_usage:ratio_rate10s{job="api"}'},
                w=8,
                red_line=1,
            ),
            timeseries(
                "API CPU throttling: share of periods held back",
                "Of the CPU scheduler's 100 ms periods in which the API ran, the share in which it used up its CPU limit and was held back until the next one.",
                "percentunit",
                {"api ({{instance}})": 'instance:lab_cpu_throttled_periods:ratio_rate10s{job="api"}'},
                w=8,
            ),
            timeseries(
                "API memory vs limit",
                "Memory: the working set, as docker stats shows it (peak over 10 s), against the container's limit (dashed).",
                "bytes",
                {
                    "api used ({{instance}})": 'instance:lab_memory_bytes:max10s{job="api"}',
                    "api limit ({{instance}})": 'instance:lab_memory_limit_bytes:min10s{job="api"}',
                },
                w=8,
                overrides=[dashed("/limit/")],
            ),
        ),
    ],
)

LOAD = dashboard(
    "lab-load",
    "Load",
    "What Locust sends and sees, and whether the load generator itself is the bottleneck (its CPU against its limit, next to the lab's busiest containers). Metric names: grafana/README.md. Empty until a Locust run exports them.",
    [
        row(
            "Locust",
            timeseries(
                "Locust users", "Simulated users Locust is running.", "short", {"users": "sum(locust_users)"}, w=8
            ),
            timeseries(
                "Requests per second: sent by Locust, received by the API",
                "Requests Locust sent, by request name, against requests the API answered (every route). If the API receives less than Locust tries to send, look at the generator's CPU.",
                "reqps",
                {
                    "sent: {{name}}": "sum by (name) (name_method:locust_requests:rate10s)",
                    "received by the API": 'sum(job_handler_method_status:http_requests:rate10s{job="api"})',
                },
                w=16,
            ),
            timeseries(
                "Locust failures per second",
                "Requests Locust counted as failed (error status, timeout, connection error), by name.",
                "reqps",
                {"{{name}}": "sum by (name) (name_method:locust_failures:rate10s)"},
                w=8,
            ),
            timeseries(
                "Response time as Locust sees it, p50, p95 and p99",
                "Client-side response time over 10 s: the API's time plus the network and the generator's own delays.",
                "s",
                {
                    "{{name}} p50": "name:locust_response_time_seconds:p50_10s",
                    "{{name}} p95": "name:locust_response_time_seconds:p95_10s",
                    "{{name}} p99": "name:locust_response_time_seconds:p99_10s",
                },
                w=16,
                overrides=[dashed("/p50$/")],
            ),
        ),
        row(
            "Is the generator the bottleneck?",
            timeseries(
                "Load generator CPU vs the busiest lab containers, % of limit",
                "Locust's own containers (service locust-master / locust-worker) against the busiest container of each queue. Locust above ~90% of its limit (red line) means the generator, not the lab, sets the rate.",
                "percentunit",
                {
                    "{{service}} ({{instance}})": f"instance:lab_cpu_usage:ratio_rate10s{LOCUST}",
                    "lab: {{queue}}": 'max by (queue) (instance:lab_cpu_usage:ratio_rate10s{queue!=""})',
                },
                overrides=[dashed("/^lab: /")],
                red_line=0.9,
            ),
            timeseries(
                "Load generator CPU throttling: share of periods held back",
                "Of the CPU scheduler's periods in which a Locust process ran, the share in which its own CPU limit held it back: above 0 its numbers understate what the lab could take.",
                "percentunit",
                {"{{service}} ({{instance}})": f"instance:lab_cpu_throttled_periods:ratio_rate10s{LOCUST}"},
            ),
        ),
    ],
)

REDIS = dashboard(
    "lab-redis",
    "Redis",
    "The one Redis behind every queue and the ledger, as redis_exporter sees it: commands, memory, clients, keys, CPU and the broker queues' lengths.",
    [
        row(
            "Redis",
            timeseries(
                "Redis commands per second",
                "Commands Redis processed per second, over 10 s.",
                "ops",
                {"all commands": "sum by (instance) (instance:redis_commands_processed:rate10s)"},
            ),
            timeseries(
                "Busiest Redis commands per second",
                "The 10 commands Redis ran most, per second.",
                "ops",
                {"{{cmd}}": "topk(10, sum by (cmd) (instance_cmd:redis_commands:rate10s))"},
            ),
            timeseries(
                "Redis memory used",
                "Memory Redis allocated, and its maxmemory when one is set.",
                "bytes",
                {
                    "used": "sum by (instance) (redis_memory_used_bytes)",
                    "maxmemory": "sum by (instance) (redis_memory_max_bytes) > 0",
                },
                w=8,
                overrides=[dashed("/maxmemory/")],
            ),
            timeseries(
                "Connected and blocked clients",
                "Client connections, and those blocked in a blocking command (BLPOP/BRPOP/BZPOPMIN: idle workers waiting for a task).",
                "short",
                {
                    "connected": "sum by (instance) (redis_connected_clients)",
                    "blocked": "sum by (instance) (redis_blocked_clients)",
                },
                w=8,
            ),
            timeseries(
                "Redis CPU, share of one core",
                "CPU Redis used (user + system). Redis runs commands on one thread: near 100% it is the bottleneck.",
                "percentunit",
                {"redis": "sum by (instance) (instance:redis_cpu_usage_cores:rate10s)"},
                w=8,
                red_line=1,
            ),
            timeseries(
                "Keys per database",
                "Keys in each non-empty Redis database: queued jobs, results and the ledger.",
                "short",
                {"{{db}} keys": "sum by (db) (redis_db_keys) > 0"},
            ),
            timeseries(
                "Queue lengths in Redis",
                "Length of each broker queue's key (redis_exporter --check-keys, in docker-compose.yml), labelled with the queue its name starts with (after an optional lab: or lab-): lab:arq:queue (a ZSET), saq:lab:queued, lab-celery, dramatiq:lab, rq:queue:lab, huey.redis.lab (LISTs), lab:faststream, lab:taskiq, streaq:lab:queues:normal, docket:lab:stream (STREAMs: a stream's length is not its backlog).",
                "short",
                {
                    "{{queue}} ({{key}})": 'max by (queue, key) (label_replace(redis_key_size, "queue", "$1", "key", "(?:lab[:-])?([a-z]+).*"))'
                },
            ),
        ),
    ],
)


# RabbitMQ's Prometheus plugin (the scrape job `rabbitmq`, profile `rabbitmq`)
# refreshes its figures only every few seconds: its rates take a longer
# window (RABBIT_RATE) than the lab's own.
RABBIT = '{job="rabbitmq"}'
RABBIT_RATE = "20s"

RABBITMQ = dashboard(
    "lab-rabbitmq",
    "RabbitMQ",
    "The RabbitMQ of the queues on it (make up BROKERS=rabbitmq), as its Prometheus plugin reports it: messages in and out, the queues' depth, connections, channels, consumers, memory and its Erlang VM. Each queue's own backlog is on the Queues dashboard.",
    [
        row(
            "RabbitMQ",
            timeseries(
                "Messages per second",
                "Messages RabbitMQ received from publishers (tasks, and Celery's task events), confirmed to them, delivered to consumers and acknowledged by them, per second (a 20-second window).",
                "ops",
                {
                    "received": f"sum(rate(rabbitmq_global_messages_received_total{RABBIT}[{RABBIT_RATE}]))",
                    "confirmed": f"sum(rate(rabbitmq_global_messages_confirmed_total{RABBIT}[{RABBIT_RATE}]))",
                    "delivered": f"sum(rate(rabbitmq_global_messages_delivered_total{RABBIT}[{RABBIT_RATE}]))",
                    "acknowledged": f"sum(rate(rabbitmq_global_messages_acknowledged_total{RABBIT}[{RABBIT_RATE}]))",
                },
            ),
            timeseries(
                "Messages in its queues",
                "Messages waiting in every queue (ready) and those delivered to a consumer and not yet acknowledged (unacked: running, or prefetched).",
                "short",
                {
                    "ready": f"sum(rabbitmq_queue_messages_ready{RABBIT})",
                    "unacked": f"sum(rabbitmq_queue_messages_unacked{RABBIT})",
                },
            ),
            timeseries(
                "Connections, channels and consumers",
                "Open AMQP connections and channels (the API's publishers, the workers, the queue monitor's samples) and consumers (a worker's, per queue).",
                "short",
                {
                    "connections": f"sum(rabbitmq_connections{RABBIT})",
                    "channels": f"sum(rabbitmq_channels{RABBIT})",
                    "consumers": f"sum(rabbitmq_consumers{RABBIT})",
                },
                w=8,
            ),
            timeseries(
                "RabbitMQ memory",
                "Resident memory of the RabbitMQ node, and the high watermark at which it blocks publishers.",
                "bytes",
                {
                    "resident": f"sum(rabbitmq_process_resident_memory_bytes{RABBIT})",
                    "watermark": f"sum(rabbitmq_resident_memory_limit_bytes{RABBIT})",
                },
                w=8,
                overrides=[dashed("/watermark/")],
            ),
            timeseries(
                "RabbitMQ's Erlang VM",
                "Erlang processes alive in the node (one per connection, channel and queue, and more) and its schedulers' context switches per second (a 20-second window): how busy the broker is. Its CPU against its limit: make limits and the engine's stats (the plugin does not export it).",
                "short",
                {
                    "processes": f"sum(rabbitmq_erlang_processes_used{RABBIT})",
                    "context switches/s": f"sum(rate(rabbitmq_erlang_scheduler_context_switches_total{RABBIT}[{RABBIT_RATE}]))",
                },
                w=8,
            ),
        ),
    ],
)


# postgres-exporter (the scrape job `postgres-exporter`, profile `postgres`):
# PostgreSQL's statistics views of the database `lab`, where every queue on
# PostgreSQL keeps its jobs.
PG = '{job="postgres-exporter", datname="lab"}'
PG_RATE = "20s"

POSTGRESQL = dashboard(
    "lab-postgresql",
    "PostgreSQL",
    "The PostgreSQL of the queues on it (make up BROKERS=postgres), as postgres-exporter reports its database `lab`: connections, transactions, rows written and read, locks and size. Each queue's own backlog is on the Queues dashboard.",
    [
        row(
            "PostgreSQL",
            timeseries(
                "Transactions per second",
                "Transactions committed and rolled back in the database `lab` per second (a 20-second window): every enqueue, every job a worker takes and finishes, and each library's polling.",
                "ops",
                {
                    "committed": f"sum(rate(pg_stat_database_xact_commit{PG}[{PG_RATE}]))",
                    "rolled back": f"sum(rate(pg_stat_database_xact_rollback{PG}[{PG_RATE}]))",
                },
            ),
            timeseries(
                "Rows per second",
                "Rows inserted (a job enqueued), updated (a job taken, finished), deleted and returned by queries in the database `lab`, per second (a 20-second window).",
                "ops",
                {
                    "inserted": f"sum(rate(pg_stat_database_tup_inserted{PG}[{PG_RATE}]))",
                    "updated": f"sum(rate(pg_stat_database_tup_updated{PG}[{PG_RATE}]))",
                    "deleted": f"sum(rate(pg_stat_database_tup_deleted{PG}[{PG_RATE}]))",
                    "returned": f"sum(rate(pg_stat_database_tup_returned{PG}[{PG_RATE}]))",
                },
            ),
            timeseries(
                "Connections",
                "Server processes connected to the database `lab` (the API's producers, the workers, the queue monitor's samples, the exporter).",
                "short",
                {"connections": f"sum(pg_stat_database_numbackends{PG})"},
                w=8,
            ),
            timeseries(
                "Locks",
                "Locks held in the database `lab`, by mode: the row locks of jobs being taken (FOR UPDATE SKIP LOCKED) and the advisory locks some libraries hold per job.",
                "short",
                {"{{mode}}": f"sum by (mode) (pg_locks_count{PG})"},
                w=8,
            ),
            timeseries(
                "Database size",
                "Size of the database `lab` on disk: job tables grow with the backlog and with finished jobs a library keeps.",
                "bytes",
                {"size": 'sum(pg_database_size_bytes{job="postgres-exporter", datname="lab"})'},
                w=8,
            ),
        ),
    ],
)


FILES = {
    "api.json": API,
    "load.json": LOAD,
    "queues.json": QUEUES,
    "redis.json": REDIS,
    "rabbitmq.json": RABBITMQ,
    "postgresql.json": POSTGRESQL,
}


def render(board: Json) -> str:
    return json.dumps(board, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DASHBOARDS, help="directory of the JSON files (grafana/dashboards)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    if args.check:
        present = {path.name for path in args.out.glob("*.json")}
        differ = sorted(name for name, board in FILES.items() if not _same(args.out / name, render(board)))
        extra = sorted(present - set(FILES))
        for name in differ:
            print(f"{args.out / name}: differs from grafana/generate.py's output", file=sys.stderr)
        for name in extra:
            print(f"{args.out / name}: not written by grafana/generate.py", file=sys.stderr)
        if differ or extra:
            print("run `make dashboards` (python grafana/generate.py) to rewrite them", file=sys.stderr)
        return 1 if differ or extra else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, board in FILES.items():
        (args.out / name).write_text(render(board), encoding="utf-8")
    return 0


def _same(path: Path, text: str) -> bool:
    return path.is_file() and path.read_text(encoding="utf-8") == text


if __name__ == "__main__":
    sys.exit(main())
