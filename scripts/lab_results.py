"""A load run's result record, computed from what the run produced: Locust's
summary (the master's LAB-RESULT line), the ledger, the limits the engine applied
(docker inspect) and Prometheus. Pure functions, no I/O: scripts/load.py gathers
the inputs, `make results` prints the records (scripts/results.py).

The record is results/<run>.json; `schema` changes when a field changes meaning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping

from lab.queues import BROKER_NAMES, BROKERS

SCHEMA = 1
QUEUES = ("background", *BROKER_NAMES)


def service_of(queue: str) -> str:
    """The compose service that runs a queue's tasks: the API for `background`."""
    return "api" if queue == "background" else queue


# Per-queue override of CONCURRENCY, as the worker reads it (lab/settings.py).
CONCURRENCY_KNOB = {b.name: b.concurrency_knob for b in BROKERS}
# Container settings that change a result, kept in the record (read from the container).
TASK_KNOBS = ("CPU_WORK", "IO_LATENCY_MS", "THREAD_POOL_SIZE", "PROCESS_POOL_SIZE")
KNOBS = {
    "api": ("ENQUEUE_MODE", "BLOCKING_PUBLISH", "API_WORKERS", "THREADPOOL_TOKENS", "UPSTREAM_LATENCY_MS", *TASK_KNOBS),
    **{b.name: (b.concurrency_knob, *b.knobs, *TASK_KNOBS) for b in BROKERS},
}
# A Locust process runs on one core (gevent: one thread). Above this share of a
# core, or of its container's limit, its numbers measure Locust, not the lab.
GENERATOR_BUSY = 0.85


# -- Limits, as the engine applied them --------------------------------------------
def mem_text(n: int | None) -> str:
    """Bytes as `make limits` prints them: 200M, 1G, 512K; `-` for no limit."""
    if not n or n <= 0:
        return "-"
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def cpus_of(host_config: Mapping) -> float | None:
    """The CPU limit in cores from `docker inspect`'s HostConfig (NanoCpus, or quota/period)."""
    nano = host_config.get("NanoCpus") or 0
    if nano > 0:
        return round(nano / 1e9, 4)
    quota, period = host_config.get("CpuQuota") or 0, host_config.get("CpuPeriod") or 0
    if quota > 0:
        return round(quota / (period or 100_000), 4)
    return None


def env_of(container: Mapping) -> dict[str, str]:
    return dict(item.split("=", 1) for item in (container.get("Config", {}).get("Env") or []) if "=" in item)


def limits_of(containers: list[Mapping], queue: str | None = None) -> dict:
    """One service's limits from `docker inspect` of its running containers:
    cpus, memory, replicas, and (for a queue worker) its concurrency per process."""
    if not containers:
        return {"cpus": None, "memory": None, "memory_bytes": None, "replicas": 0}
    first = containers[0]
    host = first.get("HostConfig", {})
    memory = host.get("Memory") or None
    out = {"cpus": cpus_of(host), "memory": mem_text(memory), "memory_bytes": memory, "replicas": len(containers)}
    shapes = {(cpus_of(c.get("HostConfig", {})), c.get("HostConfig", {}).get("Memory")) for c in containers}
    if len(shapes) > 1:
        out["mixed"] = True  # replicas created under different limits (a `make up` half applied)
    if queue in CONCURRENCY_KNOB:
        env = env_of(first)
        value = env.get(CONCURRENCY_KNOB[queue]) or env.get("CONCURRENCY")
        out["concurrency"] = int(value) if value and value.isdigit() else None
    return out


def knobs_of(containers: list[Mapping], service: str) -> dict[str, str]:
    env = env_of(containers[0]) if containers else {}
    return {k: env[k] for k in KNOBS.get(service, ()) if k in env}


def limit_text(limits: Mapping | None) -> str:
    """`0.2cpu/200M`, as the run annotations write it; `-` when unknown."""
    if not limits or not limits.get("replicas"):
        return "-"
    cpus = limits.get("cpus")
    return f"{f'{cpus:g}' if cpus else '-'}cpu/{limits.get('memory') or '-'}"


def workers_limit_text(workers: Mapping[str, Mapping]) -> str:
    """One text for the workers of a run: theirs if they agree, else per queue."""
    texts = {q: limit_text(lim) for q, lim in workers.items()}
    if not texts:
        return "-"
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return ",".join(f"{q}:{t}" for q, t in texts.items())


def restart_counts(containers: Mapping[str, list[Mapping]]) -> dict[str, dict[str, list]]:
    """Per service and container (docker inspect): [restart count, last exit was an OOM kill]."""
    return {
        service: {
            c.get("Name", "").lstrip("/"): [c.get("RestartCount", 0), bool(c.get("State", {}).get("OOMKilled"))]
            for c in cs
        }
        for service, cs in containers.items()
    }


def restarts_during(before: Mapping[str, Mapping[str, list]], after: Mapping[str, Mapping[str, list]]) -> dict:
    """Restarts of each service's containers between two restart_counts(): a
    container restarted by its restart policy (a crash, an OOM kill) mid-run."""
    out = {}
    for service, containers in after.items():
        n, oom = 0, False
        for name, (count, oom_killed) in containers.items():
            earlier = before.get(service, {}).get(name)
            if earlier is not None and count > earlier[0]:
                n += count - earlier[0]
                oom = oom or oom_killed
        if n:
            out[service] = {"restarts": n, "oom_killed": oom}
    return out


# -- Grafana annotations (format: grafana/README.md) --------------------------------
def annotation(
    kind: str,
    run: str,
    worker: str,
    endpoint: str,
    users: int,
    api_limits: str,
    worker_limits: str,
    at: float,
    duration_s: float | None = None,
    tag: str | None = None,
) -> dict:
    """A run's annotation: at its start a point, at its end ("end", with the
    run's duration) the region from `at - duration_s` to `at`."""
    text = (
        f"lab-run run={run} worker={worker} endpoint={endpoint} users={users} "
        f"api_limits={api_limits} worker_limits={worker_limits}"
    )
    body = {"time": int(at * 1000), "tags": ["lab-run", run, tag or worker], "text": text}
    if kind == "end":
        body["text"] += f" duration={round(duration_s or 0)}s"
        body["time"], body["timeEnd"] = round((at - (duration_s or 0)) * 1000), int(at * 1000)
    return body


# Dashboards a run links to (grafana/dashboards/*.json uids).
RUN_DASHBOARDS = {"queues": "lab-queues", "api": "lab-api", "load": "lab-load"}
LINK_MARGIN_S = (10, 15)  # before the run, after it (the 10 s rates trail its end)


def grafana_link(addr: str, dashboard: str, start: float, end: float | None, queue: str | None = None) -> str:
    """The URL of a lab dashboard over a run's window, scoped to one queue if given;
    `end` None: up to now, refreshing (a drain that goes on)."""
    host, _, port = addr.rpartition(":")
    host = "127.0.0.1" if host in ("", "0.0.0.0") else host
    to = "now" if end is None else str(int((end + LINK_MARGIN_S[1]) * 1000))
    url = (
        f"http://{host}:{port}/d/{RUN_DASHBOARDS[dashboard]}/?orgId=1"
        f"&from={int((start - LINK_MARGIN_S[0]) * 1000)}&to={to}"
    )
    if queue and dashboard == "queues":
        url += "".join(f"&var-queue={q}" for q in queue.split(","))
    return url


# -- The generator's own CPU ------------------------------------------------------------
def generator_check(processes: Iterable[Mapping]) -> dict:
    """Each Locust process's CPU over the run (cores), and whether any was busy
    enough that the load generator, not the lab, set the pace."""
    rows, busy = [], []
    for p in processes:
        interval = p.get("interval_s") or 0
        cores = (p.get("cpu_seconds") or 0) / interval if interval > 0 else None
        # One process cannot use more than one core; its container may allow less.
        ceiling = min(1.0, p.get("cpu_limit_cores") or 1.0)
        row = {
            "role": p.get("role"),
            "cpu_cores": round(cores, 3) if cores is not None else None,
            "ceiling_cores": ceiling,
        }
        rows.append(row)
        if cores is not None and cores >= GENERATOR_BUSY * ceiling:
            busy.append(row)
    warning = None
    if busy:
        warning = (
            "load generator CPU-bound: "
            + ", ".join(f"{r['role']} {r['cpu_cores']:.2f}/{r['ceiling_cores']:g} core" for r in busy)
            + " - the numbers measure Locust, not the lab: raise locust_workers"
        )
    return {"processes": rows, "cpu_bound": bool(busy), "warning": warning}


# -- The record ---------------------------------------------------------------------
def _round(x, digits=2):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, digits)


def task_fields(
    ledger: Mapping | None, load_ended_at: float | None, settled: bool, draining: Mapping | None = None
) -> dict | None:
    """The ledger part of a queue run: counts, time to execute all tasks (first
    enqueue to last completion) and the drain after the load stopped. `draining`:
    the watch ended with a backlog (scripts/drain.py), which is not lost: the run
    settles later (settle_later)."""
    if ledger is None:
        return None
    totals = ledger.get("totals", {})
    first, last = ledger.get("first_enqueued_at"), ledger.get("last_settled_at")
    done = settled and backlog_of(ledger) == 0
    return {
        "enqueued": totals.get("enqueued", 0),
        "completed": totals.get("completed", 0),
        "failed": totals.get("failed", 0),
        "duplicates": totals.get("duplicates", 0),
        # still pending when we stopped waiting; none yet while the run drains
        "lost": None if draining is not None else backlog_of(ledger),
        # Executions that began and never ended: cut off by a crash (and, if the
        # task is not lost, run again). Ledgers older than the `started` count: None.
        "unfinished": totals.get("unfinished") if "started" in totals else None,
        "settled": done,
        "draining": dict(draining) if draining is not None else None,
        "first_enqueued_at": first,
        "last_settled_at": last,
        "time_to_execute_all_s": _round(last - first) if done and first and last else None,
        "drain_s": _round(max(0.0, last - load_ended_at)) if done and last and load_ended_at else None,
        "per_queue": {
            q: {
                e: {k: row.get(k) for k in ("enqueued", "completed", "failed", "duplicates", "pending", "unfinished")}
                for e, row in endpoints.items()
            }
            for q, endpoints in ledger.get("queues", {}).items()
        },
    }


def is_draining(record: Mapping) -> bool:
    """The run's watch ended before its tasks did, and no later look found it settled."""
    tasks = record.get("tasks") or {}
    return bool(tasks.get("draining")) and not tasks.get("settled")


def backlog_of(led: Mapping | None) -> int:
    """Tasks pending, counted queue by queue and endpoint by endpoint: a cell
    with more settled than enqueued (pending < 0) must not hide another's
    backlog in the totals."""
    cells = [c for endpoints in (led or {}).get("queues", {}).values() for c in endpoints.values()]
    if not cells:
        return max(0, (led or {}).get("totals", {}).get("pending", 0))
    return sum(max(0, c.get("pending", 0)) for c in cells)


def settle_later(record: dict, ledger: Mapping) -> bool:
    """Fill in a draining run's task figures from its ledger once nothing is
    pending (`make results` asks); True when the record changed."""
    if not is_draining(record) or not ledger.get("totals") or backlog_of(ledger) > 0:
        return False
    watch = record["tasks"]["draining"]
    record["tasks"] = {**task_fields(ledger, record.get("load_ended_at"), True), "draining": watch}
    record["settled_later_at"] = ledger.get("last_settled_at")
    record["warnings"] = [w for w in record.get("warnings", []) if not w.startswith("still draining")]
    if "chaos" in record:
        record["chaos"].update(chaos_totals(ledger, record["chaos"].get("injected_at")))
    return True


def chaos_totals(ledger: Mapping, injected_at: float | None) -> dict:
    """The ledger's part of a chaos run's section."""
    totals = ledger.get("totals", {})
    last = ledger.get("last_settled_at")
    return {
        # The last task settled this long after the fault: a dead worker's
        # tasks come back only when their lease runs out (TASK_TIMEOUT_S).
        "last_settled_after_fault_s": round(last - injected_at, 1) if injected_at and last else None,
        "enqueued": totals.get("enqueued"),
        "completed": totals.get("completed"),
        "failed": totals.get("failed"),
        "duplicates": totals.get("duplicates"),
        "lost": totals.get("pending"),
        # executions cut off by the fault (started, never ended); re-run unless lost
        "interrupted": totals.get("unfinished"),
    }


def _run_warnings(
    *,
    notes: Iterable[str],
    generator: Mapping,
    locust: Mapping,
    restarts: Mapping[str, Mapping] | None,
    params: Mapping,
    requests: int,
) -> list[str]:
    """The warnings about the load itself: the caller's notes, the generator, restarts, the count."""
    warnings = list(notes)
    if generator["warning"]:
        warnings.append(generator["warning"])
    if locust.get("locust_cpu_warning"):
        warnings.append("Locust itself warned that a process used over 90 % CPU")
    for service, r in (restarts or {}).items():
        warnings.append(
            f"{service} restarted {r['restarts']} time(s) during the run"
            + (" (OOM killed)" if r.get("oom_killed") else "")
        )
    if params.get("iterations") is not None and requests != params["iterations"]:
        warnings.append(f"{requests} requests recorded, not the {params['iterations']} asked for")
    return warnings


def _task_warnings(
    tasks: Mapping | None, *, draining: Mapping | None, accepted: int | None, ledger: Mapping | None
) -> list[str]:
    """The warnings about the ledger's tasks (queue runs only: none when tasks is None)."""
    if tasks is None:
        return []
    warnings = []
    if draining is not None and not tasks["settled"]:
        warnings.append(
            f"still draining: {draining['backlog']} task(s) pending when the watch ended; "
            "`make results` shows the run settled once it has"
        )
    elif not tasks["settled"]:
        warnings.append(f"not settled: {tasks['lost']} task(s) still pending when the wait ended")
    if accepted is not None and tasks["enqueued"] != accepted:
        warnings.append(f"ledger enqueued {tasks['enqueued']} != {accepted} requests answered 202")
    if tasks["duplicates"]:
        warnings.append(f"{tasks['duplicates']} duplicate execution(s)")
    pending = (ledger or {}).get("totals", {}).get("pending", 0)
    if pending < 0:
        warnings.append(
            f"ledger inconsistent: {-pending} more task(s) settled than enqueued "
            "(an enqueue was taken back although the broker had the task)"
        )
    return warnings


def _subject_fields(subjects: list[str], resources: Mapping | None) -> dict:
    """The subjects, every service's resources, and the subjects' worst memory peak and throttling."""
    res = resources or {}
    peaks = [res[s]["peak_memory_bytes"] for s in subjects if res.get(s, {}).get("peak_memory_bytes") is not None]
    throttles = [
        res[s]["cpu_throttled_periods_pct"]
        for s in subjects
        if res.get(s, {}).get("cpu_throttled_periods_pct") is not None
    ]
    return {
        "subjects": subjects,
        "resources": dict(res) if resources is not None else None,
        "worker_peak_memory_bytes": max(peaks) if peaks else None,
        "cpu_throttled_periods_pct": _round(max(throttles), 1) if throttles else None,
    }


def _params_fields(params: Mapping, locust: Mapping, start: float | None) -> dict:
    """What the run asked for, and when its load started."""
    return {
        "schema": SCHEMA,
        "run": params["run"],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start or locust.get("test_started_at") or 0)),
        "scenario": params["scenario"],
        "worker": params.get("worker"),
        "endpoint": params["endpoint"],
        "users": params["users"],
        "spawn_rate": params["spawn_rate"],
        "iterations": params.get("iterations"),
        "duration_target_s": params.get("duration_target_s"),
    }


def _load_fields(locust: Mapping, duration: float | None) -> dict:
    """The master's counts and latencies, and the rate over the load's duration."""
    requests, failures = locust.get("requests", 0), locust.get("failures", 0)
    return {
        "requests": requests,
        "failures": failures,
        "failures_pct": _round(100 * failures / requests, 3) if requests else None,
        "status_codes": dict(locust.get("status_codes", {})),
        "rps": _round(requests / duration, 1) if duration else None,
        "median_ms": locust.get("median_ms"),
        "p95_ms": locust.get("p95_ms"),
        "p99_ms": locust.get("p99_ms"),
        "avg_ms": locust.get("avg_ms"),
        "max_ms": locust.get("max_ms"),
        "errors": list(locust.get("errors", [])),
    }


def build_record(
    *,
    params: Mapping,
    locust: Mapping,
    ledger: Mapping | None,
    settled: bool,
    limits: Mapping,
    draining: Mapping | None = None,
    knobs: Mapping,
    resources: Mapping | None,
    probe: Mapping | None,
    locust_workers: int,
    subjects: Iterable[str],
    notes: Iterable[str] = (),
    restarts: Mapping[str, Mapping] | None = None,
) -> dict:
    """Everything a run leaves, in one dict (results/<run>.json).

    params: run, scenario, worker, endpoint, users, spawn_rate, iterations, duration_target_s
    locust: the master's LAB-RESULT
    ledger: GET /api/v1/runs/{run} at the end (queue runs), settled: pending reached 0
    draining: the drain watch's backlog, rate and projection when it ended before the drain
    limits: {"api": {...}, "workers": {queue: {...}}} (limits_of)
    resources: per service from Prometheus: peak_memory_bytes, cpu_throttled_periods_pct (the share of the
      CPU periods in which it ran that its limit held it back), cpu_used_cores, cpu_limit_cores
    subjects: the services under test (the queues' workers; the API for `background`
      and the event-loop scenarios): the record's worker memory and throttling are theirs.
    """
    start, end = locust.get("first_request_at"), locust.get("last_response_at")
    duration = end - start if start and end and end > start else None
    generator = generator_check(locust.get("processes", []))
    tasks = task_fields(ledger, end, settled, draining)
    accepted = locust.get("status_codes", {}).get("202")
    warnings = _run_warnings(
        notes=notes,
        generator=generator,
        locust=locust,
        restarts=restarts,
        params=params,
        requests=locust.get("requests", 0),
    ) + _task_warnings(tasks, draining=draining, accepted=accepted, ledger=ledger)
    return {
        **_params_fields(params, locust, start),
        "locust_workers": locust_workers,
        "duration_s": _round(duration),
        "limits": dict(limits),
        "knobs": dict(knobs),
        **_load_fields(locust, duration),
        "load_started_at": start,
        "load_ended_at": end,
        "tasks": tasks,
        **_subject_fields(list(subjects), resources),
        "generator": generator,
        "exported_requests": locust.get("exported_requests"),
        "restarts": dict(restarts or {}),
        "probe": dict(probe) if probe is not None else None,
        "warnings": warnings,
    }


# -- The table ----------------------------------------------------------------------
# The published article's columns first (RPS, median and p95 latency, time to
# execute all tasks, errors), then the lab's own.
COLUMNS = (
    ("worker", "worker"),
    ("RPS", "rps"),
    ("median ms", "median_ms"),
    ("p95 ms", "p95_ms"),
    ("all tasks done s", "tasks.time_to_execute_all_s"),
    ("errors %", "failures_pct"),
    ("scenario", "scenario"),
    ("endpoint", "endpoint"),
    ("users", "users"),
    ("iterations", "iterations"),
    ("requests", "requests"),
    ("p99 ms", "p99_ms"),
    ("load s", "duration_s"),
    ("drain s", "tasks.drain_s"),
    ("enqueued", "tasks.enqueued"),
    ("completed", "tasks.completed"),
    ("failed", "tasks.failed"),
    ("dup", "tasks.duplicates"),
    ("lost", "tasks.lost"),
    ("API limits", "_api_limits"),
    ("worker limits", "_worker_limits"),
    ("conc.", "_concurrency"),
    ("repl.", "_replicas"),
    ("peak MB", "_peak_mb"),
    ("throttled periods %", "cpu_throttled_periods_pct"),
    ("probe ok %", "_probe_ok"),
    ("probe worst gap s", "probe.worst_gap_s"),
    ("notes", "_notes"),
    ("run", "run"),
)


def _get(record: Mapping, path: str):
    value = record
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _derived(record: Mapping, key: str):
    workers = (record.get("limits") or {}).get("workers") or {}
    if key == "_api_limits":
        return limit_text((record.get("limits") or {}).get("api"))
    if key == "_worker_limits":
        return workers_limit_text(workers) if workers else "-"
    if key == "_limits":  # the short table's one column for both
        return f"{_derived(record, '_api_limits')} / {_derived(record, '_worker_limits')}"
    if key == "_concurrency":
        values = {w.get("concurrency") for w in workers.values() if w.get("concurrency") is not None}
        return "/".join(str(v) for v in sorted(values)) if values else None
    if key == "_replicas":
        values = {w.get("replicas") for w in workers.values()}
        return "/".join(str(v) for v in sorted(v for v in values if v is not None)) if values else None
    if key == "_peak_mb":
        peak = record.get("worker_peak_memory_bytes")
        return round(peak / (1 << 20), 1) if peak else None
    if key == "_probe_ok":
        rate = _get(record, "probe.success_rate")
        return round(100 * rate, 1) if rate is not None else None
    if key == "_notes":
        return notes_of(record)
    raise KeyError(key)


def arq_cap(knobs: Mapping) -> str:
    """arq's ceiling, named where arq is measured: since arq 0.26 (python-arq/arq
    PR #408) a worker starts at most max_jobs jobs per poll, then sleeps poll_delay."""
    arq = knobs.get("arq") or {}
    jobs, delay = arq.get("ARQ_MAX_JOBS", "?"), arq.get("ARQ_POLL_DELAY", "?")
    try:
        ceiling = f" = {float(jobs) / float(delay):g} tasks/s per worker"
    except (TypeError, ValueError, ZeroDivisionError):
        ceiling = ""
    return f"arq: at most ARQ_MAX_JOBS ({jobs}) per ARQ_POLL_DELAY ({delay} s){ceiling}"


def notes_of(record: Mapping) -> str:
    """Short notes for the table: the knobs that change a queue's numbers, and problems."""
    notes = []
    platform = record.get("platform") or {}
    if platform.get("orchestrator") == "swarm":
        notes.append(f"swarm, {platform.get('nodes')} node(s)")
    knobs = record.get("knobs") or {}
    if "ARQ_POLL_DELAY" in knobs.get("arq", {}) and record.get("worker") in ("arq", "all"):
        notes.append(arq_cap(knobs))
    if record.get("generator", {}).get("cpu_bound"):
        notes.append("generator CPU-bound")
    for service, r in (record.get("restarts") or {}).items():
        notes.append(f"{service} restarted" + (" (OOM)" if r.get("oom_killed") else ""))
    tasks = record.get("tasks")
    if tasks and is_draining(record):
        watch = tasks["draining"]
        notes.append(f"draining: {watch.get('backlog')} pending at {watch.get('rate_per_s')} tasks/s when watched")
    elif tasks and not tasks.get("settled"):
        notes.append("NOT SETTLED")
    if record.get("duration_target_s"):
        notes.append(f"duration {record['duration_target_s']:g}s")
    if any("!=" in w or "ledger inconsistent" in w for w in record.get("warnings", [])):
        notes.append("ledger mismatch")
    return "; ".join(notes)


def cell(value) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value).replace("|", "\\|")


# `make results` by default: the article's figures, what ran, under which limits, and what went wrong.
SHORT_COLUMNS = (
    *COLUMNS[:8],
    ("API / worker limits", "_limits"),
    ("notes", "_notes"),
    ("run", "run"),
)


def table_row(record: Mapping, columns=COLUMNS) -> str:
    values = [(_derived(record, key) if key.startswith("_") else _get(record, key)) for _, key in columns]
    return "| " + " | ".join(cell(v) for v in values) + " |"


TEXT_COLUMNS = {"worker", "scenario", "endpoint", "API limits", "worker limits", "API / worker limits", "notes", "run"}


def table_header(columns=COLUMNS) -> str:
    names = [name for name, _ in columns]
    return (
        "| " + " | ".join(names) + " |\n|" + "|".join("---" if name in TEXT_COLUMNS else "---:" for name in names) + "|"
    )


def table(records: Iterable[Mapping], columns=COLUMNS, last: int | None = None) -> str:
    """The records as a markdown table, oldest first; `last`: only the newest that many."""
    rows = sorted(records, key=lambda r: (r.get("time") or "", r.get("run") or ""))
    if last is not None:
        rows = rows[-last:] if last > 0 else []
    return "\n".join([table_header(columns), *(table_row(r, columns) for r in rows)])
