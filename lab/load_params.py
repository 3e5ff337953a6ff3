"""The parameters of a load run and the requests they stand for.

Shared by the locustfile (inside the Locust containers) and the load driver on
the host (labctl/load_run), so a bad parameter is rejected on the host before any
container starts, with the same rules the containers apply. Pure Python: no
Locust import, because importing Locust monkey-patches the whole process with
gevent, and the host tools and tests must not be.

Scenarios:
  queue     POST /api/v1/incr/{kind}/{variant}/{queue}  (worker=, endpoint=; `all` or a
            comma list mixes them: every request picks one at random, as the
            original experiment's shuffle did)
  upstream  POST /api/v1/upstream/{variant}
  clients   GET  /api/v1/clients?count=&mode=
  payload   GET  /api/v1/payload?size=
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypedDict

from lab.protocol import ENDPOINTS, RUN_PATTERN, Queue

SCENARIOS = ("queue", "upstream", "clients", "payload")
QUEUES = tuple(q.value for q in Queue)
ENDPOINT_NAMES = tuple(f"{k.value}/{v.value}" for k, v in ENDPOINTS)
UPSTREAM_VARIANTS = ("async-blocking", "async-threadpool", "sync-def", "async-native")
CLIENT_MODES = ("model", "prejson")
# The API's own bounds (services/api/experiments.py: MAX_CLIENTS, MAX_PAYLOAD).
MAX_CLIENTS = 50_000
MAX_PAYLOAD = 10 * 1024 * 1024
# One Locust user class per scenario (locust/locustfile.py).
USER_CLASSES = {"queue": "QueueUser", "upstream": "UpstreamUser", "clients": "ClientsUser", "payload": "PayloadUser"}
# A queue run sends for a time by default, the same for every queue, so that
# every run lasts long enough to watch at any limits and on any machine: the
# dashboards' 10 s rates fill within the first seconds and read the run's rate
# from then on, where a request count sized for one setting lasts a few
# seconds at another. Queues then compare at the same offered load (100
# users, each sending its next request once the last is answered) over the
# same time: their RPS, latencies and the drain after the load (`drain s`),
# not their "all tasks done" time, which grows with the tasks each API took.
# `iterations=` still sends an exact count (make compare does). The event-loop
# runs repeat the original's "100 requests" (ab -n 100 -c 50).
DEFAULT_DURATION_S = {"queue": 60.0}
DEFAULT_ITERATIONS = {"upstream": 100, "clients": 100, "payload": 100}
DEFAULT_USERS = 100
DEFAULT_SPAWN_RATE = 100.0
DEFAULT_CLIENTS = 1000  # the API's default; the article's 40000 needs API_MEM=1G or so
DEFAULT_PAYLOAD = 1024  # the API's default
# rate= (the open model): requests a second on a fixed schedule, whatever the
# answers, each user sending on its own schedule. Without users=, as many users
# as send one every RATE_USER_INTERVAL_S each: an answer has that long before it
# delays its user's next send; a send that is late anyway counts its lateness in
# its latency (measured from the scheduled time, as wrk2 does). No more users
# than that: a user sending less often leaves its connection idle past uvicorn's
# keep-alive timeout, and a send that races the API closing it fails.
RATE_USER_INTERVAL_S = 2.0
MAX_RATE_USERS = 5000
# What one Locust process (one core, FastHttpUser) is asked to send at most: a
# bound well under what FastHttpUser sends against a fast server, so a run
# whose schedule slips says more about the lab than about its generator. The
# driver refuses a rate above it times the Locust worker processes.
MAX_RATE_PER_PROCESS = 1000.0
# Which parameters each scenario takes (besides users, spawn, iterations/duration, run).
SCENARIO_KEYS = {
    "queue": {"worker", "endpoint"},
    "upstream": {"variant"},
    "clients": {"mode", "count"},
    "payload": {"size"},
}
OPTIONAL_KEYS = {"worker", "endpoint", "variant", "mode", "count", "size"}
# Parameter -> the environment variable the Locust containers read it from
# (docker-compose.yml, x-locust-env; the locustfile's --lab-* options). Users and
# spawn rate are Locust's own --users / --spawn-rate (LOAD_USERS, LOAD_SPAWN_RATE in compose).
ENV_NAMES = {
    "scenario": "LOAD_SCENARIO",
    "run": "LOAD_RUN",
    "worker": "LOAD_WORKER",
    "endpoint": "LOAD_ENDPOINT",
    "iterations": "LOAD_ITERATIONS",
    "duration": "LOAD_DURATION",
    "variant": "LOAD_VARIANT",
    "mode": "LOAD_MODE",
    "count": "LOAD_COUNT",
    "size": "LOAD_SIZE",
    "rate": "LOAD_RATE",
}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")


# A parameter as given: text, or a number labctl's options parsed already.
Given = str | int | float


class ParamError(ValueError):
    """A load parameter that cannot be used; the message names it."""


@dataclass(frozen=True)
class Call:
    """One kind of request a user sends."""

    method: str
    path: str  # with its query string
    name: str  # the label in Locust's stats and in locust_requests_total{name}
    body: dict[str, object] | None = None  # sent as JSON
    expect_status: int = 200
    expect_length: int | None = None  # checked for /payload: the whole body arrived


@dataclass(frozen=True)
class LoadParams:
    scenario: str
    run: str
    users: int = DEFAULT_USERS
    spawn_rate: float = DEFAULT_SPAWN_RATE
    iterations: int | None = None  # exactly this many requests, then the run ends
    duration_s: float | None = None  # or: send for this long
    rate: float | None = None  # the open model: requests a second on a schedule (with duration_s)
    workers: tuple[str, ...] = ()  # queue scenario
    endpoints: tuple[str, ...] = ()  # queue scenario
    variant: str | None = None  # upstream
    mode: str | None = None  # clients
    count: int | None = None  # clients
    size: int | None = None  # payload
    calls: tuple[Call, ...] = field(default=(), compare=False)

    @property
    def user_class(self) -> str:
        return USER_CLASSES[self.scenario]

    @property
    def worker_label(self) -> str | None:
        """`arq`, `all` (every queue) or `arq,saq`; None outside the queue scenario."""
        if not self.workers:
            return None
        return "all" if self.workers == QUEUES else ",".join(self.workers)

    @property
    def endpoint_label(self) -> str:
        """The kind/variant for queue runs (`all` or a list when mixed); for the
        event-loop scenarios, the route and its parameter (`upstream/async-native`)."""
        if self.scenario == "queue":
            return "all" if self.endpoints == ENDPOINT_NAMES else ",".join(self.endpoints)
        detail = {"upstream": self.variant, "clients": f"{self.mode}-{self.count}", "payload": str(self.size)}
        return f"{self.scenario}/{detail[self.scenario]}"


def parse_duration(given: str | float) -> float:
    """`90`, `90s`, `2m`, `1h30m`, `1.5m` (or a number of seconds) -> seconds (> 0)."""
    text = str(given).strip().lower()
    if not isinstance(given, str):
        seconds = float(given)
    elif re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ParamError(f"duration={text!r}: use seconds or a form like 90s, 2m, 1h30m")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if not seconds > 0:
        raise ParamError(f"duration={text!r}: must be more than 0 s")
    return seconds


def _choices(key: str, value: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """`all`, one name, or a comma list of names, in the canonical order."""
    value = value.strip()
    if value == "all":
        return allowed
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in allowed]
    if not names or unknown:
        raise ParamError(f"{key}={value!r}: choose from {', '.join(allowed)}, all, or a comma list")
    return tuple(n for n in allowed if n in names)


def _int(key: str, value: Given, low: int, high: int | None = None) -> int:
    try:
        number = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise ParamError(f"{key}={value!r}: not a whole number") from None
    if number < low or (high is not None and number > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ParamError(f"{key}={number}: must be {bound}")
    return number


def _given(raw: Mapping[str, object], key: str) -> Given | None:
    """A parameter as given: a number as it is, text stripped; None (or empty text) when not given."""
    value = raw.get(key)
    if value is None or isinstance(value, int | float):
        return value
    return str(value).strip() or None


def _text(raw: Mapping[str, object], key: str) -> str | None:
    """A name (scenario, worker, ...) as given; None when not given."""
    value = _given(raw, key)
    return None if value is None else str(value)


def _above_0(key: str, value: Given, unit: str) -> float:
    """A finite number above 0, in `unit`: text is parsed, a number taken as it is."""
    try:
        number = float(value)
    except ValueError:
        raise ParamError(f"{key}={value!r}: not a number ({unit})") from None
    if not (number > 0 and math.isfinite(number)):
        raise ParamError(f"{key}={value!r}: must be more than 0 {unit}")
    return number


def default_run_name(scenario: str, label: str, users: int, now: float | None = None) -> str:
    """A run name that says what ran and when: `arq-io-simple-100u-20261121T143012`."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    head = re.sub(r"[^A-Za-z0-9._-]+", "-", label.replace("/", "-").replace(",", ".")).strip("-.") or scenario
    tail = f"-{users}u-{stamp}"
    return head[: 64 - len(tail)] + tail


def calls_for(params: LoadParams) -> tuple[Call, ...]:
    """The requests of a run; a queue run with several workers or endpoints picks
    one of these at random for every request."""
    if params.scenario == "queue":
        return tuple(
            Call(
                "POST",
                f"/api/v1/incr/{endpoint}/{queue}",
                f"/api/v1/incr/{endpoint}/{queue}",
                body={"value": 1},
                expect_status=202,
            )
            for queue in params.workers
            for endpoint in params.endpoints
        )
    if params.scenario == "upstream":
        path = f"/api/v1/upstream/{params.variant}"
        return (Call("POST", path, path),)
    if params.scenario == "clients":
        path = f"/api/v1/clients?count={params.count}&mode={params.mode}"
        return (Call("GET", path, path),)
    path = f"/api/v1/payload?size={params.size}"
    return (Call("GET", path, path, expect_length=params.size),)


def _scenario_of(raw: Mapping[str, object]) -> str:
    """The scenario, once no key of another scenario was given with it."""
    scenario = _text(raw, "scenario") or "queue"
    if scenario not in SCENARIOS:
        raise ParamError(f"scenario={scenario!r}: choose from {', '.join(SCENARIOS)}")
    stray = sorted(k for k in OPTIONAL_KEYS - SCENARIO_KEYS[scenario] if _given(raw, k) is not None)
    if stray:
        raise ParamError(
            f"{', '.join(stray)}= do(es) not apply to scenario={scenario} "
            f"(it takes {', '.join(sorted(SCENARIO_KEYS[scenario]))})"
        )
    return scenario


def _spawn_rate(raw: Mapping[str, object]) -> float:
    spawn = _given(raw, "spawn_rate")
    return DEFAULT_SPAWN_RATE if spawn is None else _above_0("spawn", spawn, "users/s")


def _rate(raw: Mapping[str, object], scenario: str) -> float | None:
    """rate=: requests a second (> 0), sent for a duration (never with iterations=)."""
    given = _given(raw, "rate")
    if given is None:
        return None
    rate = _above_0("rate", given, "requests per second")
    if _given(raw, "iterations") is not None:
        raise ParamError("rate= sends on a schedule for a duration=: give duration=, not iterations=")
    if _given(raw, "duration") is None and scenario not in DEFAULT_DURATION_S:
        raise ParamError(f"rate= needs duration= for scenario={scenario} (it has no default length)")
    return rate


def users_for_rate(rate: float) -> int:
    """The users of a rate= run without users=: each sends every RATE_USER_INTERVAL_S (one user at least)."""
    return min(MAX_RATE_USERS, max(1, math.ceil(rate * RATE_USER_INTERVAL_S)))


def _length(raw: Mapping[str, object], scenario: str) -> tuple[int | None, float | None]:
    """(iterations, duration_s): one of them, the scenario's default when neither is given."""
    given_iterations, given_duration = _given(raw, "iterations"), _given(raw, "duration")
    if given_iterations is not None and given_duration is not None:
        raise ParamError("give iterations= or duration=, not both")
    iterations = None if given_iterations is None else _int("iterations", given_iterations, 1)
    duration_s = None if given_duration is None else parse_duration(given_duration)
    if iterations is None and duration_s is None:
        if scenario in DEFAULT_DURATION_S:
            duration_s = DEFAULT_DURATION_S[scenario]
        else:
            iterations = DEFAULT_ITERATIONS[scenario]
    return iterations, duration_s


class _ScenarioFields(TypedDict, total=False):
    """The fields of LoadParams that belong to one scenario."""

    workers: tuple[str, ...]
    endpoints: tuple[str, ...]
    variant: str
    mode: str
    count: int
    size: int


def _scenario_fields(raw: Mapping[str, object], scenario: str) -> _ScenarioFields:
    """The scenario's own fields of LoadParams."""
    fields: _ScenarioFields = {}
    if scenario == "queue":
        worker = _text(raw, "worker")
        if worker is None:
            raise ParamError(f"worker= is required: {', '.join(QUEUES)}, all, or a comma list")
        fields["workers"] = _choices("worker", worker, QUEUES)
        fields["endpoints"] = _choices("endpoint", _text(raw, "endpoint") or "io/simple", ENDPOINT_NAMES)
    elif scenario == "upstream":
        variant = _text(raw, "variant")
        if variant not in UPSTREAM_VARIANTS:
            raise ParamError(f"variant={variant or ''!r}: choose one of {', '.join(UPSTREAM_VARIANTS)}")
        fields["variant"] = variant
    elif scenario == "clients":
        mode = _text(raw, "mode") or "model"
        if mode not in CLIENT_MODES:
            raise ParamError(f"mode={mode!r}: choose one of {', '.join(CLIENT_MODES)}")
        fields["mode"] = mode
        count = _given(raw, "count")
        fields["count"] = _int("count", DEFAULT_CLIENTS if count is None else count, 1, MAX_CLIENTS)
    else:
        size = _given(raw, "size")
        fields["size"] = _int("size", DEFAULT_PAYLOAD if size is None else size, 0, MAX_PAYLOAD)
    return fields


def _run_name(raw: Mapping[str, object], params: LoadParams, now: float | None) -> str:
    """The given run name, checked, or one made of the scenario, what it loads and the users."""
    label = f"{params.worker_label}-{params.endpoint_label}" if params.scenario == "queue" else params.endpoint_label
    run = _text(raw, "run") or default_run_name(params.scenario, label, params.users, now)
    if not re.fullmatch(RUN_PATTERN, run):
        raise ParamError(
            f"run={run!r}: 1-64 characters among letters, digits, '.', '_' and '-', starting with a letter or digit"
        )
    return run


def parse_params(raw: Mapping[str, object], now: float | None = None) -> LoadParams:
    """Check a run's parameters and fill in the defaults. Each is text (as the
    environment gives it to the locustfile; empty = not given) or already a number
    (as labctl's options hold it; None = not given).

    Keys: scenario, run, users, spawn_rate, iterations, duration, rate, and per scenario
    worker + endpoint (queue), variant (upstream), mode + count (clients), size (payload).
    """
    scenario = _scenario_of(raw)
    rate = _rate(raw, scenario)
    default_users = users_for_rate(rate) if rate else DEFAULT_USERS
    given_users = _given(raw, "users")
    users = _int("users", default_users if given_users is None else given_users, 1)
    spawn_rate = _spawn_rate(raw)
    iterations, duration_s = _length(raw, scenario)
    params = LoadParams(
        scenario=scenario,
        run="-",
        users=users,
        spawn_rate=spawn_rate,
        iterations=iterations,
        duration_s=duration_s,
        rate=rate,
        **_scenario_fields(raw, scenario),
    )
    params = replace(params, run=_run_name(raw, params, now))
    return replace(params, calls=calls_for(params))


# -- Exactly `iterations` requests across every Locust process --------------------
class TicketBook:
    """The master's count of the requests it allowed: one ticket per request.

    Workers ask for tickets and send one request per ticket, so the whole run
    sends exactly `total` requests however the users are spread over workers,
    and a worker with more users (or faster answers) simply asks more often.
    """

    def __init__(self, total: int):
        if total < 1:
            raise ValueError("a ticket book needs at least one ticket")
        self.total = total
        self.granted = 0

    @property
    def remaining(self) -> int:
        return self.total - self.granted

    @property
    def exhausted(self) -> bool:
        return self.granted >= self.total

    def grant(self, want: int) -> tuple[int, bool]:
        """Give up to `want` tickets; returns (given, exhausted-after-this)."""
        given = max(0, min(int(want), self.remaining))
        self.granted += given
        return given, self.exhausted


def tickets_to_ask(users: int, available: int) -> int:
    """How many tickets a worker asks for: none while it holds at least half a
    round (one ticket per user); else enough to give each of its users one.

    Asking for one round at most keeps the tickets spread over the workers in
    proportion to their users, also at the end of a run: a worker never hoards
    tickets its users cannot send while another worker's users wait.
    """
    round_ = max(1, users)
    if available * 2 >= round_ and available > 0:
        return 0
    return max(1, round_ - available)
