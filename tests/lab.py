"""Real parts for the tests: a redis-server, the API and the workers as
subprocesses, and small clients for the API, the ledger and /metrics."""

import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from lab.queues import BROKERS, adapter

ROOT = Path(__file__).resolve().parents[1]
# One folder per pytest-xdist worker: its processes' names repeat across workers.
LOGS = Path(os.environ.get("LAB_TEST_LOGS", "/tmp/lab-test-logs")) / os.environ.get("PYTEST_XDIST_WORKER", "main")
# The host suites run the queues on Redis (a redis-server of their own); those
# on another broker are tested against it in the compose suite (tests/compose/test_rabbitmq.py).
WORKER_MODULES = {b.name: b.module for b in BROKERS if b.transport == "redis"}
ON_REDIS: tuple[str, ...] = tuple(WORKER_MODULES)
HOST_QUEUES: tuple[str, ...] = ("background", *ON_REDIS)  # the queues the host suites drive

# httpx.get() builds a client for each call, and with it a TLS context that
# loads certifi's CA bundle (a costly parse), even for plain HTTP: the
# readiness, ledger and /metrics polls made that the larger part of the test
# process's CPU. One context, built once, and one client for the tests' calls.
# No keep-alive: each request opens its own connection, as httpx.get() did (an
# API of several processes answers each on whichever process accepts it).
TLS = httpx.create_ssl_context()
HTTP = httpx.Client(verify=TLS, timeout=10, limits=httpx.Limits(max_keepalive_connections=0))


class UpstreamBug(UserWarning):
    """The state of a library defect the lab works around, reported by a test
    (pytest's warnings summary) whether or not the library still has it."""


# Each pytest-xdist worker hands out ports from a range of its own, below the
# kernel's ephemeral ones, never the same twice: a port the kernel picked
# could be handed to two tests at once before either process had bound it.
# LAB_TEST_PORT_SLOT names the range instead (make mutants' runs at once).
# Each session starts at a random place in its range and walks on from there:
# two sessions of one range at once (two checkouts' make test on one machine)
# would otherwise walk the same ports in step, each binding what the other
# had just found free.
_PORTS_PER_WORKER = 3000
_ports: list[int] = []


def free_port() -> int:
    if not _ports:
        slot = os.environ.get("LAB_TEST_PORT_SLOT") or os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
        base = 11000 + int(slot or 0) % 7 * _PORTS_PER_WORKER
        start = random.SystemRandom().randrange(_PORTS_PER_WORKER)  # not the seeded `random` pytest-randomly sets
        _ports.extend(base + (start + i) % _PORTS_PER_WORKER for i in range(_PORTS_PER_WORKER))
        _ports.reverse()  # popped from the end: `start` first
    while _ports:
        port = _ports.pop()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken by something else
                continue
            return port
    raise RuntimeError(f"every port of this session's range was handed out or taken (LAB_TEST_PORT_SLOT={slot!r})")


def new_run(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


async def until(predicate, timeout: float, what: str, interval: float = 0.02):
    """wait_until inside an event loop: `predicate()` (a plain call) polled
    between awaits, so the loop keeps running what the test waits for."""
    deadline = time.monotonic() + timeout
    while not (last := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval)
    return last


class SilentServer:
    """A port that takes connections and never answers: a Redis that does not
    answer, as a frozen one does (the kernel completes the connections; nothing
    ever reads them). `with SilentServer() as url:`."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        return f"redis://127.0.0.1:{self.sock.getsockname()[1]}/0"

    def __exit__(self, *exc) -> None:
        self.sock.close()


class RedisServer:
    def __init__(self, port: int | None = None, persist: bool = False):
        """persist: an append-only file in a directory of its own, so a restart
        keeps the queues and the ledger (like REDIS_APPENDONLY=yes)."""
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.dir = tempfile.mkdtemp(prefix="lab-redis-") if persist else None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *(["--appendonly", "yes", "--dir", self.dir] if self.dir else ["--appendonly", "no"]),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, 10, f"redis-server on {self.port}")
        return self

    def answers(self) -> bool:
        """PONG; a server that exited (cannot start) fails at once, not after the wait."""
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"redis-server on {self.port} exited with {self.proc.returncode}")
        return self.ping()

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def wipe(self) -> None:
        """Delete what a persistent server keeps (stopped first): it starts
        again empty, as a server without persistence does."""
        assert self.dir and (self.proc is None or self.proc.poll() is not None), "wipe a stopped persistent server"
        shutil.rmtree(self.dir)
        os.mkdir(self.dir)

    def freeze(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)


# Knobs the tests shorten from the lab's defaults: they would make the suite
# wait, not test anything more. arq takes at most max_jobs jobs per poll (its
# default 0.5 s poll: README, "Queues"); the stream queues' entries a stopped
# replica left unacknowledged are claimed after the reclaim delay, and the
# tests' tasks take milliseconds. tests/host_drain_rate.py puts the defaults back.
SHORTENED = {
    "ARQ_POLL_DELAY": "0.05",
    "FASTSTREAM_RECLAIM_S": "5",
    "TASKIQ_RECLAIM_S": "5",
    "STREAQ_IDLE_TIMEOUT_S": "5",
    "DOCKET_REDELIVERY_TIMEOUT_S": "5",
}


def lab_env(redis_url: str, **overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMETHEUS_MULTIPROC", "LAB_"))}
    env.update(
        REDIS_URL=redis_url,
        CPU_WORK="50000",  # the shape of the work matters here, not its size
        PYTHONUNBUFFERED="1",
        LIBRARY_LOG_LEVEL="WARNING",
        SHUTDOWN_GRACE_S="20",
        **SHORTENED,
    )
    env.update({k: str(v) for k, v in overrides.items()})
    return env


class LabProcess:
    """One real process of the lab, ready once its HTTP endpoint answers."""

    def __init__(self, name: str, argv: list[str], env: dict, ready_url: str):
        self.name, self.argv, self.env, self.ready_url = name, argv, env, ready_url
        self.proc: subprocess.Popen | None = None
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log_path = LOGS / f"{name}.log"

    def launch(self) -> "LabProcess":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def wait_ready(self, timeout: float = 40) -> "LabProcess":
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}: see {self.log_path}")
            try:
                return HTTP.get(self.ready_url, timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout, f"{self.name} at {self.ready_url}", interval=0.2)
        return self

    def start(self, timeout: float = 40) -> "LabProcess":
        return self.launch().wait_ready(timeout)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 40) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
            raise AssertionError(f"{self.name} did not stop within {timeout}s of SIGTERM") from None

    def metrics(self) -> "Metrics":
        return Metrics(HTTP.get(self.ready_url, timeout=5).text)


def api_process(redis_url: str, name: str = "api", **overrides) -> LabProcess:
    """The API, not started yet (start_api, start_together)."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "services.api.app:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    overrides.setdefault("METRICS_PORT", free_port())  # Prometheus' own /metrics, served by a thread
    proc = LabProcess(
        name, argv, lab_env(redis_url, SERVICE_NAME=name, **overrides), f"http://127.0.0.1:{port}/metrics"
    )
    proc.url = f"http://127.0.0.1:{port}"
    proc.metrics_url = f"http://127.0.0.1:{overrides['METRICS_PORT']}/metrics"
    return proc


def worker_process(queue: str, redis_url: str, name: str | None = None, **overrides) -> LabProcess:
    """A queue's worker, not started yet (start_worker, start_together)."""
    port = free_port()
    name = name or queue
    env = lab_env(redis_url, METRICS_PORT=port, SERVICE_NAME=name, **overrides)
    argv = [sys.executable, "-m", WORKER_MODULES[queue]]
    return LabProcess(name, argv, env, f"http://127.0.0.1:{port}/metrics")


def start_api(redis_url: str, name: str = "api", **overrides) -> LabProcess:
    return api_process(redis_url, name, **overrides).start()


def start_worker(queue: str, redis_url: str, name: str | None = None, **overrides) -> LabProcess:
    return worker_process(queue, redis_url, name, **overrides).start()


def start_together(*processes: LabProcess, timeout: float = 60) -> list[LabProcess]:
    """Launch every process, then wait for each to answer: their start-ups
    (imports, connecting) overlap instead of adding up. On a failure, those
    launched are stopped."""
    try:
        for proc in processes:
            proc.launch()
        for proc in processes:
            proc.wait_ready(timeout)
    except BaseException:
        for proc in processes:
            if proc.proc is not None and proc.proc.poll() is None:
                os.killpg(proc.proc.pid, signal.SIGKILL)
                proc.proc.wait(5)
        raise
    return list(processes)


class Metrics:
    def __init__(self, text: str):
        self.samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(self, name: str, **labels) -> float:
        return sum(
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == str(v) for k, v in labels.items())
        )


# API clients
def post_to_queues(
    api_url: str,
    run: str,
    per_queue: dict[str, int],
    endpoint: str = "io/simple",
    value: int = 1,
    concurrency: int = 16,
) -> list[httpx.Response]:
    """POST tasks through the API, interleaving the queues, at most `concurrency`
    requests in flight; every response, in the order sent."""

    async def post_all() -> list[httpx.Response]:
        gate = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=api_url, timeout=30, limits=limits, verify=TLS) as client:

            async def one(queue: str) -> httpx.Response:
                async with gate:
                    return await client.post(
                        f"/api/v1/incr/{endpoint}/{queue}", json={"value": value}, headers={"X-Lab-Run": run}
                    )

            order = [q for i in range(max(per_queue.values())) for q, n in per_queue.items() if i < n]
            return await asyncio.gather(*(one(q) for q in order))

    return asyncio.run(post_all())


def post_accepted(api_url: str, run: str, per_queue: dict[str, int], endpoint: str = "io/simple", **kw) -> Counter:
    """post_to_queues, every request accepted (202), or the first refusals named."""
    responses = post_to_queues(api_url, run, per_queue, endpoint, **kw)
    codes = Counter(r.status_code for r in responses)
    refused = [f"{r.request.url.path}: {r.status_code} {r.text[:300]}" for r in responses if r.status_code != 202]
    assert codes == Counter({202: sum(per_queue.values())}), (codes, refused[:5])
    return codes


def post_tasks(
    api_url: str, run: str, queue: str, endpoint: str, count: int, value: int = 1, concurrency: int = 20
) -> list[httpx.Response]:
    """`count` tasks to one queue; every response."""
    return post_to_queues(api_url, run, {queue: count}, endpoint, value, concurrency)


def ledger(api_url: str, run: str) -> dict | None:
    r = HTTP.get(f"{api_url}/api/v1/runs/{run}", timeout=10)
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return r.json()


ACCOUNTED = ("enqueued", "completed", "pending", "value", "work")


def cell(report: dict, queue: str, keys: tuple[str, ...] = ACCOUNTED, shape: str = "io/simple") -> dict[str, int]:
    """The figures `keys` of one queue and task shape in a run's ledger report."""
    row = report["queues"][queue][shape]
    return {k: row[k] for k in keys}


def queue_depth(redis_url: str, queue: str) -> float:
    """A broker queue's backlog as the queue monitor reads it: its adapter's depth()."""

    async def read() -> float:
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await adapter(queue).depth(client)
        finally:
            await client.aclose()

    return asyncio.run(read())


def flower_lists_celery(flower_url: str) -> dict | None:
    """Flower's workers, once it lists a celery@ worker (it learns them from task
    events through Redis), else None."""
    r = HTTP.get(f"{flower_url}/api/workers", params={"refresh": "1"}, timeout=15)
    return r.json() if r.status_code == 200 and any(w.startswith("celery@") for w in r.json()) else None


def saq_ui_lists_a_worker(saq_ui_url: str) -> dict | None:
    """The SAQ UI's queues, once its one queue `lab` lists a worker, else None. SAQ's
    worker writes its info on a timer with a TTL (saq's Worker stats), so a worker
    started or busy a moment ago shows once its next write lands."""
    queues = HTTP.get(f"{saq_ui_url}/api/queues", timeout=10).json()
    assert [q["name"] for q in queues["queues"]] == ["lab"], queues
    return queues if queues["queues"][0]["workers"] else None


def wait_settled(api_url: str, run: str, total: int, timeout: float = 120, interval: float = 0.25) -> dict:
    """The run's ledger once all `total` tasks are enqueued and every one is
    completed or failed."""
    last: list[dict | None] = [None]

    def settled():
        report = last[0] = ledger(api_url, run)
        if report and report["totals"]["enqueued"] == total and report["totals"]["pending"] == 0:
            return report
        return None

    try:
        return wait_until(settled, timeout, f"run {run} to settle {total} tasks", interval=interval)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its ledger then: {last[0]}") from None
