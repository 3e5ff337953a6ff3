"""A load run's record computed from what the run produced: Locust's summary (the
master's LAB-RESULT line), the ledger, the limits the engine applied (docker
inspect) and Prometheus. `build_run_record` is pure: the load run
(labctl/load_run) gathers its inputs, the store writes the record (records/run.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labctl.records.run import SCHEMA, Generator, GeneratorProcess, Limits, RunRecord
from labctl.records.run_tasks import TaskFigures, rounded, task_figures

# A Locust process runs on one core (gevent: one thread). Above this share of a
# core, or of its container's limit, its numbers measure Locust, not the lab.
GENERATOR_BUSY = 0.85
# rate= runs: below this share of its target the load did not keep its schedule;
# above this share of sends late (locust/locustfile.py, LATE_S) the schedule slipped.
RATE_KEPT = 0.95
LATE_SHARE = 0.05


@dataclass
class RunInputs:
    """What a load run gathered for its record.

    params: run, scenario, worker, endpoint, users, spawn_rate, iterations, duration_target_s
    locust: the master's LAB-RESULT
    ledger: GET /api/v1/runs/{run} at the end (queue runs), settled: pending reached 0
    draining: the drain watch's backlog, rate and projection when it ended before the drain
    limits: {"api": {...}, "workers": {queue: {...}}} (platform.containers.limits_of)
    resources: per service from Prometheus: peak_memory_bytes, cpu_throttled_periods_pct (the share of the
      CPU periods in which it ran that its limit held it back), cpu_used_cores, cpu_limit_cores
    subjects: the services under test (the queues' workers; the API for `background`
      and the event-loop scenarios): the record's worker memory and throttling are theirs.
    """

    params: Mapping[str, Any]
    locust: Mapping[str, Any]
    ledger: Mapping[str, Any] | None
    settled: bool
    limits: Limits
    knobs: Mapping[str, Mapping[str, str]]
    resources: Mapping[str, Any] | None
    probe: Mapping[str, Any] | None
    locust_workers: int
    subjects: Iterable[str]
    draining: Mapping[str, Any] | None = None
    notes: Iterable[str] = ()
    restarts: Mapping[str, Mapping[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # platform, window_end, locust_report


# -- The generator's own CPU ------------------------------------------------------------
def generator_check(processes: Iterable[Mapping[str, Any]]) -> Generator:
    """Each Locust process's CPU over the run (cores), and whether any was busy
    enough that the load generator, not the lab, set the pace."""
    rows, busy = [], []
    for p in processes:
        interval = p.get("interval_s") or 0
        cores = (p.get("cpu_seconds") or 0) / interval if interval > 0 else None
        # One process cannot use more than one core; its container may allow less.
        ceiling = min(1.0, p.get("cpu_limit_cores") or 1.0)
        row = GeneratorProcess(
            role=p.get("role"), cpu_cores=round(cores, 3) if cores is not None else None, ceiling_cores=ceiling
        )
        rows.append(row)
        if cores is not None and cores >= GENERATOR_BUSY * ceiling:
            busy.append(row)
    warning = None
    if busy:
        warning = (
            "load generator CPU-bound: "
            + ", ".join(f"{r.role} {r.cpu_cores:.2f}/{r.ceiling_cores:g} core" for r in busy)
            + " - the numbers measure Locust, not the lab: raise locust_workers"
        )
    return Generator(processes=rows, cpu_bound=bool(busy), warning=warning)


# -- Warnings ------------------------------------------------------------------------------
def _run_warnings(inputs: RunInputs, generator: Generator, requests: int, rps: float | None) -> list[str]:
    """The warnings about the load itself: the caller's notes, the generator, restarts, the count."""
    warnings = list(inputs.notes)
    if generator.warning:
        warnings.append(generator.warning)
    if inputs.locust.get("locust_cpu_warning"):
        warnings.append("Locust itself warned that a process used over 90 % CPU")
    for service, r in (inputs.restarts or {}).items():
        warnings.append(
            f"{service} restarted {r['restarts']} time(s) during the run"
            + (" (OOM killed)" if r.get("oom_killed") else "")
        )
    iterations = inputs.params.get("iterations")
    if iterations is not None and requests != iterations:
        warnings.append(f"{requests} requests recorded, not the {iterations} asked for")
    warnings += _schedule_warnings(inputs.params.get("target_rate"), inputs.locust, rps)
    return warnings


def _schedule_warnings(target: float | None, locust: Mapping[str, Any], rps: float | None) -> list[str]:
    """rate= runs: the load fell short of its rate, or many requests left late."""
    if not target:
        return []
    warnings = []
    if rps is not None and rps < RATE_KEPT * target:
        warnings.append(
            f"the load sent {rps:g} requests/s of the {target:g} asked for: the schedule was not kept "
            "(a slow answer held its user past its next send, or the generator was busy; latency counts "
            "from each scheduled time)"
        )
    sends, late = locust.get("scheduled_sends") or 0, locust.get("late_sends") or 0
    if sends and late / sends > LATE_SHARE:
        warnings.append(f"{100 * late / sends:.1f} % of the requests left over 100 ms after their scheduled time")
    return warnings


def _task_warnings(tasks: TaskFigures | None, inputs: RunInputs, accepted: int | None) -> list[str]:
    """The warnings about the ledger's tasks (queue runs only: none when tasks is None)."""
    if tasks is None:
        return []
    warnings = []
    draining = inputs.draining
    if draining is not None and not tasks.settled:
        warnings.append(
            f"still draining: {draining['backlog']} task(s) pending when the watch ended; "
            "`make results` shows the run settled once it has"
        )
    elif not tasks.settled:
        warnings.append(f"not settled: {tasks.lost} task(s) still pending when the wait ended")
    if tasks.differs_from(accepted):
        warnings.append(
            f"ledger enqueued {tasks.enqueued - tasks.enqueued_after_error} != {accepted} requests answered 202"
        )
    if tasks.enqueued_after_error:
        warnings.append(
            f"{tasks.enqueued_after_error} task(s) whose enqueue failed (a 503) ran all the same: a timeout cut off their "
            "broker's reply, not the enqueue (counted enqueued)"
        )
    if tasks.duplicates:
        warnings.append(f"{tasks.duplicates} duplicate execution(s)")
    pending = tasks.still_pending()
    if pending < 0:
        warnings.append(
            f"ledger inconsistent: {-pending} more task(s) settled than enqueued "
            "(an enqueue was taken back although the broker had the task)"
        )
    return warnings


# -- The record -------------------------------------------------------------------------------
def _share(part: int | None, whole: int | None) -> float | None:
    """part of whole in %, none without a whole."""
    return rounded(100 * (part or 0) / whole, 2) if whole else None


def _subject_fields(subjects: list[str], resources: Mapping[str, Any] | None) -> dict[str, Any]:
    """The subjects, every service's resources, and the subjects' worst memory peak and throttling."""
    res = resources or {}
    peaks, throttles = (
        [res[s][key] for s in subjects if res.get(s, {}).get(key) is not None]
        for key in ("peak_memory_bytes", "cpu_throttled_periods_pct")
    )
    return {
        "subjects": subjects,
        "resources": dict(res) if resources is not None else None,
        "worker_peak_memory_bytes": max(peaks) if peaks else None,
        "cpu_throttled_periods_pct": rounded(max(throttles), 1) if throttles else None,
    }


def _params_fields(params: Mapping[str, Any], locust: Mapping[str, Any], start: float | None) -> dict[str, Any]:
    """What the run asked for, and when its load started."""
    return {
        "schema": SCHEMA,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start or locust.get("test_started_at") or 0)),
        **{key: params[key] for key in ("run", "scenario", "endpoint", "users", "spawn_rate")},
        **{key: params.get(key) for key in ("worker", "iterations", "duration_target_s", "target_rate")},
    }


def _load_fields(locust: Mapping[str, Any], duration: float | None) -> dict[str, Any]:
    """The master's counts and latencies, and the rate over the load's duration."""
    requests, failures = locust.get("requests", 0), locust.get("failures", 0)
    return {
        "requests": requests,
        "failures": failures,
        "failures_pct": rounded(100 * failures / requests, 3) if requests else None,
        "status_codes": dict(locust.get("status_codes", {})),
        "rps": rounded(requests / duration, 1) if duration else None,
        **{key: locust.get(key) for key in ("median_ms", "p95_ms", "p99_ms", "avg_ms", "max_ms")},
        "errors": list(locust.get("errors", [])),
    }


def build_run_record(inputs: RunInputs) -> RunRecord:
    """Everything a run leaves, as one record."""
    locust = inputs.locust
    start, end = locust.get("first_request_at"), locust.get("last_response_at")
    duration = end - start if start and end and end > start else None
    generator = generator_check(locust.get("processes", []))
    tasks = task_figures(inputs.ledger, end, inputs.settled, inputs.draining) if inputs.ledger is not None else None
    accepted = locust.get("status_codes", {}).get("202")
    load = _load_fields(locust, duration)
    warnings = _run_warnings(inputs, generator, load["requests"], load["rps"]) + _task_warnings(tasks, inputs, accepted)
    return RunRecord.model_validate(
        {
            **_params_fields(inputs.params, locust, start),
            "locust_workers": inputs.locust_workers,
            "duration_s": rounded(duration),
            "limits": inputs.limits,
            "knobs": dict(inputs.knobs),
            **load,
            "late_sends_pct": _share(locust.get("late_sends"), locust.get("scheduled_sends")),
            "late_sends_steady_pct": _share(locust.get("steady_late_sends"), locust.get("steady_sends")),
            "locust_started_at": locust.get("test_started_at"),
            "load_started_at": start,
            "load_ended_at": end,
            "tasks": tasks,
            **_subject_fields(list(inputs.subjects), inputs.resources),
            "generator": generator,
            "exported_requests": locust.get("exported_requests"),
            "restarts": dict(inputs.restarts or {}),
            "probe": dict(inputs.probe) if inputs.probe is not None else None,
            "warnings": warnings,
            **inputs.extra,
        }
    )
