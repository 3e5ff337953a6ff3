"""Locust users for the lab, one class per scenario (lab/load_params.py):

  QueueUser     POST /api/v1/incr/{kind}/{variant}/{queue}   (LOAD_SCENARIO=queue)
  UpstreamUser  POST /api/v1/upstream/{variant}              (LOAD_SCENARIO=upstream)
  ClientsUser   GET  /api/v1/clients?count=&mode=             (LOAD_SCENARIO=clients)
  PayloadUser   GET  /api/v1/payload?size=                    (LOAD_SCENARIO=payload)

LOAD_SCENARIO picks the one class that is not abstract, so `locust -f
locust/locustfile.py` runs exactly that scenario. The other parameters come from
LOAD_* variables (or --lab-* options; the master hands its values to the workers).
Every request carries the run in X-Lab-Run.

What core Locust lacks, added here:
- An iteration target (LOAD_ITERATIONS): the master hands out one ticket per
  request (TicketBook) and workers ask for at most one ticket per user at a time,
  so exactly that many requests are sent, however many workers there are. Once
  Locust's stats count them all, the master stops the users, waits until make
  load says Prometheus holds the final counters (LOAD_END_GATE; without it,
  LOAD_LINGER_S) and quits; every process exits 0.
  LOAD_DURATION instead: send for that long.
- Prometheus metrics on METRICS_PORT (grafana/README.md fixes the names):
  locust_users (master or local process), locust_requests_total,
  locust_failures_total and locust_response_time_seconds (only the processes that
  send requests, so each request is counted once), and the container's cgroup
  metrics with service=locust-master / locust-worker.
- Machine-readable lines on stdout for the load driver (labctl/load_run), which
  reads the master's log: `LAB-PROGRESS {json}` every second, `LAB-RESULT {json}`
  once at the end (`LAB-END` as the master quits at its end gate),
  `LAB-ERROR`/`LAB-ABORT` when it cannot run.
"""

import dataclasses
import json
import os
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

import gevent
import locust.runners
from gevent.event import Event
from gevent.pywsgi import WSGIServer
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.event import EventHook
from locust.rpc import Message
from locust.runners import MasterRunner, Runner, WorkerRunner
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, make_wsgi_app

from lab.cgroup import read_cgroup, register_cgroup_metrics
from lab.load_params import (
    ENV_NAMES,
    USER_CLASSES,
    LoadParams,
    ParamError,
    TicketBook,
    parse_params,
    tickets_to_ask,
)
from locust import FastHttpUser, constant, events, task

SCENARIO = os.environ.get("LOAD_SCENARIO") or "queue"
if SCENARIO not in USER_CLASSES:
    raise SystemExit(f"LAB-ERROR LOAD_SCENARIO={SCENARIO!r}: choose from {', '.join(USER_CLASSES)}")
LINGER_S = float(os.environ.get("LOAD_LINGER_S") or 4)
# The master waits for this file before its users start (make load creates it
# once Prometheus has scraped every Locust process), so the dashboards see the
# Locust counters from zero. Unset: no wait.
START_GATE = os.environ.get("LOAD_START_GATE")
START_GATE_TIMEOUT_S = float(os.environ.get("LOAD_START_GATE_TIMEOUT_S") or 60)
# After the result, the master quits once this file exists (make load creates it
# when Prometheus counts every request the run's Locust processes counted), at
# most END_GATE_TIMEOUT_S. Unset: it lingers LINGER_S.
END_GATE = os.environ.get("LOAD_END_GATE")
END_GATE_TIMEOUT_S = 60.0
TIMEOUT_S = float(os.environ.get("LOAD_TIMEOUT_S") or 60)
# rate=: a send more than this behind its schedule counts as late (the run's record
# says when many were: the schedule slipped).
LATE_S = 0.1
# A failure's text in Locust's table and the record: the API's error, cut here.
ERROR_TEXT_CHARS = 200
# Workers report their stats every second instead of every 3 s: the master sees
# the last request sooner, and the driver's progress is fresher.
locust.runners.WORKER_REPORT_INTERVAL = 1.0

# Options (--lab-* or LOAD_*), in load_params' vocabulary.
OPTIONS = ENV_NAMES

REQUESTS = Counter("locust_requests", "Requests sent by Locust, failed ones included.", ["name", "method"])
FAILURES = Counter("locust_failures", "Requests that failed, as Locust judged them.", ["name", "method"])
RESPONSE_TIME = Histogram(
    "locust_response_time_seconds",
    "Response time as Locust measured it.",
    ["name"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


_Handler = TypeVar("_Handler", bound=Callable[..., None])


def listener(hook: EventHook) -> Callable[[_Handler], _Handler]:
    """hook.add_listener, which Locust leaves unannotated, typed: registers a handler and returns it unchanged."""
    return cast("Callable[[_Handler], _Handler]", hook.add_listener)


def runner_of(environment: Environment) -> Runner:
    """The environment's runner, which Locust creates before any event this file handles fires."""
    assert environment.runner is not None, "Locust's runner is not created yet"
    return environment.runner


def emit(kind: str, payload: Mapping[str, object]) -> None:
    """One line for the driver; a single write, so lines never interleave."""
    print(f"LAB-{kind} {json.dumps(payload, separators=(',', ':'))}", flush=True)


class Tickets:
    """A worker's (or the local process's) side of the iteration target: users
    take one ticket per request and wait while the master is asked for more."""

    def __init__(self, ask: Callable[[int], None]) -> None:
        self.ask = ask  # ask(n): request n tickets; the answer comes to granted()
        self.available = 0
        self.asked = False
        self.exhausted = False
        self.changed = Event()

    def take(self, users: int) -> bool:
        """True: send one request. False: the run's requests are all handed out."""
        while True:
            if self.available > 0:
                self.available -= 1
                self._refill(users)
                return True
            if self.exhausted:
                return False
            # Cleared before asking: a grant that arrives while the message is
            # being sent still wakes this user.
            self.changed.clear()
            self._refill(users)
            self.changed.wait(timeout=5)

    def _refill(self, users: int) -> None:
        if self.asked or self.exhausted:
            return
        want = tickets_to_ask(users, self.available)
        if want:
            self.asked = True
            self.ask(want)

    def granted(self, n: int, exhausted: bool) -> None:
        self.available += n
        self.asked = False
        self.exhausted = exhausted
        if n or exhausted:  # nothing new: the waiting users ask again when their wait times out
            self.changed.set()


class State:
    """What this process knows about the run."""

    def __init__(self) -> None:
        self.role = "local"
        self.params: LoadParams | None = None
        self.book: TicketBook | None = None  # master / local
        self.tickets: Tickets | None = None  # worker / local
        self.status_codes: dict[str, int] = {}
        self.first_start: float | None = None
        self.last_end: float | None = None
        self.exported = 0  # requests counted in this process's locust_requests_total
        self.in_flight = 0  # requests sent and not answered yet
        self.scheduled_sends = 0  # rate=: requests sent on a schedule
        self.late_sends = 0  # ...of which more than LATE_S behind it
        # The same for the sends made in the run's second half, where make capacity reads
        # a step: the users' first sends, late while they start, are left out.
        self.half_at: float | None = None
        self.steady_sends = 0
        self.steady_late_sends = 0
        self.closed = False  # duration reached: send nothing more, let the requests in flight finish
        self.cpu_start: tuple[float, float] | None = None  # (time, cgroup CPU seconds) at test start
        self.worker_reports: dict[str, dict[str, Any]] = {}  # master: the latest snapshot of each worker
        self.controller: gevent.Greenlet | None = None

    @property
    def run_params(self) -> LoadParams:
        """params, where they must be known: read at init (master, local) or at test start (worker)."""
        assert self.params is not None, "the run's parameters are not read yet (init, or test start on a worker)"
        return self.params

    @property
    def ticket_book(self) -> TicketBook:
        """book, where a run of iterations has one: made at test start (master, local)."""
        assert self.book is not None, "no ticket book: it is made at test start of a run of iterations"
        return self.book

    @property
    def user_tickets(self) -> Tickets:
        """tickets, where a run of iterations has them: made at test start (worker, local)."""
        assert self.tickets is not None, "no tickets: they are made at test start of a run of iterations"
        return self.tickets

    def snapshot(self) -> dict[str, Any]:
        """Cumulative figures of this process, sent to the master with every stats report."""
        sample = read_cgroup()
        now = time.time()
        t0, cpu0 = self.cpu_start or (now, sample.cpu_seconds or 0.0)
        return {
            "role": self.role,
            "status_codes": dict(self.status_codes),
            "first_start": self.first_start,
            "last_end": self.last_end,
            "exported_requests": self.exported,
            "in_flight": self.in_flight,
            "scheduled_sends": self.scheduled_sends,
            "late_sends": self.late_sends,
            "steady_sends": self.steady_sends,
            "steady_late_sends": self.steady_late_sends,
            "closed": self.closed,
            "cpu_seconds": round((sample.cpu_seconds or 0.0) - cpu0, 3),
            "interval_s": round(now - t0, 3),
            "cpu_limit_cores": sample.cpu_limit_cores,
        }


STATE = State()


def in_web_ui(environment: Environment) -> bool:
    """Locust's web UI drives the run (make locust-ui): not headless, not autostarted."""
    opts = environment.parsed_options
    return not (getattr(opts, "headless", False) or getattr(opts, "autostart", False))


def options_of(environment: Environment) -> dict[str, object]:
    opts = environment.parsed_options
    raw = {key: getattr(opts, f"lab_{key}", None) for key in OPTIONS}
    raw["users"] = getattr(opts, "num_users", None)
    raw["spawn_rate"] = getattr(opts, "spawn_rate", None)
    return raw


@listener(events.init_command_line_parser)
def add_options(parser: LocustArgumentParser) -> None:
    group = parser.add_argument_group("lab", "The lab's load parameters (lab/load_params.py)")
    for key, env in OPTIONS.items():
        group.add_argument(f"--lab-{key}", env_var=env, default="", help=f"load parameter {key} (${env})")


def _guard_restart() -> None:
    """Exits when LOAD_RESTART_GUARD's file shows the container ran before; else writes it."""
    guard = os.environ.get("LOAD_RESTART_GUARD")
    if guard:
        if Path(guard).exists():
            # The container restarted after a crash (or a bad parameter): running
            # again would send the run's requests a second time. Exit 0 so the
            # restart policy stops here.
            emit("ABORT", {"role": STATE.role, "reason": "restarted: a load run is never repeated"})
            os._exit(0)
        # Written before anything can fail. Also the container's healthcheck: the
        # runner exists (the master is bound), so the workers may connect.
        Path(guard).write_text(str(os.getpid()))


def _read_params(environment: Environment) -> None:
    """The master (or a local run) checks the run's parameters into STATE.params; exits 2 on a bad one."""
    try:  # fail before any user starts; the workers get the master's values
        raw = options_of(environment)
        STATE.params = parse_params(raw)
        if in_web_ui(environment) and not (raw.get("iterations") or raw.get("duration")):
            # In the web UI the person stops the run: no default length.
            STATE.params = dataclasses.replace(STATE.params, iterations=None, duration_s=None)
    except ParamError as exc:
        emit("ERROR", {"role": STATE.role, "error": str(exc)})
        raise SystemExit(2) from None
    if STATE.params.scenario != SCENARIO:
        emit(
            "ERROR",
            {
                "role": STATE.role,
                "error": f"--lab-scenario={STATE.params.scenario} but LOAD_SCENARIO={SCENARIO} chose the user class",
            },
        )
        raise SystemExit(2)


def _start_metrics(environment: Environment, runner: Runner) -> None:
    """This process's CPU, users and request metrics, served on METRICS_PORT unless it is off."""
    service = os.environ.get("SERVICE_NAME") or ("locust-worker" if STATE.role == "worker" else "locust-master")
    register_cgroup_metrics(service)
    if STATE.role != "worker":  # the master counts every worker's users: exported once, here
        Gauge("locust_users", "Users running (on the master: every worker's users).").set_function(
            lambda: runner.user_count
        )
    if STATE.role != "master":
        listener(environment.events.request)(on_request)
    port = os.environ.get("METRICS_PORT", "9000")
    if port not in ("", "off"):
        WSGIServer((os.environ.get("METRICS_ADDR", "0.0.0.0"), int(port)), make_wsgi_app(REGISTRY), log=None).start()


def _register_messages(environment: Environment, runner: Runner) -> None:
    """The messages between the master and its workers that share out and close the run."""
    if STATE.role == "master":
        runner.register_message("lab_want", on_want)
        runner.register_message(
            "lab_closed", lambda environment, msg, **_: STATE.worker_reports.__setitem__(msg.node_id, msg.data)
        )
        listener(environment.events.worker_report)(on_worker_report)
    elif STATE.role == "worker":
        runner.register_message("lab_grant", on_grant)
        runner.register_message("lab_close", on_close)
        listener(environment.events.report_to_master)(on_report_to_master)


@listener(events.init)
def on_init(environment: Environment, runner: Runner | None = None, **_: object) -> None:
    if runner is None:
        return
    STATE.role = (
        "master" if isinstance(runner, MasterRunner) else "worker" if isinstance(runner, WorkerRunner) else "local"
    )
    _guard_restart()
    if STATE.role != "worker":
        _read_params(environment)
    if STATE.role != "master":
        try:  # the workers read the same LOAD_* as the master (their values win at spawn)
            precreate_series(parse_params(options_of(environment)))
        except ParamError:
            pass
    _start_metrics(environment, runner)
    _register_messages(environment, runner)


def precreate_series(params: LoadParams) -> None:
    """Every request series at 0 before the first request: Prometheus's rate()
    counts from the first sample it sees, so a series born with the first
    requests would lose them."""
    for call in params.calls:
        REQUESTS.labels(name=call.name, method=call.method)
        FAILURES.labels(name=call.name, method=call.method)
        RESPONSE_TIME.labels(name=call.name)


def wait_for_gate() -> None:
    if not START_GATE:
        return
    emit("WAITING", {"gate": START_GATE, "timeout_s": START_GATE_TIMEOUT_S})
    wait_for_file(START_GATE, START_GATE_TIMEOUT_S)


def wait_for_file(path: str, timeout_s: float) -> bool:
    """Until `path` exists (make load creates the gates), at most timeout_s; whether it does."""
    deadline = time.time() + timeout_s
    while not Path(path).exists() and time.time() < deadline:
        gevent.sleep(0.2)
    return Path(path).exists()


def on_request(
    request_type: str,
    name: str,
    response_time: float | None,
    response_length: int,
    exception: BaseException | None = None,
    start_time: float | None = None,
    response: object = None,
    **_: object,
) -> None:
    REQUESTS.labels(name=name, method=request_type).inc()
    if exception is not None:
        FAILURES.labels(name=name, method=request_type).inc()
    RESPONSE_TIME.labels(name=name).observe((response_time or 0) / 1000)
    STATE.exported += 1
    code = str(getattr(response, "status_code", None) or 0)  # 0: no HTTP answer at all
    STATE.status_codes[code] = STATE.status_codes.get(code, 0) + 1
    if start_time is not None:
        end = start_time + (response_time or 0) / 1000
        STATE.first_start = start_time if STATE.first_start is None else min(STATE.first_start, start_time)
        STATE.last_end = end if STATE.last_end is None else max(STATE.last_end, end)


def on_report_to_master(client_id: str, data: dict[str, Any], **_: object) -> None:
    data["lab"] = STATE.snapshot()


def on_worker_report(client_id: str, data: dict[str, Any], **_: object) -> None:
    if "lab" in data:
        STATE.worker_reports[client_id] = data["lab"]


def on_want(environment: Environment, msg: Message, **_: object) -> None:
    """Master: a worker asks for tickets."""
    # No book yet (cannot happen: the master starts the test before any spawn):
    # grant nothing rather than more than the target; the worker asks again.
    n, exhausted = STATE.book.grant(msg.data["want"]) if STATE.book else (0, False)
    runner_of(environment).send_message("lab_grant", {"n": n, "exhausted": exhausted}, client_id=msg.node_id)


def on_grant(environment: Environment, msg: Message, **_: object) -> None:
    STATE.user_tickets.granted(msg.data["n"], msg.data["exhausted"])


def on_close(environment: Environment, msg: Message, **_: object) -> None:
    STATE.closed = True
    # Answer at once, and again with every stats report: the master waits until
    # no worker has a request in flight.
    runner_of(environment).send_message("lab_closed", STATE.snapshot())


def close_run(environment: Environment) -> None:
    """Duration reached: no new request anywhere, and wait until the requests in
    flight are answered and reported, so every request that reached the API is
    in the stats (stopping the users at once would drop them unrecorded, and
    the ledger would count tasks that Locust never saw accepted)."""
    runner = runner_of(environment)
    STATE.closed = True
    deadline = time.time() + TIMEOUT_S + 10
    if STATE.role == "local":
        while STATE.in_flight and time.time() < deadline:
            gevent.sleep(0.1)
        return
    workers = {c.id for c in cast(MasterRunner, runner).clients.all}  # the local process returned above
    runner.send_message("lab_close", {})
    while time.time() < deadline:
        gevent.sleep(0.2)
        reports = {cid: r for cid, r in STATE.worker_reports.items() if cid in workers}
        if len(reports) == len(workers) and all(r["closed"] and not r["in_flight"] for r in reports.values()):
            break
    gevent.sleep(locust.runners.WORKER_REPORT_INTERVAL + 0.5)  # their stats report after the last answer


@listener(events.test_start)
def on_test_start(environment: Environment, **_: object) -> None:
    if STATE.role != "worker":
        wait_for_gate()  # fired before the users are dispatched: they wait too
    STATE.cpu_start = (time.time(), read_cgroup().cpu_seconds or 0.0)
    STATE.status_codes, STATE.first_start, STATE.last_end = {}, None, None
    runner = runner_of(environment)
    if STATE.role == "worker":
        # The master's --lab-* values arrived with the spawn message.
        STATE.params = parse_params(options_of(environment))
        precreate_series(STATE.params)
    params = STATE.run_params
    # rate=: the schedule's second half, from this process's start (where make capacity reads a step).
    STATE.half_at = time.time() + params.duration_s / 2 if params.rate and params.duration_s else None
    if STATE.role == "worker":
        if params.iterations is not None:
            STATE.tickets = Tickets(lambda n: runner.send_message("lab_want", {"want": n}))
        return
    if STATE.run_params.iterations is not None:
        STATE.book = TicketBook(STATE.run_params.iterations)
        if STATE.role == "local":
            STATE.tickets = Tickets(lambda n: STATE.user_tickets.granted(*STATE.ticket_book.grant(n)))
    if STATE.controller is None:
        emit(
            "START",
            {
                "run": STATE.run_params.run,
                "scenario": STATE.run_params.scenario,
                "user_class": STATE.run_params.user_class,
                "iterations": STATE.run_params.iterations,
                "duration_s": STATE.run_params.duration_s,
                "rate": STATE.run_params.rate,
                "users": STATE.run_params.users,
                "started_at": time.time(),
            },
        )
        STATE.controller = gevent.spawn(control, environment)


def control(environment: Environment) -> None:
    """Master / local process: progress every second; end the run at its target."""
    runner, params = runner_of(environment), STATE.run_params
    started = time.time()
    while True:
        gevent.sleep(1)
        total = runner.stats.total
        emit(
            "PROGRESS",
            {
                "elapsed": round(time.time() - started, 2),
                "users": runner.user_count,
                "requests": total.num_requests,
                "failures": total.num_failures,
                "rps": round(total.current_rps, 1),
                "iterations": params.iterations,
                "rate": params.rate,
                "granted": STATE.book.granted if STATE.book else None,
            },
        )
        if params.iterations is not None and total.num_requests >= params.iterations:
            break
        if params.duration_s is not None and time.time() - started >= params.duration_s:
            close_run(environment)
            break
    emit("RESULT", result(environment, started))
    runner.stop()
    STATE.controller = None
    if in_web_ui(environment):
        return  # the UI stays up for the next run
    wait_for_end_gate()
    environment.process_exit_code = 0
    runner.quit()


def wait_for_end_gate() -> None:
    """Before the master quits (and its workers with it): until make load has
    seen Prometheus count the run's last requests (END_GATE), which it reads
    from the processes that are about to go; without the gate, LINGER_S."""
    if not END_GATE:
        gevent.sleep(LINGER_S)
        return
    emit("END", {"gate": END_GATE, "opened": wait_for_file(END_GATE, END_GATE_TIMEOUT_S)})


def result(environment: Environment, started: float) -> dict[str, object]:
    runner, params = runner_of(environment), STATE.run_params
    total = runner.stats.total
    processes = [STATE.snapshot()] + ([] if STATE.role == "local" else list(STATE.worker_reports.values()))
    senders = [p for p in processes if p["role"] != "master"]
    codes: dict[str, int] = {}
    for p in senders:
        for code, n in p["status_codes"].items():
            codes[code] = codes.get(code, 0) + n
    starts = [p["first_start"] for p in senders if p["first_start"] is not None]
    ends = [p["last_end"] for p in senders if p["last_end"] is not None]
    pct = total.get_response_time_percentile
    errors = sorted(runner.stats.errors.values(), key=lambda e: -e.occurrences)[:5]
    return {
        "run": params.run,
        "scenario": params.scenario,
        "iterations": params.iterations,
        "duration_target_s": params.duration_s,
        "rate": params.rate,
        "scheduled_sends": sum(p["scheduled_sends"] for p in senders),
        "late_sends": sum(p["late_sends"] for p in senders),
        "steady_sends": sum(p.get("steady_sends", 0) for p in senders),
        "steady_late_sends": sum(p.get("steady_late_sends", 0) for p in senders),
        "users": params.users,
        "spawn_rate": params.spawn_rate,
        "granted": STATE.book.granted if STATE.book else None,
        "requests": total.num_requests,
        "failures": total.num_failures,
        "status_codes": codes,
        "exported_requests": sum(p["exported_requests"] for p in processes),
        "median_ms": pct(0.5) if total.num_requests else None,
        "p95_ms": pct(0.95) if total.num_requests else None,
        "p99_ms": pct(0.99) if total.num_requests else None,
        "avg_ms": round(total.avg_response_time, 2) if total.num_requests else None,
        "max_ms": round(total.max_response_time, 2) if total.num_requests else None,
        "test_started_at": started,
        "first_request_at": min(starts) if starts else None,
        "last_response_at": max(ends) if ends else None,
        "errors": [
            {"name": e.name, "method": e.method, "error": str(e.error)[:ERROR_TEXT_CHARS], "count": e.occurrences}
            for e in errors
        ],
        "locust_cpu_warning": bool(
            getattr(runner, "worker_cpu_warning_emitted", False) or getattr(runner, "cpu_warning_emitted", False)
        ),
        "processes": [
            {k: p[k] for k in ("role", "cpu_seconds", "interval_s", "cpu_limit_cores", "exported_requests")}
            for p in processes
        ],
    }


class LabUser(FastHttpUser):
    """Closed loop by default: each user sends its next request as soon as one is
    answered. With rate= (the open model, as wrk2 runs it) each user sends on a
    schedule of its own, users/rate seconds apart from a random start, whatever
    the answers; a send its user could not make on time (its last answer came
    late, or the process was busy) is made at once and its latency counts from
    the scheduled time, so a slow moment of the server is charged to every
    request it delayed."""

    abstract = True
    wait_time = constant(0)
    network_timeout = TIMEOUT_S
    connection_timeout = TIMEOUT_S
    _due: float | None = None  # rate=: when this user's next request is due

    def _on_schedule(self, rate: float, users: int) -> float:
        """Wait for this user's next send; how late it is (ms) once it may go."""
        interval = users / rate
        if self._due is None:  # the users' schedules are spread over one interval
            self._due = time.time() + random.uniform(0, interval)
        due, self._due = self._due, self._due + interval
        ahead = due - time.time()
        if ahead > 0:
            gevent.sleep(ahead)
        late = max(0.0, time.time() - due)
        if not STATE.closed:
            STATE.scheduled_sends += 1
            STATE.late_sends += int(late > LATE_S)
            if STATE.half_at is not None and time.time() >= STATE.half_at:  # sent in it, late or not
                STATE.steady_sends += 1
                STATE.steady_late_sends += int(late > LATE_S)
        return late * 1000

    @task
    def send(self) -> None:
        params = STATE.run_params
        late_ms = self._on_schedule(params.rate, params.users) if params.rate else 0.0
        if STATE.closed or (
            STATE.tickets is not None and not STATE.tickets.take(runner_of(self.environment).user_count)
        ):
            gevent.sleep(1)  # the run's requests are all sent: wait for the master to end it
            return
        call = random.choice(params.calls)
        STATE.in_flight += 1
        try:
            with self.client.request(
                call.method,
                call.path,
                name=call.name,
                json=call.body,
                headers={"X-Lab-Run": params.run},
                catch_response=True,
            ) as resp:
                resp.request_meta["response_time"] += late_ms  # rate=: from the scheduled time
                if resp.status_code == 0:
                    return  # no HTTP answer: Locust reports the connection error itself
                if resp.status_code != call.expect_status:
                    resp.failure(failure_text(resp.status_code, resp.text))
                elif call.expect_length is not None and len(resp.content or b"") != call.expect_length:
                    resp.failure(f"body of {len(resp.content or b'')} bytes, not {call.expect_length}")
                else:
                    resp.success()
        finally:
            STATE.in_flight -= 1


def failure_text(status: int, text: str) -> str:
    """A failed answer as Locust's failures table and the record name it: its
    code and what the API said, so a run's refusals are read from its record
    (a 503's reason and the broker's error; services/api/errors.py)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None  # not the API's JSON: the code alone
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return f"HTTP {status}"
    reason = f" ({body['reason']})" if isinstance(body.get("reason"), str) else ""
    detail = f": {body['detail']}" if isinstance(body.get("detail"), str) else ""
    return f"HTTP {status} {body['error']}{reason}{detail}"[:ERROR_TEXT_CHARS]


class QueueUser(LabUser):
    abstract = SCENARIO != "queue"


class UpstreamUser(LabUser):
    abstract = SCENARIO != "upstream"


class ClientsUser(LabUser):
    abstract = SCENARIO != "clients"


class PayloadUser(LabUser):
    abstract = SCENARIO != "payload"
