"""`make load`: drive the running lab with Locust, show the run live, and leave
a record of it in results/<run>.json. A run is these steps (run_load):

  prepare        check the parameters (lab/load_params.py, shared with the
                 locustfile), that the lab runs and the run name is new; read the
                 limits the engine applied to the API and the workers
  start_locust   the liveness probe for the event-loop scenarios (stopped for queue
                 runs: it would take the API's CPU); the compose profile `load`, one
                 Locust master and LOCUST_WORKERS workers, headless (`up --no-deps`:
                 it never touches the lab's own containers)
  follow_load    the master's log (LAB-* lines) and the run's ledger, as a progress line;
                 beside it, the machine's speed (platform/machine_speed.py)
  wait_for_tasks watched for at most --drain-watch seconds (LOAD_DRAIN_WATCH_S),
                 then the backlog, the rate tasks settled at and the projected time to
                 empty; --wait waits until every task settled (at most --drain-timeout)
  measure        the probe's report; peak memory, CPU and throttling from Prometheus, and
                 the API's enqueue counter as it scraped it through the load
  write_record   Grafana annotations, results/<run>.json
  show_record    the run in a dozen lines: rate, latency, tasks, drain, memory, where its files are
The Locust containers (and the probe) are removed at the end, on Ctrl-C or an error too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from labctl.clients.api import api_address, ledger, probe_report
from labctl.clients.grafana import Grafana, annotation
from labctl.clients.prometheus import Prometheus
from labctl.config import knobs
from labctl.errors import LabError, LabNotRunning
from labctl.load_run.follow import Follow, load_progress
from labctl.load_run.locust import (
    LOAD_SERVICES,
    MasterLog,
    copy_locust_report,
    let_master_quit,
    load_env,
    open_gate,
)
from labctl.load_run.options import LoadOptions
from labctl.load_run.state import LoadRun
from labctl.load_run.task_wait import TIMELINE_FIELDS, TaskWait, outcome_lines, watch_tasks
from labctl.platform import containers as C
from labctl.platform.lab import Lab, answers
from labctl.platform.machine_speed import UNIT, SpeedProbe
from labctl.platform.orchestrator import orchestrator
from labctl.polling import wait_until
from labctl.records.run import Limits, RunRecord, ServiceLimits
from labctl.records.run_build import RunInputs, build_run_record
from labctl.records.store import Store
from labctl.render import run_summary, run_table
from labctl.render.console import Console

PROBE_MIN_WINDOW_S = 2.0


# -- The steps ------------------------------------------------------------------------
def prepare(options: LoadOptions, lab: Lab, ui: Console) -> LoadRun:
    run = LoadRun(options, options.parse(), lab, ui, Store(options.results_dir))
    p = run.params
    target = f"{p.iterations} requests" if p.iterations else f"{p.duration_s:g} s"
    what = f"worker={p.worker_label} endpoint={p.endpoint_label}" if run.queue_run else f"scenario={p.scenario}"
    run.say(
        f"run {p.run}: {what} users={p.users} spawn={p.spawn_rate:g}/s, {target} "
        f"(Locust: 1 master + {options.locust_workers} workers)"
    )
    run.platform = lab.describe()
    if run.platform["orchestrator"] == "swarm":
        run.say(f"on the Swarm stack {run.platform['stack']} ({run.platform['nodes']} node(s))")
    run.api = api_address(lab, p.workers)
    if ledger(run.api, p.run) is not None:
        raise LabError(f"run {p.run} already has a ledger: choose another run= or `make reset run={p.run}`")
    read_limits(run)
    run.prom_addr = lab.port("prometheus", 9090)
    if run.prom_addr:
        prom = Prometheus(run.prom_addr)
        prom.ensure_load_jobs(lab, run.say)
        warn_about_backlogs(run, prom)
    run.grafana = Grafana(lab)
    limits = run.limits
    run.say(f"limits applied: api {limits.api_text}" + (f", workers {limits.workers_text}" if run.queue_run else ""))
    if run.grafana.problem:
        run.say(run.grafana.problem)
    run.before = C.restart_counts({s: lab.inspect(s) for s in run.watched})
    return run


def warn_about_backlogs(run: LoadRun, prom: Prometheus) -> None:
    """Tasks of earlier runs still waiting (a watch that ended before its tasks):
    this run's tasks queue behind them on the same queue, and any busy worker
    takes CPU from a run on a 2-core machine."""
    try:
        depths = prom.queue_depths()
    except (httpx.HTTPError, LabError):
        return
    for queue, depth in sorted(depths.items()):
        if queue in run.params.workers:
            run.say(
                f"NOTE: {queue}'s queue still holds {depth:.0f} task(s) of earlier runs: this run's tasks wait "
                "behind them (make results shows when those runs settle)"
            )
        else:
            run.say(
                f"NOTE: {depth:.0f} task(s) of earlier runs are still draining on {queue}: its worker shares "
                "the machine's CPU with this run"
            )


def read_limits(run: LoadRun) -> None:
    """The limits and knobs the engine applied to the API and each worker (docker inspect)."""
    api_containers = run.lab.inspect("api")
    api = ServiceLimits.model_validate(C.limits_of(api_containers))
    workers: dict[str, ServiceLimits] = {}
    run.knobs = {"api": C.knobs_of(api_containers, "api")}
    for q in run.params.workers:
        if q == "background":
            workers[q] = api
            continue
        containers = run.lab.inspect(q)
        if not containers:
            raise LabNotRunning(f'the {q} worker has no running container: `make up` (or make up services="... {q}")')
        workers[q] = ServiceLimits.model_validate(C.limits_of(containers, q))
        run.knobs[q] = C.knobs_of(containers, q)
    run.limits = Limits(api=api, workers=workers)


def start_probe(run: LoadRun) -> None:
    """The liveness probe (compose service `probe`) of the event-loop scenarios, a second ahead of the load."""
    run.lab.start_load(("probe",), {})
    if not answers(run.lab, "probe", 9000, "/healthz"):
        raise LabError("the probe did not answer within 60 s: docker compose --profile load logs probe")
    run.probe_started = True
    time.sleep(1)  # a second of probes before the load: the report's window starts with data
    run.say(
        f"liveness probe running (GET {run.lab.env.get('PROBE_TARGET') or 'http://api:8000/healthz'}, "
        f"{run.lab.env.get('PROBE_RATE') or 20}/s)"
    )


def start_locust(run: LoadRun) -> None:
    lab = run.lab
    lab.remove(*LOAD_SERVICES)  # leftovers of an interrupted run
    if run.queue_run:
        if lab.ids("probe"):
            run.say("stopping the liveness probe: it would take the API's CPU during a queue run")
            lab.remove("probe")
    else:
        start_probe(run)
    run.say("starting Locust (the profile `load`) ...")
    run.containers_since = time.time()
    lab.start_load(LOAD_SERVICES, load_env(run.params, run.options.locust_workers))
    master = lab.ids("locust-master", include_stopped=True)
    if not master:
        raise LabError("the Locust master container did not start")
    run.master = master[0]
    run.log = MasterLog(run.master)


def follow_load(run: LoadRun, on_start: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Follow the master until its LAB-RESULT, showing progress; the result."""

    def started(info: dict[str, Any]) -> None:
        if on_start is not None:
            on_start(info)
        run.say(f"load started at {time.strftime('%H:%M:%S', time.localtime(info['started_at']))}")
        annotate(run, "start", info["started_at"])

    def waiting() -> None:
        prom = Prometheus(run.prom_addr) if run.prom_addr else None
        open_gate(run.lab, prom, run.options.locust_workers, run.containers_since, run.say)

    follow = Follow(run, started, waiting)
    wait_until(follow.step, timeout_s=None, every_s=0)
    result = follow.result
    assert result is not None
    prom = Prometheus(run.prom_addr) if run.prom_addr else None
    result["prometheus_counted_requests"] = let_master_quit(run.lab, prom, result, run.containers_since)
    load_s = (result["last_response_at"] or 0) - (result["first_request_at"] or 0)
    final = {"requests": result["requests"], "failures": result["failures"], "users": 0}
    rps = result["requests"] / load_s if load_s > 0 else 0.0
    run.ui.progress(*load_progress(run.params, final, load_s, follow.totals, rps), force=True)
    run.ui.end_progress()
    run.say(f"load done: {result['requests']} requests in {load_s:.1f} s, {result['failures']} failed")
    return result


def annotate(run: LoadRun, phase: str, at: float, duration_s: float | None = None) -> None:
    p = run.params
    body = annotation(
        phase,
        p.run,
        p.worker_label or "none",
        p.endpoint_label,
        p.users,
        run.limits.api_text,
        run.limits.workers_text if run.queue_run else "-",
        at,
        duration_s=duration_s,
        tag=p.worker_label or p.scenario,
    )
    assert run.grafana is not None
    if msg := run.grafana.annotate(body):
        run.say(msg)


def wait_for_tasks(
    run: LoadRun, result: dict[str, Any], written_off: Callable[[], int | None] | None = None
) -> TaskWait | None:
    """A queue run's wait for its tasks (None for the event-loop scenarios), and what it came to;
    `written_off`: the tasks a fault took for good (watch_tasks)."""
    if not run.queue_run:
        return None
    o = run.options
    watch_s = None if o.wait else o.drain_watch
    note = f"  ({run_table.arq_knobs(run.knobs)})" if "arq" in run.knobs else ""
    wait = watch_tasks(
        run.api,
        run.params.run,
        accepted=result["status_codes"].get("202", 0),
        load_end=result["last_response_at"] or time.time(),
        watch_s=watch_s,
        timeout_s=o.drain_timeout,
        stall_s=o.drain_stall,
        show=lambda fraction, text: run.ui.progress(fraction, text, label="draining "),
        note=note,
        written_off=written_off,
    )
    run.timeline.extend(wait.timeline)
    run.ui.end_progress()
    for line in outcome_lines(
        wait, run=run.params.run, watch_s=watch_s, timeout_s=o.drain_timeout, stall_s=o.drain_stall
    ):
        run.say(line)
    return wait


def run_window(result: dict[str, Any], wait: TaskWait | None) -> tuple[float, float]:
    """The run's window for Prometheus: from the first request to the last
    settled task (or to now, while the tasks are still being worked through)."""
    start = result["first_request_at"] or result["test_started_at"]
    end = result["last_response_at"] or time.time()
    if wait is None:
        return start, end
    if wait.settled:
        return start, max(end, (wait.ledger or {}).get("last_settled_at") or 0)
    return start, time.time()


def _probe(run: LoadRun, result: dict[str, Any], start: float) -> dict[str, Any] | None:
    # At least PROBE_MIN_WINDOW_S: a run of a few milliseconds would fall
    # between two probes (20 a second) and report nothing.
    end = result["last_response_at"] or time.time()
    probe_until = max(end, start + PROBE_MIN_WINDOW_S)
    time.sleep(max(0.0, probe_until + 0.2 - time.time()))
    probe = probe_report(run.lab, start, probe_until)
    if probe is None:
        run.say("the probe's report could not be read")
    else:
        probe["window_s"] = round(probe_until - start, 3)
    return probe


def measure(
    run: LoadRun, result: dict[str, Any], window: tuple[float, float]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """The probe's report, and each subject's resources over the run's window from Prometheus."""
    start, window_end = window
    notes: list[str] = []
    probe = _probe(run, result, start) if run.probe_started else None
    if not run.prom_addr:
        return None, probe, ["Prometheus is not running: no memory / CPU figures"]
    prom = Prometheus(run.prom_addr)
    services = list(dict.fromkeys([*run.subjects, "api"]))
    if not prom.wait_for_scrape(services, window_end):
        notes.append("Prometheus had not scraped past the end of the run: resource figures may miss its end")
    if result.get("prometheus_counted_requests") is False:
        notes.append("Prometheus did not count every request Locust counted: the Load dashboard misses some")
    try:
        if run.queue_run:
            run.enqueued_scrapes = enqueued_scrapes(run, prom, result)
            run.task_times = prom.task_times(list(run.params.workers), start, window_end) or None
        return prom.resources(services, start, window_end), probe, notes
    except (httpx.HTTPError, LabError) as exc:
        return None, probe, [*notes, f"Prometheus query failed: {exc}"]


def enqueued_scrapes(run: LoadRun, prom: Prometheus, result: dict[str, Any]) -> dict[str, Any]:
    """The API's enqueue counter for the run's queues as Prometheus scraped it through the
    load: what a run's steady RPS is read from (records/compare_run.py). The ledger, read
    through the loaded API, can answer seconds late; the counter is scraped from the
    API's metrics thread every 2 s whatever its event loop is doing."""
    source = f'lab_enqueued_total{{job="api",queue=~"{"|".join(run.params.workers)}"}}'
    start, end = run_window(result, None)
    return {"source": source, "rows": prom.counter_samples(source, start - 3, end + 3)}


def wait_notes(run: LoadRun, wait: TaskWait | None) -> list[str]:
    if wait is None or wait.settled or wait.watch_ended:
        return []
    if wait.written_off:
        return [f"{wait.totals.get('pending')} task(s) went with the killed process"]
    if wait.stalled:
        return [f"drain stalled: nothing settled for {run.options.drain_stall:.0f} s"]
    return [f"drain timeout after {run.options.drain_timeout:.0f} s"]


def collect_locust_report(run: LoadRun) -> list[str]:
    """Locust's master exits once make load let it (follow_load), or by
    itself after its wait; then its HTML and CSV report are copied next to the record."""
    log = run.log
    assert log is not None

    def ended() -> bool:
        log.events(wait=0.5)
        return log.ended

    wait_until(ended, timeout_s=knobs().load_linger_s + 70, every_s=0)
    return copy_locust_report(run.master, run.store, run.params.run)


def write_record(
    run: LoadRun,
    result: dict[str, Any],
    wait: TaskWait | None,
    window: tuple[float, float],
    resources: dict[str, Any] | None,
    probe: dict[str, Any] | None,
    notes: list[str],
) -> RunRecord:
    p = run.params
    report_files = collect_locust_report(run)
    if not report_files:
        notes.append("Locust's HTML/CSV report could not be copied from the master container")
    after = C.restart_counts({s: run.lab.inspect(s) for s in run.watched})
    record = build_run_record(
        RunInputs(
            params={
                "run": p.run,
                "scenario": p.scenario,
                "worker": p.worker_label,
                "endpoint": p.endpoint_label,
                "users": p.users,
                "spawn_rate": p.spawn_rate,
                "iterations": p.iterations,
                "duration_target_s": p.duration_s,
                "target_rate": p.rate,
            },
            locust=result,
            ledger=wait.ledger if wait else None,
            settled=bool(wait and wait.settled),
            draining=wait.watch_summary() if wait and wait.watch_ended else None,
            limits=run.limits,
            knobs=run.knobs,
            resources=resources,
            probe=probe,
            locust_workers=run.options.locust_workers,
            subjects=run.subjects,
            notes=notes,
            restarts=C.restarts_during(run.before, after),
            extra={
                "platform": run.platform,
                "window_end": window[1],
                "locust_report": report_files,
                **({"timeline": {"fields": list(TIMELINE_FIELDS), "rows": run.timeline}} if run.queue_run else {}),
                **({"machine_speed": {"unit": UNIT, "rows": run.speed.rows}} if run.speed else {}),
                **({"enqueued_scrapes": run.enqueued_scrapes} if run.enqueued_scrapes else {}),
                **({"task_times": run.task_times} if run.task_times else {}),
            },
        )
    )
    annotate(run, "end", window[1], duration_s=window[1] - window[0])
    run.store.save(record)
    return record


def show_record(run: LoadRun, record: RunRecord, window: tuple[float, float], wait: TaskWait | None) -> None:
    """The run in a dozen lines (render/run_summary.py); every column: make results full=1."""
    queue = None if run.params.worker_label in (None, "all") else run.params.worker_label
    # While the tasks are still worked through, the link ends at "now": it follows them.
    end = None if wait and wait.watch_ended else window[1]
    assert run.grafana is not None
    link = run.grafana.run_link("queues" if run.queue_run else "api", window[0], end, queue)
    run.say("\n" + "\n".join(run_summary.lines(record, str(run.store.path(record.run)), link)))


def run_load(
    options: LoadOptions,
    lab: Lab | None = None,
    ui: Console | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    written_off: Callable[[], int | None] | None = None,
) -> RunRecord:
    """One load run and its record; `on_start(start_info)` is called when Locust's users start;
    `written_off()`: the tasks a fault took for good, once known (make chaos; watch_tasks).
    The record says whether its tasks settled, are still being worked through, or some are not coming
    (RunRecord.unsettled)."""
    run = prepare(options, lab or orchestrator(), ui or Console())
    try:
        start_locust(run)
        run.platform = run.lab.describe()  # with where Locust's containers run
        run.speed = SpeedProbe().start()
        result = follow_load(run, on_start)
        run.speed.stop()
        wait = wait_for_tasks(run, result, written_off)
        window = run_window(result, wait)
        resources, probe, notes = measure(run, result, window)
        record = write_record(run, result, wait, window, resources, probe, wait_notes(run, wait) + notes)
        show_record(run, record, window, wait)
        return record
    finally:
        run.ui.end_progress()
        if run.speed:
            run.speed.stop()
        if run.log:
            run.log.close()
        run.lab.remove(*LOAD_SERVICES)
        if run.probe_started:
            run.lab.remove("probe")
