"""`make load`: drive the running lab with Locust, show the run live, and leave
a record of it in results/<run>.json.

    uv run python -m scripts.load --worker arq [--endpoint io/simple] [--users 100] [--spawn 100]
                                  [--iterations N | --duration 60s] [--run NAME] [--locust-workers 2]
                                  [--drain-watch 60 | --wait]
    uv run python -m scripts.load --scenario upstream --variant async-blocking --users 50 --iterations 100
    uv run python -m scripts.load --scenario clients --mode model --count 40000
    uv run python -m scripts.load --scenario payload --size 220000

A run is these steps (run_load):
  prepare        check the parameters (locust/load_params.py, shared with the
                 locustfile), that the lab runs and the run name is new; read the
                 limits the engine applied to the API and the workers
  start_locust   the liveness probe for the event-loop scenarios (stopped for queue
                 runs: it would take the API's CPU); the compose profile `load`, one
                 Locust master and LOCUST_WORKERS workers, headless (`up --no-deps`:
                 it never touches the lab's own containers)
  follow_load    the master's log (LAB-* lines) and the run's ledger, as a progress line
  wait_for_tasks the drain: watched for at most --drain-watch seconds (LOAD_DRAIN_WATCH_S),
                 then the backlog, its drain rate and the projected time to empty;
                 --wait waits until every task settled (at most --drain-timeout)
  measure        the probe's report; peak memory, CPU and throttling from Prometheus
  write_record   Grafana annotations, results/<run>.json, its table row, the Grafana link
The Locust containers (and the probe) are removed at the end, on Ctrl-C or an error too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from scripts import lab_results
from scripts.compose import ROOT, Compose, LoadError, setting
from scripts.console import Display, Rate, progress_line
from scripts.drain import TIMELINE_FIELDS, Drain, outcome_lines, timeline_row, watch_drain
from scripts.grafana import Grafana
from scripts.lab_api import api_address, ledger
from scripts.locust_run import LOAD_SERVICES, MasterLog, copy_locust_report, load_env, open_gate, raw_params
from scripts.params import load_params
from scripts.probe import probe_report, start_probe
from scripts.prometheus import Prometheus
from scripts.swarm import Swarm, orchestrator

START_TIMEOUT_S = 240  # the master waits up to 120 s for its workers (--expect-workers-max-wait)
STALL_TIMEOUT_S = 180  # no new response for this long: the run is stuck
PROBE_MIN_WINDOW_S = 2.0


@dataclass
class LoadRun:
    """What one run knows, filled in step by step."""

    args: argparse.Namespace
    params: object  # load_params.LoadParams
    compose: Compose | Swarm  # the lab driven: the compose project, or a Swarm stack
    ui: Display
    api: str = ""
    limits: dict = field(default_factory=dict)
    knobs: dict = field(default_factory=dict)
    grafana: Grafana | None = None
    prom_addr: str | None = None
    before: dict = field(default_factory=dict)
    log: MasterLog | None = None
    master: str = ""
    probe_started: bool = False
    platform: dict = field(default_factory=dict)  # Compose/Swarm.describe()
    containers_since: float = 0.0  # when the Locust containers were started
    # The run's ledger once a second, through the load and the drain watch: what
    # the dashboards' task panels are checked against (drain.timeline_row).
    timeline: list[list[float]] = field(default_factory=list)

    @property
    def queue_run(self) -> bool:
        return self.params.scenario == "queue"

    @property
    def subjects(self) -> list[str]:
        """The services under test: the queues' workers, or the API."""
        if not self.queue_run:
            return ["api"]
        return list(dict.fromkeys(lab_results.service_of(q) for q in self.params.workers))

    @property
    def watched(self) -> list[str]:
        """The services whose restarts the record counts."""
        return list(dict.fromkeys(["api", *(q for q in self.params.workers if q != "background")]))

    @property
    def api_text(self) -> str:
        return lab_results.limit_text(self.limits["api"])

    @property
    def worker_text(self) -> str:
        return lab_results.workers_limit_text(self.limits["workers"]) if self.queue_run else "-"

    def say(self, message: str) -> None:
        self.ui.say(message)


# -- The steps ------------------------------------------------------------------------
def prepare(args: argparse.Namespace, compose: Compose | Swarm, ui: Display) -> LoadRun:
    run = LoadRun(args, load_params.parse_params(raw_params(args)), compose, ui)  # ParamError: main() reports it
    p = run.params
    target = f"{p.iterations} requests" if p.iterations else f"{p.duration_s:g} s"
    what = f"worker={p.worker_label} endpoint={p.endpoint_label}" if run.queue_run else f"scenario={p.scenario}"
    run.say(
        f"run {p.run}: {what} users={p.users} spawn={p.spawn_rate:g}/s, {target} "
        f"(Locust: 1 master + {args.locust_workers} workers)"
    )
    run.platform = compose.describe()
    if run.platform["orchestrator"] == "swarm":
        run.say(f"on the Swarm stack {run.platform['stack']} ({run.platform['nodes']} node(s))")
    run.api = api_address(compose, p.workers)
    if ledger(run.api, p.run) is not None:
        raise LoadError(f"run {p.run} already has a ledger: choose another run= or `make reset run={p.run}`")
    read_limits(run)
    run.prom_addr = compose.port("prometheus", 9090)
    if run.prom_addr:
        prom = Prometheus(run.prom_addr)
        prom.ensure_load_jobs(compose, run.say)
        warn_about_backlogs(run, prom)
    run.grafana = Grafana(compose)
    run.say(f"limits applied: api {run.api_text}" + (f", workers {run.worker_text}" if run.queue_run else ""))
    if run.grafana.problem:
        run.say(run.grafana.problem)
    run.before = lab_results.restart_counts({s: compose.inspect(s) for s in run.watched})
    return run


def warn_about_backlogs(run: LoadRun, prom: Prometheus) -> None:
    """Tasks of earlier runs still draining (a watch that ended before its drain):
    this run's tasks queue behind them on the same queue, and any draining worker
    takes CPU from a run on a 2-core machine."""
    try:
        depths = prom.by("queue", "max by (queue) (lab_queue_depth) > 0")
    except (httpx.HTTPError, LoadError):
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
    api_containers = run.compose.inspect("api")
    run.limits = {"api": lab_results.limits_of(api_containers), "workers": {}}
    run.knobs = {"api": lab_results.knobs_of(api_containers, "api")}
    for q in run.params.workers:
        if q == "background":
            run.limits["workers"][q] = run.limits["api"]
            continue
        containers = run.compose.inspect(q)
        if not containers:
            raise LoadError(f'the {q} worker has no running container: `make up` (or make up services="... {q}")')
        run.limits["workers"][q] = lab_results.limits_of(containers, q)
        run.knobs[q] = lab_results.knobs_of(containers, q)


def start_locust(run: LoadRun) -> None:
    compose = run.compose
    compose.remove(*LOAD_SERVICES)  # leftovers of an interrupted run
    if run.queue_run:
        if compose.ids("probe"):
            run.say("stopping the liveness probe: it would take the API's CPU during a queue run")
            compose.remove("probe")
    else:
        start_probe(compose, run.say)
        run.probe_started = True
    run.say("starting Locust (the profile `load`) ...")
    run.containers_since = time.time()
    compose.start_load(LOAD_SERVICES, load_env(run.params, run.args.locust_workers))
    master = compose.ids("locust-master", include_stopped=True)
    if not master:
        raise LoadError("the Locust master container did not start")
    run.master = master[0]
    run.log = MasterLog(run.master)


def follow_load(run: LoadRun, on_start=None) -> dict:
    """Follow the master until its LAB-RESULT, showing progress; the result."""
    follow = _Follow(run, on_start)
    while follow.result is None:
        follow.step()
    result = follow.result
    load_s = (result["last_response_at"] or 0) - (result["first_request_at"] or 0)
    final = {"requests": result["requests"], "failures": result["failures"], "users": 0}
    rps = result["requests"] / load_s if load_s > 0 else 0.0
    run.ui.show(progress_line(run.params, final, load_s, follow.totals, rps), force=True)
    run.ui.end_line()
    run.say(f"load done: {result['requests']} requests in {load_s:.1f} s, {result['failures']} failed")
    return result


class _Follow:
    """One pass at a time over the master's new log lines and the ledger."""

    def __init__(self, run: LoadRun, on_start):
        self.run, self.on_start = run, on_start
        self.result: dict | None = None
        self.start_info: dict | None = None
        self.progress: dict = {}
        self.rate = Rate()
        self.began = self.last_change = time.monotonic()
        self.last_requests = -1
        self.totals: dict | None = {} if run.queue_run else None
        self.next_poll = 0.0

    def step(self) -> None:
        run = self.run
        for kind, data in run.log.events(wait=0.5):
            self.on_event(kind, data)
        if self.result is not None:
            return
        now = time.monotonic()
        if run.log.ended:
            raise LoadError("the Locust master stopped without a result; its last lines:\n" + "\n".join(run.log.tail))
        if self.start_info is None and now - self.began > START_TIMEOUT_S:
            raise LoadError(
                f"Locust did not start within {START_TIMEOUT_S} s; the master's last lines:\n" + "\n".join(run.log.tail)
            )
        if self.progress.get("requests", 0) != self.last_requests:
            self.last_requests, self.last_change = self.progress.get("requests", 0), now
        elif self.start_info is not None and now - self.last_change > STALL_TIMEOUT_S:
            raise LoadError(f"no response for {STALL_TIMEOUT_S} s: the run is stuck (make ps; make logs svc=api)")
        if run.queue_run and now >= self.next_poll:
            led = ledger(run.api, run.params.run)
            if led:
                self.totals = led["totals"]
                run.timeline.append(timeline_row(led))
            self.next_poll = now + 1
        if self.start_info is not None and self.progress:
            elapsed = self.progress.get("elapsed", 0)
            run.ui.show(progress_line(run.params, self.progress, elapsed, self.totals, self.rate.rps))

    def on_event(self, kind: str, data: dict) -> None:
        run = self.run
        if kind == "WAITING":
            prom = Prometheus(run.prom_addr) if run.prom_addr else None
            open_gate(run.compose, prom, run.args.locust_workers, run.containers_since, run.say)
        elif kind == "START":
            self.start_info = data
            if self.on_start is not None:
                self.on_start(data)
            run.say(f"load started at {time.strftime('%H:%M:%S', time.localtime(data['started_at']))}")
            annotate(run, "start", data["started_at"])
        elif kind == "PROGRESS":
            self.progress = data
            self.rate.add(data.get("elapsed", 0), data.get("requests", 0))
        elif kind == "RESULT":
            self.result = data
        elif kind in ("ERROR", "ABORT"):
            raise LoadError(f"Locust: {data.get('error') or data.get('reason')}")


def annotate(run: LoadRun, phase: str, at: float, duration_s: float | None = None) -> None:
    p = run.params
    body = lab_results.annotation(
        phase,
        p.run,
        p.worker_label or "none",
        p.endpoint_label,
        p.users,
        run.api_text,
        run.worker_text,
        at,
        duration_s=duration_s,
        tag=p.worker_label or p.scenario,
    )
    if msg := run.grafana.annotate(body):
        run.say(msg)


def wait_for_tasks(run: LoadRun, result: dict) -> Drain | None:
    """A queue run's drain (None for the event-loop scenarios), and what it came to."""
    if not run.queue_run:
        return None
    args = run.args
    watch_s = None if args.wait else args.drain_watch
    note = f"  ({lab_results.arq_cap(run.knobs)})" if "arq" in run.knobs else ""
    drain = watch_drain(
        run.api,
        run.params.run,
        accepted=result["status_codes"].get("202", 0),
        load_end=result["last_response_at"] or time.time(),
        watch_s=watch_s,
        timeout_s=args.drain_timeout,
        stall_s=args.drain_stall,
        show=run.ui.show,
        note=note,
    )
    run.timeline.extend(drain.timeline)
    run.ui.end_line()
    for line in outcome_lines(
        drain, run=run.params.run, watch_s=watch_s, timeout_s=args.drain_timeout, stall_s=args.drain_stall
    ):
        run.say(line)
    return drain


def run_window(run: LoadRun, result: dict, drain: Drain | None) -> tuple[float, float]:
    """The run's window for Prometheus: from the first request to the last
    settled task (or to now, while the drain goes on)."""
    start = result["first_request_at"] or result["test_started_at"]
    end = result["last_response_at"] or time.time()
    if drain is None:
        return start, end
    if drain.settled:
        return start, max(end, (drain.ledger or {}).get("last_settled_at") or 0)
    return start, time.time()


def measure(run: LoadRun, result: dict, window: tuple[float, float]) -> tuple[dict | None, dict | None, list[str]]:
    """The probe's report, and each subject's resources over the run's window from Prometheus."""
    start, window_end = window
    notes: list[str] = []
    probe = None
    if run.probe_started:
        # At least PROBE_MIN_WINDOW_S: a run of a few milliseconds would fall
        # between two probes (20 a second) and report nothing.
        end = result["last_response_at"] or time.time()
        probe_until = max(end, start + PROBE_MIN_WINDOW_S)
        time.sleep(max(0.0, probe_until + 0.2 - time.time()))
        probe = probe_report(run.compose, start, probe_until)
        if probe is None:
            run.say("the probe's report could not be read")
        else:
            probe["window_s"] = round(probe_until - start, 3)
    if not run.prom_addr:
        return None, probe, ["Prometheus is not running: no memory / CPU figures"]
    prom = Prometheus(run.prom_addr)
    services = list(dict.fromkeys([*run.subjects, "api"]))
    if not prom.wait_for_scrape(services, window_end):
        notes.append("Prometheus had not scraped past the end of the run: resource figures may miss its end")
    try:
        return prom.resources(services, start, window_end), probe, notes
    except (httpx.HTTPError, LoadError) as exc:
        return None, probe, [*notes, f"Prometheus query failed: {exc}"]


def drain_notes(run: LoadRun, drain: Drain | None) -> list[str]:
    if drain is None or drain.settled or drain.watch_ended:
        return []
    if drain.stalled:
        return [f"drain stalled: nothing settled for {run.args.drain_stall:.0f} s"]
    return [f"drain timeout after {run.args.drain_timeout:.0f} s"]


def collect_locust_report(run: LoadRun) -> list[str]:
    """Locust lingers so Prometheus scrapes its last counters, then exits by
    itself; then its HTML and CSV report are copied next to the record."""
    deadline = time.monotonic() + float(setting("LOAD_LINGER_S", "4")) + 30
    while not run.log.ended and time.monotonic() < deadline:
        run.log.events(wait=0.5)
    return copy_locust_report(run.master, Path(run.args.results_dir), run.params.run)


def write_record(run: LoadRun, result: dict, drain: Drain | None, window, resources, probe, notes) -> dict:
    p = run.params
    report_files = collect_locust_report(run)
    if not report_files:
        notes.append("Locust's HTML/CSV report could not be copied from the master container")
    after = lab_results.restart_counts({s: run.compose.inspect(s) for s in run.watched})
    record = lab_results.build_record(
        params={
            "run": p.run,
            "scenario": p.scenario,
            "worker": p.worker_label,
            "endpoint": p.endpoint_label,
            "users": p.users,
            "spawn_rate": p.spawn_rate,
            "iterations": p.iterations,
            "duration_target_s": p.duration_s,
        },
        locust=result,
        ledger=drain.ledger if drain else None,
        settled=bool(drain and drain.settled),
        draining=drain.watch_summary() if drain and drain.watch_ended else None,
        limits=run.limits,
        knobs=run.knobs,
        resources=resources,
        probe=probe,
        locust_workers=run.args.locust_workers,
        subjects=run.subjects,
        notes=notes,
        restarts=lab_results.restarts_during(run.before, after),
    )
    record["platform"] = run.platform
    record["window_end"] = window[1]
    if run.queue_run:
        record["timeline"] = {"fields": list(TIMELINE_FIELDS), "rows": run.timeline}
    record["locust_report"] = report_files
    annotate(run, "end", window[1], duration_s=window[1] - window[0])
    path = Path(run.args.results_dir) / f"{p.run}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    run.say(f"\nrecord: {path}" + (f" (Locust's report: {', '.join(report_files)})" if report_files else ""))
    return record


def show_record(run: LoadRun, record: dict, window: tuple[float, float], drain: Drain | None) -> None:
    run.say(lab_results.table_header())
    run.say(lab_results.table_row(record))
    for warning in record["warnings"]:
        run.say(f"WARNING: {warning}")
    if probe := record.get("probe"):
        run.say(
            f"probe: {probe.get('ok')}/{probe.get('sent')} ok ({100 * (probe.get('success_rate') or 0):.1f}%), "
            f"worst gap {probe.get('worst_gap_s')} s"
        )
    queue = None if run.params.worker_label in (None, "all") else run.params.worker_label
    # While the drain goes on, the link ends at "now": it follows the drain.
    end = None if drain and drain.watch_ended else window[1]
    link = run.grafana.run_link("queues" if run.queue_run else "api", window[0], end, queue)
    run.say(f"Grafana, this run: {link}")


def run_load(
    args: argparse.Namespace, compose: Compose | Swarm | None = None, display: Display | None = None, on_start=None
) -> int:
    """One load run and its record; `on_start(start_info)` is called when Locust's users start.
    0 when the run's tasks settled or are still draining, 1 when some were not coming."""
    run = prepare(args, compose or orchestrator(), display or Display())
    try:
        start_locust(run)
        result = follow_load(run, on_start)
        drain = wait_for_tasks(run, result)
        window = run_window(run, result, drain)
        resources, probe, notes = measure(run, result, window)
        record = write_record(run, result, drain, window, resources, probe, drain_notes(run, drain) + notes)
        show_record(run, record, window, drain)
        return 1 if drain is not None and (drain.stalled or drain.timed_out) else 0
    finally:
        run.ui.end_line()
        if run.log:
            run.log.close()
        run.compose.remove(*LOAD_SERVICES)
        if run.probe_started:
            run.compose.remove("probe")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.load", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--scenario", default="", help="queue (default), upstream, clients, payload")
    p.add_argument("--worker", default="", help=f"queue runs: {'|'.join(lab_results.QUEUES)}|all|a,b")
    p.add_argument(
        "--endpoint",
        default="",
        help="queue runs: io/simple (default)|io/sync|io/thread|cpu/simple|cpu/process|all|a,b",
    )
    p.add_argument("--users", default="", help="Locust users (default 100)")
    p.add_argument("--spawn", default="", help="users started per second (default 100)")
    p.add_argument(
        "--iterations",
        default="",
        help=f"exactly this many requests (default for the event-loop runs: {load_params.DEFAULT_ITERATIONS['upstream']})",
    )
    p.add_argument(
        "--duration",
        default="",
        help=f"or send for this long: 60s, 2m (default for queue runs: {load_params.DEFAULT_DURATION_S['queue']:g}s)",
    )
    p.add_argument("--run", default="", help="the ledger's run name (default: generated)")
    p.add_argument("--variant", default="", help="upstream: async-blocking|async-threadpool|sync-def|async-native")
    p.add_argument("--mode", default="", help="clients: model (default)|prejson")
    p.add_argument("--count", default="", help="clients: how many (default 1000; the article: 40000)")
    p.add_argument("--size", default="", help="payload: bytes (default 1024)")
    p.add_argument(
        "--locust-workers",
        type=int,
        default=int(setting("LOCUST_WORKERS", "2")),
        help="Locust worker processes (containers), default LOCUST_WORKERS or 2",
    )
    p.add_argument(
        "--drain-watch",
        type=float,
        default=float(setting("LOAD_DRAIN_WATCH_S", "60")),
        help="seconds to watch the drain after the load before ending with the backlog (default 60)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        default=setting("LOAD_WAIT", "") not in ("", "0"),
        help="wait until every task settled (at most --drain-timeout), as scripts want",
    )
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=float(setting("LOAD_DRAIN_TIMEOUT_S", "1200")),
        help="with --wait: seconds to wait for pending tasks after the load (default 1200)",
    )
    # Waiting for the drain ends early when no task settled for this long: a
    # task takes seconds at most, so those are not coming.
    p.add_argument(
        "--drain-stall",
        type=float,
        default=float(setting("LOAD_DRAIN_STALL_S", "120")),
        help="...or once no task settled for this long (seconds)",
    )
    p.add_argument("--results-dir", default=str(ROOT / "results"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.locust_workers < 1:
        print("locust_workers must be at least 1", file=sys.stderr)
        return 2
    try:
        return run_load(args)
    except load_params.ParamError as exc:
        print(f"make load: {exc}", file=sys.stderr)
        return 2
    except LoadError as exc:
        print(f"\nmake load: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: the Locust containers were removed; no record written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
