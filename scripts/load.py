"""`make load`: drive the running lab with Locust, show the run live, and leave
a record of it in results/<run>.json.

    uv run python -m scripts.load --worker arq [--endpoint io/simple] [--users 100] [--spawn 100]
                                  [--iterations 5000 | --duration 60s] [--run NAME] [--locust-workers 2]
    uv run python -m scripts.load --scenario upstream --variant async-blocking --users 50 --iterations 100
    uv run python -m scripts.load --scenario clients --mode model --count 40000
    uv run python -m scripts.load --scenario payload --size 220000

What it does, in order:
1. checks the parameters (locust/load_params.py, the rules the locustfile applies
   too), that the lab runs (the API's published port answers /readyz) and that
   the run name has no ledger yet;
2. reads the limits the engine applied to the API and the workers (docker inspect);
3. for the event-loop scenarios starts the liveness probe (compose service
   `probe`); for queue runs makes sure it is not running (it would take the API's CPU);
4. starts the compose profile `load`: one Locust master and LOCUST_WORKERS
   workers, headless (docker compose up --no-deps: it never touches the lab's
   own containers, whatever limits they were started with);
5. follows the master's log (LAB-PROGRESS lines: no port is published) and polls
   the run's ledger through the API, printing progress toward the target;
6. after the last response, waits until the ledger has nothing pending (or
   --drain-timeout), then asks Prometheus for the subjects' peak memory, CPU and
   throttling over the run, and the probe for its success rate;
7. writes a Grafana annotation at the start and the end when Grafana runs in
   this compose project, writes results/<run>.json and prints its table row;
8. removes the Locust containers (and the probe), also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

from scripts import lab_results as R

ROOT = Path(__file__).resolve().parents[1]
LOAD_SERVICES = ("locust-master", "locust-worker")
START_TIMEOUT_S = 240  # the master waits up to 120 s for its workers (--expect-workers-max-wait)
STALL_TIMEOUT_S = 180  # no new response for this long: the run is stuck


def setting(name: str, default: str) -> str:
    """A knob from the environment, else the project's .env (as compose reads it), else the default."""
    return os.environ.get(name) or dotenv().get(name) or default


PROBE_MIN_WINDOW_S = 2.0
GATE_FILE = "/tmp/lab-go"  # LOAD_START_GATE inside the master's container


def _load_params_module():
    """locust/load_params.py, shared with the locustfile. Loaded by path: the
    directory is called `locust`, and importing it as a package would shadow Locust."""
    spec = importlib.util.spec_from_file_location("lab_load_params", ROOT / "locust" / "load_params.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


P = _load_params_module()


class LoadError(RuntimeError):
    """The run could not be made; the message says why and what to do."""


# -- The compose project ------------------------------------------------------------
class Compose:
    """`docker compose --profile load ...` (or another profile) in the project root, with COMPOSE as the command."""

    def __init__(self, env: dict[str, str] | None = None, profile: str = "load"):
        self.env = dict(os.environ if env is None else env)
        self.cmd = shlex.split(self.env.get("COMPOSE") or "docker compose")
        self.profile = profile

    def __call__(
        self, *args: str, extra_env: dict[str, str] | None = None, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        cmd = [*self.cmd, "--profile", self.profile, *args]
        try:
            proc = subprocess.run(
                cmd,
                cwd=ROOT,
                env={**self.env, **(extra_env or {})},
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LoadError(f"`{' '.join(cmd)}` did not finish within {timeout:.0f} s") from None
        if check and proc.returncode != 0:
            raise LoadError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{(proc.stderr or proc.stdout)[-3000:]}")
        return proc

    def port(self, service: str, port: int) -> str | None:
        """host:port published for a running service, or None."""
        proc = self("port", service, str(port), check=False, timeout=60)
        addr = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else ""
        return addr if addr and not addr.endswith(":0") else None

    def ids(self, service: str, include_stopped: bool = False) -> list[str]:
        proc = self("ps", "-q", *(["--all"] if include_stopped else []), service, check=False, timeout=60)
        return proc.stdout.split() if proc.returncode == 0 else []

    def inspect(self, service: str) -> list[dict]:
        ids = self.ids(service)
        if not ids:
            return []
        proc = subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise LoadError(f"docker inspect {service}: {proc.stderr.strip()}")
        return json.loads(proc.stdout)

    def remove(self, *services: str) -> None:
        self("rm", "--stop", "--force", *services, check=False, timeout=120)


def dotenv() -> dict[str, str]:
    """KEY=VALUE lines of the env files compose reads: COMPOSE_ENV_FILES when set
    (the compose tests point it at an empty file), else the project's .env."""
    files = [Path(f) for f in os.environ.get("COMPOSE_ENV_FILES", "").split(",") if f] or [ROOT / ".env"]
    values = {}
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                values[key.strip()] = value.split(" #")[0].strip().strip("'\"")
    return values


# -- Talking to the lab ---------------------------------------------------------------
def ledger(api: str, run: str) -> dict | None:
    try:
        r = httpx.get(f"http://{api}/api/v1/runs/{run}", timeout=5)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


class Prometheus:
    def __init__(self, addr: str):
        self.url = f"http://{addr}"

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at else {})}
        r = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=15)
        body = r.json()
        if body.get("status") != "success":
            raise LoadError(f"Prometheus rejected {expr!r}: {body.get('error')}")
        return body["data"]["result"]

    def by(self, label: str, expr: str, at: float | None = None) -> dict[str, float]:
        out = {}
        for row in self.query(expr, at):
            value = float(row["value"][1])
            if not math.isnan(value):
                out[row["metric"].get(label, "")] = value
        return out

    def ensure_load_jobs(self, compose: Compose, say) -> None:
        """A Prometheus started before prometheus.yml had the load jobs reads it
        again on SIGHUP (it reads its config only at start)."""
        try:
            config = httpx.get(f"{self.url}/api/v1/status/config", timeout=10).json()["data"]["yaml"]
        except (httpx.HTTPError, KeyError, ValueError):
            return
        if "job_name: locust-master" not in config:
            compose("kill", "-s", "SIGHUP", "prometheus", check=False, timeout=60)
            say("Prometheus ran an older prometheus.yml without the load jobs: reloaded it (SIGHUP)")

    def scraped_locust(self, workers: int, since: float) -> bool:
        """The Locust master and `workers` workers were each scraped after `since`."""
        try:
            targets = httpx.get(f"{self.url}/api/v1/targets", params={"state": "active"}, timeout=10).json()["data"][
                "activeTargets"
            ]
        except (httpx.HTTPError, KeyError, ValueError):
            return False
        fresh = [
            t["labels"].get("job")
            for t in targets
            if t.get("health") == "up" and rfc3339(t.get("lastScrape", "")) > since
        ]
        return fresh.count("locust-master") >= 1 and fresh.count("locust-worker") >= workers

    def wait_for_scrape(self, services: list[str], after: float, timeout: float = 15) -> bool:
        """True once every service has a sample newer than `after`: the window's
        last scrape is in (the scrape interval is 5 s)."""
        deadline = time.monotonic() + timeout
        sel = "|".join(services)
        while time.monotonic() < deadline:
            seen = self.by("service", f'max by (service) (timestamp(lab_memory_bytes{{service=~"{sel}"}}))')
            if all(seen.get(s, 0) >= after for s in services):
                return True
            time.sleep(1)
        return False

    def resources(self, services: list[str], start: float, end: float) -> dict[str, dict]:
        """Per service over [start, end]: peak memory (max_over_time), CPU used
        (cores, mean over replicas), its limit, and throttled seconds per second (%)."""
        at = min(end + 5, time.time())  # the scrape after the end is part of the run
        window = f"{max(10, math.ceil(at - start))}s"
        sel = f'service=~"{"|".join(services)}"'
        peak = self.by("service", f"max by (service) (max_over_time(lab_memory_bytes{{{sel}}}[{window}]))", at)
        used = self.by("service", f"avg by (service) (rate(lab_cpu_seconds_total{{{sel}}}[{window}]))", at)
        limit = self.by("service", f"max by (service) (max_over_time(lab_cpu_limit_cores{{{sel}}}[{window}]))", at)
        throttled = self.by(
            "service", f"avg by (service) (rate(lab_cpu_throttled_seconds_total{{{sel}}}[{window}])) * 100", at
        )
        out = {}
        for s in services:
            out[s] = {
                "peak_memory_bytes": int(peak[s]) if s in peak else None,
                "cpu_used_cores": round(used[s], 3) if s in used else None,
                "cpu_limit_cores": limit.get(s),
                "cpu_used_pct_of_limit": round(100 * used[s] / limit[s], 1) if s in used and limit.get(s) else None,
                "cpu_throttled_pct": round(throttled[s], 1) if s in throttled else None,
            }
        return out


def rfc3339(stamp: str) -> float:
    """An RFC 3339 time with nanoseconds (Prometheus's lastScrape, the engine's StartedAt) as a unix time; 0 if unreadable."""
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", stamp or "")
    if not match:
        return 0.0
    whole, frac, zone = match.groups()
    when = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return when + (float(frac) if frac else 0.0)


def open_gate(compose: Compose, prom: Prometheus | None, workers: int, since: float, say) -> None:
    """Let the master start its users: once Prometheus has scraped every Locust
    process (their series are at 0, so rate() sees the whole run), or after 30 s."""
    if prom is not None:
        deadline = time.monotonic() + 30
        while not prom.scraped_locust(workers, since):
            if time.monotonic() > deadline:
                say("Prometheus has not scraped every Locust process after 30 s: starting anyway")
                break
            time.sleep(1)
    compose("exec", "-T", "locust-master", "touch", GATE_FILE, check=False, timeout=60)


class Grafana:
    """Run annotations and run links (grafana/README.md), when Grafana runs in this compose project.

    A run is one region annotation: written at its start (so it shows while the
    run goes on), given its end (`timeEnd`) once the run is over."""

    def __init__(self, compose: Compose):
        self.addr = compose.port("grafana", 3000)
        self.password = compose.env.get("GRAFANA_ADMIN_PASSWORD") or dotenv().get("GRAFANA_ADMIN_PASSWORD")
        self.problem = None
        self._started: dict[str, int] = {}  # run -> id of its annotation
        self.port = compose.env.get("GRAFANA_PORT") or dotenv().get("GRAFANA_PORT") or "3000"
        if not self.addr:
            self.problem = "Grafana is not running in this compose project: no run annotations"
        elif not self.password:
            self.problem = "GRAFANA_ADMIN_PASSWORD is not set (environment or .env): no run annotations"
        else:
            try:
                httpx.get(f"http://{self.addr}/api/health", timeout=3).raise_for_status()
            except httpx.HTTPError as exc:
                self.problem = f"Grafana at {self.addr} does not answer ({exc}): no run annotations"

    def _call(self, method: str, path: str, body: dict) -> tuple[dict | None, str | None]:
        try:
            r = httpx.request(method, f"http://{self.addr}{path}", json=body, auth=("admin", self.password), timeout=5)
        except httpx.HTTPError as exc:
            return None, f"Grafana annotation not written: {exc}"
        if r.status_code != 200:
            return None, f"Grafana annotation not written: HTTP {r.status_code} {r.text[:200]}"
        return r.json(), None

    def annotate(self, body: dict) -> str | None:
        """Write a run's annotation: the start opens it, the end ("timeEnd" in the
        body) closes it into a region. None when written (or Grafana is absent:
        said once, at the start), else why not."""
        if self.problem:
            return None
        run = body["tags"][1]
        if "timeEnd" not in body:
            reply, problem = self._call("POST", "/api/annotations", body)
            if reply and "id" in reply:
                self._started[run] = reply["id"]
            return problem
        if run in self._started:
            _, problem = self._call("PATCH", f"/api/annotations/{self._started.pop(run)}", body)
            if problem is None:
                return None
        return self._call("POST", "/api/annotations", body)[1]  # no start written: the whole region now

    def run_link(self, dashboard: str, start: float, end: float, queue: str | None = None) -> str:
        """The dashboard over the run's window (a little before and after), for one queue if given.
        Without a running Grafana, at the port it would be published on: Prometheus keeps the data."""
        addr = self.addr or f"127.0.0.1:{self.port}"
        link = R.grafana_link(addr, dashboard, start, end, queue)
        return link if self.addr else f"{link}  (Grafana is not running now; the data stays in Prometheus)"


# Locust's own report, as the master writes it when it quits (docker-compose.yml:
# --html, --csv), and the name each gets next to the run's record.
LOCUST_REPORT = {
    "/tmp/locust-report.html": "{run}.html",
    "/tmp/locust_stats.csv": "{run}_stats.csv",
    "/tmp/locust_stats_history.csv": "{run}_stats_history.csv",
    "/tmp/locust_failures.csv": "{run}_failures.csv",
    "/tmp/locust_exceptions.csv": "{run}_exceptions.csv",
}


def copy_locust_report(container_id: str, out_dir: Path, run: str) -> list[str]:
    """Copy Locust's HTML report and CSVs out of the (exited) master container."""
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for src, name in LOCUST_REPORT.items():
        dest = out_dir / name.format(run=run)
        proc = subprocess.run(
            ["docker", "cp", f"{container_id}:{src}", str(dest)], capture_output=True, text=True, timeout=60
        )
        if proc.returncode == 0:
            saved.append(dest.name)
    return saved


def probe_report(compose: Compose, since: float, until: float) -> dict | None:
    """GET /report of the probe service, from inside its container (no published port)."""
    code = (
        "import urllib.request as u;"
        f"print(u.urlopen('http://127.0.0.1:9000/report?since={since:.3f}&until={until:.3f}',"
        "timeout=10).read().decode())"
    )
    proc = compose("exec", "-T", "probe", "python", "-c", code, check=False, timeout=60)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


def start_probe(compose: Compose, say) -> None:
    compose("up", "--detach", "--no-deps", "probe", timeout=300)
    deadline = time.monotonic() + 60
    ready = ("bash", "/app/services/healthcheck.sh", "9000", "/healthz")  # the service's own healthcheck
    while compose("exec", "-T", "probe", *ready, check=False, timeout=60).returncode != 0:
        if time.monotonic() > deadline:
            raise LoadError("the probe did not answer within 60 s: docker compose --profile load logs probe")
        time.sleep(1)
    time.sleep(1)  # a second of probes before the load: the report's window starts with data
    say(
        f"liveness probe running (GET {compose.env.get('PROBE_TARGET') or 'http://api:8000/healthz'}, "
        f"{compose.env.get('PROBE_RATE') or 20}/s)"
    )


# -- Following the master ---------------------------------------------------------------
class MasterLog:
    """The master's log, line by line, from `docker logs --follow` (which ends when
    the container stops); LAB-* lines are parsed."""

    def __init__(self, container: str):
        self.lines: queue.Queue = queue.Queue()
        self.tail: list[str] = []
        self.ended = False
        self.proc = subprocess.Popen(
            ["docker", "logs", "--follow", container], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def events(self, wait: float) -> list[tuple[str, dict]]:
        out, deadline = [], time.monotonic() + wait
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return out
            if line is None:
                self.ended = True
                return out
            self.tail = (self.tail + [line])[-40:]
            if line.startswith("LAB-"):
                kind, _, payload = line.partition(" ")
                try:
                    out.append((kind[4:], json.loads(payload)))
                except json.JSONDecodeError:
                    pass

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()


class Display:
    """One live line on a terminal; a line every 5 s otherwise (logs, tests)."""

    def __init__(self, stream=sys.stdout):
        self.stream = stream
        self.tty = stream.isatty()
        self.last = 0.0
        self.open = False

    def show(self, line: str, force: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
            self.open = True
        elif force or time.monotonic() - self.last >= 5:
            print(line, file=self.stream, flush=True)
            self.last = time.monotonic()

    def say(self, message: str) -> None:
        if self.open:
            self.stream.write("\r\033[K")
            self.open = False
        print(message, file=self.stream, flush=True)

    def end_line(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False


def bar(fraction: float, width: int = 24) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class Rate:
    """Requests per second over the last few progress lines (Locust's own
    current_rps lags by several seconds)."""

    def __init__(self, span_s: float = 3.0):
        self.span_s = span_s
        self.points: list[tuple[float, int]] = []

    def add(self, elapsed: float, requests: int) -> None:
        self.points.append((elapsed, requests))
        while len(self.points) > 2 and self.points[-1][0] - self.points[1][0] >= self.span_s:
            self.points.pop(0)

    @property
    def rps(self) -> float:
        if len(self.points) < 2 or self.points[-1][0] <= self.points[0][0]:
            return 0.0
        (t0, n0), (t1, n1) = self.points[0], self.points[-1]
        return (n1 - n0) / (t1 - t0)


def progress_line(params, p: dict, elapsed: float, ledger_totals: dict | None, rps: float) -> str:
    requests, failures = p.get("requests", 0), p.get("failures", 0)
    if params.iterations:
        head = f"{bar(requests / params.iterations)} {requests}/{params.iterations} {100 * requests / params.iterations:3.0f}%"
    else:
        head = f"{bar(elapsed / params.duration_s)} {requests} requests"
    line = (
        f"{head}  {elapsed:5.1f}s  {rps:6.1f} req/s  users {p.get('users', 0)}  "
        f"failures {failures} ({100 * failures / requests if requests else 0:.1f}%)"
    )
    if ledger_totals is not None:
        # Enqueue counts reach Redis within 50 ms of the broker taking a task (the
        # API adds them up first), and a fast task can settle before: live, the
        # pending count may dip below 0 for a moment. The drain check waits for it.
        line += (
            f"  | ledger enqueued {ledger_totals.get('enqueued', 0)} completed {ledger_totals.get('completed', 0)}"
            f" pending {max(0, ledger_totals.get('pending', 0))}"
        )
    return line


# -- One run --------------------------------------------------------------------------------
def raw_params(args: argparse.Namespace) -> dict:
    return {
        "scenario": args.scenario,
        "run": args.run,
        "worker": args.worker,
        "endpoint": args.endpoint,
        "users": args.users,
        "spawn_rate": args.spawn,
        "iterations": args.iterations,
        "duration": args.duration,
        "variant": args.variant,
        "mode": args.mode,
        "count": args.count,
        "size": args.size,
    }


def load_env(params, locust_workers: int) -> dict[str, str]:
    """What the Locust containers read (docker-compose.yml, profile `load`): the
    parsed parameters written back, so the containers parse exactly this run."""
    given = {
        "scenario": params.scenario,
        "run": params.run,
        "worker": params.worker_label or "",
        "endpoint": params.endpoint_label if params.scenario == "queue" else "",
        "iterations": str(params.iterations or ""),
        "duration": str(params.duration_s) if params.duration_s else "",
        "variant": params.variant or "",
        "mode": params.mode or "",
        "count": str(params.count or ""),
        "size": "" if params.size is None else str(params.size),
    }
    return {
        **{P.ENV_NAMES[k]: v for k, v in given.items()},
        "LOAD_USERS": str(params.users),
        "LOAD_SPAWN_RATE": f"{params.spawn_rate:g}",
        "LOCUST_WORKERS": str(locust_workers),
        "LOAD_START_GATE": GATE_FILE,
    }


def run_load(
    args: argparse.Namespace, compose: Compose | None = None, display: Display | None = None, on_start=None
) -> int:
    """One load run and its record; `on_start(start_info)` is called when Locust's users start."""
    params = P.parse_params(raw_params(args))  # ParamError: reported by main()
    compose = compose or Compose()
    ui = display or Display()
    say = ui.say
    queue_run = params.scenario == "queue"
    subjects = [R.service_of(q) for q in params.workers] if queue_run else ["api"]
    subjects = list(dict.fromkeys(subjects))
    target = f"{params.iterations} requests" if params.iterations else f"{params.duration_s:g} s"
    what = (
        f"worker={params.worker_label} endpoint={params.endpoint_label}"
        if queue_run
        else f"scenario={params.scenario} {params.endpoint_label}"
    )
    say(
        f"run {params.run}: {what} users={params.users} spawn={params.spawn_rate:g}/s, {target} "
        f"(Locust: 1 master + {args.locust_workers} workers)"
    )

    api = compose.port("api", 8000)
    if not api:
        raise LoadError("the lab is not running (no published API port): start it with `make up`")
    try:
        httpx.get(f"http://{api}/readyz", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        raise LoadError(f"the API at {api} is not ready ({exc}): `make ps`, `make logs svc=api`") from None
    if ledger(api, params.run) is not None:
        raise LoadError(f"run {params.run} already has a ledger: choose another run= or `make reset run={params.run}`")

    api_containers = compose.inspect("api")
    limits = {"api": R.limits_of(api_containers), "workers": {}}
    knobs = {"api": R.knobs_of(api_containers, "api")}
    for q in params.workers:
        if q == "background":
            limits["workers"][q] = limits["api"]
            continue
        containers = compose.inspect(q)
        if not containers:
            raise LoadError(f'the {q} worker has no running container: `make up` (or make up services="... {q}")')
        limits["workers"][q] = R.limits_of(containers, q)
        knobs[q] = R.knobs_of(containers, q)
    prom_addr = compose.port("prometheus", 9090)
    if prom_addr:
        Prometheus(prom_addr).ensure_load_jobs(compose, say)
    grafana = Grafana(compose)
    api_text = R.limit_text(limits["api"])
    worker_text = R.workers_limit_text(limits["workers"]) if queue_run else "-"
    say(f"limits applied: api {api_text}" + (f", workers {worker_text}" if queue_run else ""))
    if grafana.problem:
        say(grafana.problem)

    watched = list(dict.fromkeys(["api", *(q for q in params.workers if q != "background")]))
    before = R.restart_counts({s: compose.inspect(s) for s in watched})

    log = None
    probe_started = False
    try:
        compose.remove(*LOAD_SERVICES)  # leftovers of an interrupted run
        if queue_run:
            if compose.ids("probe"):
                say("stopping the liveness probe: it would take the API's CPU during a queue run")
                compose.remove("probe")
        else:
            start_probe(compose, say)
            probe_started = True

        say("starting Locust (docker compose --profile load up) ...")
        containers_since = time.time()
        compose(
            "up",
            "--detach",
            "--no-deps",
            "--force-recreate",
            "--build",
            *LOAD_SERVICES,
            extra_env=load_env(params, args.locust_workers),
            timeout=900,
        )
        master = compose.ids("locust-master", include_stopped=True)
        if not master:
            raise LoadError("the Locust master container did not start")
        log = MasterLog(master[0])

        start_info, result, progress = None, None, {}
        rate = Rate()
        began = time.monotonic()
        last_change, last_requests = time.monotonic(), -1
        led_totals, next_poll = None, 0.0
        while result is None:
            for kind, data in log.events(wait=0.5):
                if kind == "WAITING":
                    open_gate(
                        compose,
                        Prometheus(prom_addr) if prom_addr else None,
                        args.locust_workers,
                        containers_since,
                        say,
                    )
                elif kind == "START":
                    start_info = data
                    if on_start is not None:
                        on_start(data)
                    say(f"load started at {time.strftime('%H:%M:%S', time.localtime(data['started_at']))}")
                    if msg := grafana.annotate(
                        R.annotation(
                            "start",
                            params.run,
                            params.worker_label or "none",
                            params.endpoint_label,
                            params.users,
                            api_text,
                            worker_text,
                            data["started_at"],
                            tag=params.worker_label or params.scenario,
                        )
                    ):
                        say(msg)
                elif kind == "PROGRESS":
                    progress = data
                    rate.add(data.get("elapsed", 0), data.get("requests", 0))
                elif kind == "RESULT":
                    result = data
                elif kind in ("ERROR", "ABORT"):
                    raise LoadError(f"Locust: {data.get('error') or data.get('reason')}")
            if result is not None:
                break
            now = time.monotonic()
            if log.ended:
                raise LoadError("the Locust master stopped without a result; its last lines:\n" + "\n".join(log.tail))
            if start_info is None and now - began > START_TIMEOUT_S:
                raise LoadError(
                    f"Locust did not start within {START_TIMEOUT_S} s; the master's last lines:\n" + "\n".join(log.tail)
                )
            if progress.get("requests", 0) != last_requests:
                last_requests, last_change = progress.get("requests", 0), now
            elif start_info is not None and now - last_change > STALL_TIMEOUT_S:
                raise LoadError(f"no response for {STALL_TIMEOUT_S} s: the run is stuck (make ps; make logs svc=api)")
            if queue_run and now >= next_poll:
                led = ledger(api, params.run)
                led_totals = led["totals"] if led else led_totals
                next_poll = now + 1
            if start_info is not None and progress:
                ui.show(
                    progress_line(
                        params, progress, progress.get("elapsed", 0), led_totals if queue_run else None, rate.rps
                    )
                )

        final = {"requests": result["requests"], "failures": result["failures"], "users": 0}
        load_s = (result["last_response_at"] or 0) - (result["first_request_at"] or 0)
        ui.show(
            progress_line(
                params,
                final,
                load_s,
                led_totals if queue_run else None,
                result["requests"] / load_s if load_s > 0 else 0.0,
            ),
            force=True,
        )
        ui.end_line()
        say(f"load done: {result['requests']} requests in {load_s:.1f} s, {result['failures']} failed")

        # The tasks: wait until nothing is pending.
        led, settled, stalled = None, False, False
        if queue_run:
            accepted = result["status_codes"].get("202", 0)
            load_end = result["last_response_at"] or time.time()
            deadline = time.monotonic() + args.drain_timeout
            last_settled, moved_at = -1, time.monotonic()
            while True:
                led = ledger(api, params.run)
                totals = (led or {}).get("totals", {})
                settled_now = totals.get("completed", 0) + totals.get("failed", 0)
                if settled_now != last_settled:
                    last_settled, moved_at = settled_now, time.monotonic()
                # pending < 0 (more settled than enqueued) is a ledger defect, not a
                # backlog: waiting would not change it; the record flags it.
                if (
                    led
                    and totals.get("pending", 1) <= 0
                    and (totals.get("enqueued", 0) >= accepted or time.time() - load_end > 10)
                ):
                    settled = True
                    break
                if time.monotonic() > deadline:
                    break
                if time.monotonic() - moved_at > args.drain_stall:
                    stalled = True  # nothing settled for minutes: those tasks are not coming
                    break
                done = totals.get("completed", 0) + totals.get("failed", 0)
                enq = max(1, totals.get("enqueued", 0))
                ui.show(
                    f"draining {bar(done / enq)} completed {totals.get('completed', 0)}/{totals.get('enqueued', 0)}"
                    f"  pending {totals.get('pending', 0)}  {time.time() - load_end:5.1f}s since the load stopped"
                    + (f"  ({R.arq_cap(knobs)})" if "arq" in knobs else "")
                )
                time.sleep(1)
            ui.end_line()
            totals = (led or {}).get("totals", {})
            if settled:
                say(
                    f"all tasks settled: {totals.get('completed')} completed, {totals.get('failed')} failed, "
                    f"{totals.get('duplicates')} duplicates"
                )
            elif stalled:
                say(
                    f"DRAIN STALLED: nothing settled for {args.drain_stall:.0f} s, {totals.get('pending')} task(s) "
                    "still pending (recorded as lost)"
                )
            else:
                say(
                    f"DRAIN TIMEOUT after {args.drain_timeout:.0f} s: {totals.get('pending')} task(s) still pending "
                    "(recorded as lost)"
                )

        start = result["first_request_at"] or result["test_started_at"]
        end = result["last_response_at"] or time.time()
        window_end = (
            max(end, (led or {}).get("last_settled_at") or 0) if settled else (time.time() if queue_run else end)
        )

        probe = None
        if probe_started:
            # At least PROBE_MIN_WINDOW_S: a run of a few milliseconds would fall
            # between two probes (20 a second) and report nothing.
            probe_until = max(end, start + PROBE_MIN_WINDOW_S)
            time.sleep(max(0.0, probe_until + 0.2 - time.time()))
            probe = probe_report(compose, start, probe_until)
            if probe is None:
                say("the probe's report could not be read")
            else:
                probe["window_s"] = round(probe_until - start, 3)

        resources, notes = None, []
        if queue_run and not settled:
            notes.append(
                f"drain stalled: nothing settled for {args.drain_stall:.0f} s"
                if stalled
                else f"drain timeout after {args.drain_timeout:.0f} s"
            )
        if prom_addr:
            prom = Prometheus(prom_addr)
            services = list(dict.fromkeys([*subjects, "api"]))
            if not prom.wait_for_scrape(services, window_end):
                notes.append("Prometheus had not scraped past the end of the run: resource figures may miss its end")
            try:
                resources = prom.resources(services, start, window_end)
            except (httpx.HTTPError, LoadError) as exc:
                notes.append(f"Prometheus query failed: {exc}")
        else:
            notes.append("Prometheus is not running: no memory / CPU figures")

        # Locust lingers so Prometheus scrapes its last counters; then it exits by itself.
        deadline = time.monotonic() + float(setting("LOAD_LINGER_S", "6")) + 30
        while not log.ended and time.monotonic() < deadline:
            log.events(wait=0.5)
        out_dir = Path(args.results_dir)
        report_files = copy_locust_report(master[0], out_dir, params.run)
        if not report_files:
            notes.append("Locust's HTML/CSV report could not be copied from the master container")

        restarts = R.restarts_during(before, R.restart_counts({s: compose.inspect(s) for s in watched}))
        record = R.build_record(
            params={
                "run": params.run,
                "scenario": params.scenario,
                "worker": params.worker_label,
                "endpoint": params.endpoint_label,
                "users": params.users,
                "spawn_rate": params.spawn_rate,
                "iterations": params.iterations,
                "duration_target_s": params.duration_s,
            },
            locust=result,
            ledger=led,
            settled=settled,
            limits=limits,
            knobs=knobs,
            resources=resources,
            probe=probe,
            locust_workers=args.locust_workers,
            subjects=subjects,
            notes=notes,
            restarts=restarts,
        )
        record["window_end"] = window_end
        record["locust_report"] = report_files
        if msg := grafana.annotate(
            R.annotation(
                "end",
                params.run,
                params.worker_label or "none",
                params.endpoint_label,
                params.users,
                api_text,
                worker_text,
                window_end,
                duration_s=window_end - start,
                tag=params.worker_label or params.scenario,
            )
        ):
            say(msg)

        path = out_dir / f"{params.run}.json"
        path.write_text(json.dumps(record, indent=2) + "\n")
        say(f"\nrecord: {path}" + (f" (Locust's report: {', '.join(report_files)})" if report_files else ""))
        say(R.table_header())
        say(R.table_row(record))
        for warning in record["warnings"]:
            say(f"WARNING: {warning}")
        if probe:
            say(
                f"probe: {probe.get('ok')}/{probe.get('sent')} ok ({100 * (probe.get('success_rate') or 0):.1f}%), "
                f"worst gap {probe.get('worst_gap_s')} s"
            )
        queue = None if params.worker_label in (None, "all") else params.worker_label
        if link := grafana.run_link("queues" if queue_run else "api", start, window_end, queue):
            say(f"Grafana, this run: {link}")
        return 0 if (settled or not queue_run) else 1
    finally:
        ui.end_line()
        if log:
            log.close()
        compose.remove(*LOAD_SERVICES)
        if probe_started:
            compose.remove("probe")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.load", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--scenario", default="", help="queue (default), upstream, clients, payload")
    p.add_argument("--worker", default="", help=f"queue runs: {'|'.join(R.QUEUES)}|all|a,b")
    p.add_argument(
        "--endpoint",
        default="",
        help="queue runs: io/simple (default)|io/sync|io/thread|cpu/simple|cpu/process|all|a,b",
    )
    p.add_argument("--users", default="", help="Locust users (default 100)")
    p.add_argument("--spawn", default="", help="users started per second (default 100)")
    p.add_argument("--iterations", default="", help="exactly this many requests (default: 5000 queue, 100 others)")
    p.add_argument("--duration", default="", help="or send for this long: 60s, 2m")
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
        "--drain-timeout",
        type=float,
        default=float(setting("LOAD_DRAIN_TIMEOUT_S", "1200")),
        help="seconds to wait for pending tasks after the load (default 1200)",
    )
    # Waiting for the drain ends early when no task settled for this long: tasks
    # take seconds at most (CPU_WORK at 0.2 CPU: ~0.25 s), so those are not coming.
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
    except P.ParamError as exc:
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
