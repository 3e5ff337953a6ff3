"""The real compose project, started once per session for every test in tests/compose.

`make test-compose` runs these tests. They need a Docker engine with the Compose
v2 plugin and the images the compose file names (offline: run
../shared/offline-docker/start-engine and build-standins first). Grafana is never
started here (it has no offline stand-in); everything else is.

The stack runs under its own project name (LAB_TEST_PROJECT, default
task-queue-lab-test), on free 127.0.0.1 ports (or LAB_TEST_API_PORT,
LAB_TEST_PROMETHEUS_PORT, ...), with its own image tag, and ignores the
developer's .env and lab variables, so it neither disturbs nor depends on a stack
started with `make up`. LAB_TEST_KEEP=1 leaves it running after the session;
LAB_TEST_REUSE=1 starts from the stack an earlier session left (with the same
ports: LAB_TEST_API_PORT, ...) and leaves it too.

One `make up` serves every test that needs the compose file's defaults; the
tests marked `reconfigures` (other limits, replicas) run after them, on a
second, and the tests marked `stack_down` last. One setting differs from the
defaults (TEST_STACK_SETTINGS): the task timeout, which SAQ's sweep follows,
so that the chaos test does not wait out SAQ's minute.

Other modules use the session fixture `stack` (a running stack): its api_url,
prometheus_url, project, compose(*args), make(*args), up(**vars), query(expr),
paused(service);
`loaded_run`: the ledger of a run of TASKS_PER_QUEUE io/simple tasks on every queue,
sent once per session by whichever test asks first; and `arq_queue_run`: one
`make load worker=arq`, its backlog drained before any other test runs.
"""

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from labctl.platform import docker
from tests.compose.helpers import (
    QUEUE_RUN_SECONDS,
    QUEUE_RUN_WATCH_S,
    QUEUES,
    TASKS_PER_QUEUE,
    TEST_STACK_SETTINGS,
    compose_command,
    drain_arq_backlog,
    load,
    post_tasks,
    run_report,
    wait_settled,
)
from tests.lab import new_run, wait_until

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
HERE = Path(__file__).resolve().parent

# Host ports the stack publishes: compose variable -> container port.
PUBLISHED = {"API_PORT": 8000, "PROMETHEUS_PORT": 9090, "GRAFANA_PORT": 3000, "FLOWER_PORT": 5555, "SAQ_WEB_PORT": 8082}
UP_TIMEOUT_S = 900  # a cold build downloads every wheel
SETTLE_TIMEOUT_S = 240


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "reconfigures: starts the stack with other settings and leaves it so; runs after every test "
        "that needs the defaults",
    )
    config.addinivalue_line("markers", "stack_down: takes the compose stack down; runs after every other compose test")


def run_order(item) -> tuple[bool, bool]:
    """The defaults' tests first, then those that reconfigure the stack, then its teardown."""
    return (item.get_closest_marker("stack_down") is not None, item.get_closest_marker("reconfigures") is not None)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # Everything in this directory needs the stack: mark it `compose` before
    # `-m` selects, whoever wrote the test.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.compose)
    yield
    # After every other plugin's reordering (pytest-randomly's shuffle): one `make up`
    # for the defaults, one for the tests that need other settings, then the teardown;
    # a stable sort keeps any order within each group.
    items.sort(key=run_order)


# What the session measured (make up, the load), shown at the end of the run.
TIMINGS: dict[str, float] = {}
# Every command the session ran, with its output (the load tooling's own progress and notes).
COMMAND_LOG = Path(os.environ.get("LAB_TEST_LOGS", "/tmp/lab-test-logs")) / "compose-commands.log"
COMMAND_LOG_LINES: list[str] = []


def flush_command_log() -> None:
    COMMAND_LOG.parent.mkdir(parents=True, exist_ok=True)
    with COMMAND_LOG.open("a") as log:
        log.writelines(COMMAND_LOG_LINES)
    COMMAND_LOG_LINES.clear()


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("compose stack timings")
        for what, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")
        terminalreporter.write_line(f"every command's output: {COMMAND_LOG}")


def _read_lines(stream, lines: list[str], started: float) -> None:
    for line in stream:
        lines.append(line)
        COMMAND_LOG_LINES.append(f"{time.monotonic() - started:7.1f}  {line}")


def _run(cmd, *, env, timeout, check=True, cwd=ROOT) -> subprocess.CompletedProcess:
    """`cmd`'s exit code and output; every line also goes to COMMAND_LOG, with
    the seconds since the command started (where a slow or failing run's time went)."""
    started = time.monotonic()
    out: list[str] = []
    err: list[str] = []
    COMMAND_LOG_LINES.append(f"\n$ {' '.join(cmd)}\n")
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        readers = [
            threading.Thread(target=_read_lines, args=(s, lines, started))
            for s, lines in ((p.stdout, out), (p.stderr, err))
        ]
        for reader in readers:
            reader.start()
        try:
            returncode = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            returncode = None
        for reader in readers:
            reader.join()
    COMMAND_LOG_LINES.append(f"{time.monotonic() - started:7.1f}  (exit {returncode})\n")
    flush_command_log()
    stdout, stderr = "".join(out), "".join(err)
    if returncode is None:
        pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s\n{stdout}\n{stderr}")
    if check and returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {returncode}\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
    return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)


def require_engine() -> None:
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=60
        )
    except FileNotFoundError:
        pytest.fail(
            "NO DOCKER ENGINE: the `docker` command is not installed. make test-compose needs a running "
            "engine (offline machines: ../shared/offline-docker/start-engine).",
            pytrace=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("NO DOCKER ENGINE: `docker info` hung for 60 s.", pytrace=False)
    if info.returncode != 0:
        pytest.fail(
            "NO DOCKER ENGINE: `docker info` failed, so make test-compose cannot run. Start one "
            f"(offline machines: ../shared/offline-docker/start-engine).\n{info.stderr.strip()}",
            pytrace=False,
        )


def compose_variables() -> set[str]:
    """Every variable the compose file reads: none may leak in from the caller's environment."""
    return set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE_FILE.read_text()))


def free_ports(count: int) -> list[int]:
    """`count` ports the kernel picks, all held until each is picked: a port
    picked and let go can be picked again at once, and two services published
    on one port leave the stack unable to start."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


class Stack:
    """A compose project under test, and the ways to talk to it."""

    def __init__(self, project: str, env: dict[str, str], compose_cmd: list[str], ports: dict[str, int]):
        self.project = project
        self.env = env
        self.compose_cmd = compose_cmd
        self.ports = ports
        self.api_url = f"http://127.0.0.1:{ports['API_PORT']}"
        self.prometheus_url = f"http://127.0.0.1:{ports['PROMETHEUS_PORT']}"
        self.flower_url = f"http://127.0.0.1:{ports['FLOWER_PORT']}"
        self.saq_ui_url = f"http://127.0.0.1:{ports['SAQ_WEB_PORT']}"
        self.services: list[str] = []
        self.timings = TIMINGS

    # commands
    def compose(
        self, *args: str, check: bool = True, timeout: float = 300, variables: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """A compose command; `variables` are compose variables for this one command."""
        return _run([*self.compose_cmd, *args], env={**self.env, **(variables or {})}, timeout=timeout, check=check)

    def make(self, *args: str, check: bool = True, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess:
        return _run(
            ["make", "--no-print-directory", "-C", str(ROOT), *args], env=self.env, timeout=timeout, check=check
        )

    def up(self, **variables: str) -> subprocess.CompletedProcess:
        """`make up VAR=value ...` for every service but Grafana, as a user types it."""
        started = time.monotonic()
        proc = self.make(
            "up", f"services={' '.join(self.services)}", *(f"{k}={v}" for k, v in variables.items()), check=False
        )
        if proc.returncode != 0:
            ps = self.compose("ps", "-a", check=False).stdout
            logs = self.compose("logs", "--no-color", "--tail=30", check=False).stdout
            pytest.fail(
                f"make up {variables} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}\n"
                f"--- compose ps\n{ps}\n--- logs\n{logs[-8000:]}"
            )
        label = " ".join(f"{k}={v}" for k, v in variables.items())
        key = f"make up {label}".strip()
        if key in self.timings:
            key += f" (#{sum(k == key or k.startswith(key + ' (#') for k in self.timings) + 1})"
        self.timings[key] = time.monotonic() - started
        return proc

    @contextlib.contextmanager
    def paused(self, service: str):
        """Every container of `service` frozen for the block, then thawed and healthy
        again: labctl's `docker.paused`, whose freeze tries again when the cgroup
        freezer gives up on a busy machine ("unable to freeze": runc thaws the
        container and the call fails), as `docker compose pause` does not."""
        ids = self.compose("ps", "-q", service).stdout.split()
        assert ids, f"no container of {service} to pause"
        with docker.paused(ids):
            yield
        self.wait_healthy(service)

    def wait_healthy(self, *services: str, timeout: float = 180) -> None:
        """Until every container of `services` reports healthy. `docker pause` marks a
        container unhealthy at once, and it stays so until its next check passes: a
        `compose up --wait` meanwhile fails on it ("dependency failed to start")."""

        def healthy() -> bool:
            out = self.compose("ps", "--format", "{{.Service}} {{.Health}}", *services, check=False).stdout
            states = [line.split(" ") for line in out.splitlines()]
            return {s[0] for s in states} == set(services) and all(s[1:] == ["healthy"] for s in states)

        wait_until(healthy, timeout, f"{', '.join(services)} healthy", interval=0.5)

    def limits(self) -> dict[tuple[str, int], tuple[str, str]]:
        """`make limits` parsed: (service, replica) -> (cpus, memory) as printed."""
        out = self.make("limits", timeout=60).stdout
        rows = {}
        for line in out.splitlines()[1:]:
            service, replica, cpus, memory, *_ = line.split()
            rows[(service, int(replica))] = (cpus, memory)
        return rows

    # Prometheus
    def prometheus(self, path: str, **params) -> dict:
        url = f"{self.prometheus_url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.prometheus("/api/v1/query", query=expr)["result"]

    def targets(self) -> list[dict]:
        return self.prometheus("/api/v1/targets", state="active")["activeTargets"]


@pytest.fixture(scope="session")
def stack():
    require_engine()
    compose_cmd = compose_command()
    project = os.environ.get("LAB_TEST_PROJECT", "task-queue-lab-test")
    picked = dict(zip(PUBLISHED, free_ports(len(PUBLISHED))))
    ports = {name: int(os.environ.get(f"LAB_TEST_{name}") or picked[name]) for name in PUBLISHED}

    # Nothing of the caller's own stack settings: not the lab's variables, not
    # compose's file/profile selection, not the command-line variables of an
    # outer `make test-compose X=Y` (MAKEFLAGS hands them to every inner make).
    leaks = compose_variables() | {"COMPOSE_FILE", "COMPOSE_PROFILES", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    env = {k: v for k, v in os.environ.items() if k not in leaks}
    empty_env_file = tempfile.NamedTemporaryFile("w", prefix="lab-compose-", suffix=".env", delete=False)
    empty_env_file.close()
    env.update(
        COMPOSE_PROJECT_NAME=project,
        # Not the developer's .env: the compose file's defaults are under test
        # (but for TEST_STACK_SETTINGS).
        COMPOSE_ENV_FILES=empty_env_file.name,
        COMPOSE="docker compose" if compose_cmd == ["docker", "compose"] else "docker-compose",
        LAB_IMAGE=os.environ.get("LAB_TEST_IMAGE", "task-queue-lab:test"),
        # Grafana does not start here; set so compose does not warn about it.
        GRAFANA_ADMIN_PASSWORD=secrets.token_urlsafe(16),
        # A reused stack (LAB_TEST_REUSE) keeps its brokers' volumes, whose users
        # were made with the first session's password: its sessions share one.
        RABBITMQ_PASSWORD=os.environ.get("LAB_TEST_RABBITMQ_PASSWORD") or secrets.token_hex(12),
        POSTGRES_PASSWORD=os.environ.get("LAB_TEST_POSTGRES_PASSWORD") or secrets.token_hex(12),
        **{name: str(port) for name, port in ports.items()},
        **TEST_STACK_SETTINGS,
    )
    COMMAND_LOG.unlink(missing_ok=True)
    s = Stack(project, env, compose_cmd, ports)
    services = s.make("-s", "compose-services", timeout=60).stdout.split()
    assert "grafana" not in services and {"api", "redis", "prometheus"} <= set(services), services
    s.services = services

    # Leftovers of an interrupted session (containers, volumes) would skew every count.
    # LAB_TEST_REUSE=1 takes the stack a session before left instead (and leaves it):
    # `make up` recreates only what this tree changed (tests/mutants_compose.py).
    reuse = os.environ.get("LAB_TEST_REUSE") == "1"
    if not reuse:
        s.compose("--profile", "*", "down", "--volumes", "--remove-orphans", "--timeout", "5", timeout=180)
    try:
        s.up()
        yield s
    finally:
        if os.environ.get("LAB_TEST_KEEP") != "1" and not reuse:
            s.compose("--profile", "*", "down", "--volumes", "--remove-orphans", check=False, timeout=300)
        os.unlink(empty_env_file.name)


@pytest.fixture(scope="session")
def loaded_run(stack) -> dict:
    """TASKS_PER_QUEUE io/simple tasks on each queue, POSTed through the published API port
    under one new run; its ledger once every task settled."""
    run = f"compose-{secrets.token_hex(5)}"
    started = time.monotonic()
    post_tasks(stack.api_url, run, dict.fromkeys(QUEUES, TASKS_PER_QUEUE))
    stack.timings[f"POST {len(QUEUES)}x{TASKS_PER_QUEUE}"] = time.monotonic() - started
    report = wait_settled(stack.api_url, run, total=len(QUEUES) * TASKS_PER_QUEUE, timeout=SETTLE_TIMEOUT_S, interval=2)
    stack.timings[f"{len(QUEUES)}x{TASKS_PER_QUEUE} settled"] = time.monotonic() - started
    return report


@pytest.fixture(scope="session")
def load_results_dir(tmp_path_factory) -> Path:
    """The records of the session's load runs: not the developer's results/."""
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="session")
def arq_queue_run(stack, load_results_dir):
    """`make load worker=arq` sized to prove the point (QUEUE_RUN_SECONDS of
    load, and a QUEUE_RUN_WATCH_S drain watch). Once per session: test_load
    checks it and reads the dashboards' queries over it from Prometheus,
    test_panels reads every dashboard after it. make load returns with most of
    the run still queued; a one-off arq worker then takes the backlog over,
    whatever the run's tests will say, so that no later test finds arq's queue
    full."""
    run = new_run("compose-load")
    outcome: dict = {"run": run}
    started = time.monotonic()
    args = ("worker=arq", f"duration={QUEUE_RUN_SECONDS}s", f"drain_watch={QUEUE_RUN_WATCH_S}")
    try:
        _, outcome["proc"], outcome["record"] = load(stack, load_results_dir, *args, run=run)
        # make load returns once Locust's master has exited (its report is copied out of
        # the container): every scrape of the run's Locust processes came before.
        outcome["returned_at"] = time.time()
        # What was still queued when make load gave the prompt back.
        outcome["ledger_at_return"] = run_report(stack.api_url, run)
    finally:
        outcome["wall_s"] = time.monotonic() - started
        drain_arq_backlog(stack, run)
    return outcome
