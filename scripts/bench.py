"""`make bench`: what the lab costs next to each library on its own.

    uv run python -m scripts.bench [--worker arq|...|all] [--requests 3000] [--users 50] [--warmup 200]
                                   [--rounds 4] [--drain-s 30] [--drain-window-s 1]

For each queue, under the limits `make up` applied (read from the running
containers, never changed):
1. waits for the lab's queue to be empty (tasks left by earlier runs would be
   drained first, and spoil its drain), then stops the lab's worker of that
   queue, so both APIs' tasks wait in their queues;
2. drives the bare API (compose service `bench-api`, services/bare/api.py)
   and the lab's API at the same time, round after round, each round on a
   new process of each (both restarted), with the same requests (two
   services/bare/loadgen.py processes in the `bench-client` container), and
   samples each API's working-set memory and CPU from its
   cgroup meanwhile;
3. drains what each API enqueued: the bare worker (services/bare/worker.py)
   under the lab worker's limits and the lab's own worker, both started, run
   in turns of short windows while the other is paused, for --drain-s and
   400 tasks each at least (scripts/bench_drain.py); then the lab's worker empties its queue; for arq
   all this once more at ARQ_POLL_DELAY=0.01 s;
4. prints the table, writes results/bench-<time>.json (shown by `make results`)
   and starts the lab's worker again.
The budget (docs/bench.md): lab/bare >= 0.9 for RPS and drain,
and the lab API's peak at most 120 MB.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from lab.cgroup import cpu_seconds_of, memory_of
from lab.queues import BROKERS
from scripts import lab_results as R
from scripts.bench_drain import Counter, PairedDrain, Side, container_id, cpu_limit_lifted, pair_ratios, paused, spread
from scripts.compose import Compose, LoadError
from scripts.grafana import Grafana
from services.bare.queues import BARE, KEYS, done_key

QUEUES = ("background", *BARE)
LIMIT_KNOBS = {b.name: b.limits_prefix for b in BROKERS if b.name in BARE}
BUDGET_RATIO = 0.9
BUDGET_PEAK_MB = 120
FAST_ARQ_POLL = "0.01"
CGROUP = Path("/sys/fs/cgroup")


# -- Memory and CPU, read on the host from the container's cgroup (costs the container nothing) --
def _cgroup_dirs(container_id: str, v1_controller: str) -> tuple[Path, ...]:
    """Where a container's cgroup is: cgroup v1 (one tree per controller), then v2 (systemd or cgroupfs driver)."""
    return (
        CGROUP / v1_controller / "docker" / container_id,
        CGROUP / "system.slice" / f"docker-{container_id}.scope",
        CGROUP / "docker" / container_id,
    )


def working_set(container_id: str) -> float | None:
    """Bytes in use minus inactive page cache, as `docker stats` counts them."""
    for memory_dir in _cgroup_dirs(container_id, "memory"):
        if (memory := memory_of(memory_dir)) is not None:
            return memory[1]
    return None


def cpu_seconds(container_id: str) -> float | None:
    """CPU the container has used since it started, user and system."""
    for cpu_dir in _cgroup_dirs(container_id, "cpuacct"):
        if (seconds := cpu_seconds_of(cpu_dir)) is not None:
            return seconds
    return None


class PeakMemory(threading.Thread):
    def __init__(self, container_id: str, interval: float = 0.1):
        super().__init__(daemon=True)
        self.container_id, self.interval = container_id, interval
        self.peak: float | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            value = working_set(self.container_id)
            if value is not None:
                self.peak = max(self.peak or 0, value)
            self._done.wait(self.interval)

    def stop(self) -> float | None:
        self._done.set()
        self.join()
        return round(self.peak / (1 << 20), 1) if self.peak else None


# -- The bench ---------------------------------------------------------------------------
class Bench:
    def __init__(self, args: argparse.Namespace, compose: Compose, say=print):
        self.args, self.compose, self.say = args, compose, say
        self.stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        api = compose.inspect("api")
        if not api:
            raise LoadError("the lab is not running: make up first")
        self.api_limits = R.limits_of(api)
        self.api_env = R.env_of(api[0])
        self.mode = self.api_env.get("ENQUEUE_MODE", "await")
        self.workers: dict[str, list[dict]] = {}
        # The bench services get the limits the lab's containers really have.
        self.env = {
            "API_CPUS": str(self.api_limits["cpus"] or 0),
            "API_MEM": str(self.api_limits["memory_bytes"] or 0),
            "ENQUEUE_MODE": self.mode,
        }

    def worker_limits(self, queue: str) -> dict:
        containers = self.compose.inspect(queue)
        if not containers:
            raise LoadError(f"the lab's {queue} worker is not running: make up first")
        self.workers[queue] = containers
        limits = R.limits_of(containers, queue)
        prefix = LIMIT_KNOBS[queue]
        self.env.update({f"{prefix}_CPUS": str(limits["cpus"] or 0), f"{prefix}_MEM": str(limits["memory_bytes"] or 0)})
        for knob in R.KNOBS.get(queue, ()):  # the bare worker gets the lab worker's settings
            if knob in R.env_of(containers[0]):
                self.env[knob] = R.env_of(containers[0])[knob]
        return limits

    def client_up(self) -> None:
        """One load-generator container for the whole bench, each drive a `docker
        exec` in it: drives follow each other within a second, where a container
        start apiece put seconds, and the machine's drift, between them."""
        self.client_name = f"bench-client-{self.stamp}"
        self.compose(
            "run",
            "-d",
            "--rm",
            "--no-deps",
            "--name",
            self.client_name,
            "--entrypoint",
            "sleep",
            "bench-client",
            "infinity",
            extra_env=self.env,
            timeout=300,
        )

    def client_down(self) -> None:
        remove_container(self.client_name)

    def client(self, *args: str, timeout: float = 600) -> dict:
        try:
            proc = subprocess.run(
                ["docker", "exec", self.client_name, *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LoadError(f"`{' '.join(args)}` in the bench client did not finish within {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise LoadError(f"`{' '.join(args)}` in the bench client exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def drive(self, service: str, queue: str, run: str) -> dict:
        [container] = self.compose.ids(service)[:1] or [None]
        memory = PeakMemory(container) if container else None
        if memory:
            memory.start()
        cpu_before = cpu_seconds(container) if container else None
        state_before = api_state(container)
        url = f"http://{service}:8000/api/v1/incr/io/simple/{queue}"
        a = self.args
        began = time.time()
        result = self.client(
            "python",
            "-m",
            "services.bare.loadgen",
            url,
            "--requests",
            str(a.requests),
            "--users",
            str(a.users),
            "--warmup",
            str(a.warmup),
            *(["--run", run] if run else []),
        )
        if memory:
            result["api_peak_mb"] = memory.stop()
        if down := api_down(state_before, api_state(container)):
            result["api_down"] = down  # its CPU counter went with it: no CPU figure
        # The API's own CPU over the whole drive, warm-up included: what the
        # lab costs per request, read directly, where RPS also carries the
        # quota's scheduling and the machine's other work.
        elif cpu_before is not None and (cpu_after := cpu_seconds(container)) is not None:
            result["api_cpu_s"] = round(cpu_after - cpu_before, 4)
        result["window"] = [round(began, 1), round(time.time(), 1)]  # for Prometheus: the event-loop lag meanwhile
        result["api_started"] = (state_before or {}).get("StartedAt")  # a new process each round
        return result

    def wait_for_empty(self, queue: str) -> None:
        """The lab's queue must start empty: its worker would drain what an
        earlier run left there before this run's tasks, and its drain figure
        would be wrong without a word. The worker, still running, gets
        --backlog-wait-s to empty it."""
        deadline = time.monotonic() + self.args.backlog_wait_s
        while True:
            depth = self.client("python", "-m", "services.bare.drain", "--backlog", queue)["depth"]
            if depth == 0:
                return
            if time.monotonic() >= deadline:
                raise LoadError(
                    f"the lab's {queue} queue still holds {depth} tasks from before the bench, and its "
                    f"drain would count them first: let its worker empty it (lab_queue_depth), "
                    f"then run make bench again"
                )
            self.say(f"[{queue}] the lab's queue holds {depth} tasks from before the bench: waiting for its worker")
            time.sleep(5)

    def restart_apis(self, queue: str) -> None:
        """A new process of each API before each round. A process's speed is
        partly a draw (where its memory landed, say) that it keeps for all its
        drives, so one bench with one process of each read the draw as the
        lab's cost. Fresh processes each round make the rounds independent
        draws, and their mean carries that spread halved (docs/bench.md). The lab's
        API is ready once its producer of the queue is (the library imported), as
        the bare API's is at its start."""
        self.compose("restart", "bench-api", "api", extra_env=self.env, timeout=300)
        for service, path in (("bench-api", "/healthz"), ("api", f"/readyz?queues={queue}")):
            if not self.compose.answers(service, 8000, path, every_s=0.2):
                raise LoadError(f"{service} did not answer within 60 s of its restart: docker compose logs {service}")

    def redis(self, *command: str) -> str:
        return self.compose("exec", "-T", "redis", "redis-cli", *command, timeout=60).stdout.strip()

    def bench_queue(self, queue: str) -> dict:
        say, c = self.say, self.compose
        row: dict = {"queue": queue}
        if queue != "background":
            row["worker_limits"] = self.worker_limits(queue)
            self.wait_for_empty(queue)
            say(f"[{queue}] stopping the lab's {queue} worker: the tasks wait in the queue")
            c("stop", queue, timeout=120)
        self.redis("DEL", done_key(queue), *KEYS)
        say(f"[{queue}] starting bench-api ({R.limit_text(self.api_limits)}, ENQUEUE_MODE={self.mode})")
        c("up", "-d", "--no-deps", "bench-api", extra_env=self.env, timeout=300)
        run = f"bench-{self.stamp}-{queue}"
        rounds: dict[str, list[dict]] = {"bare": [], "lab": []}
        apis = {
            "bare": (f"bare API, {self.args.requests} requests at concurrency {self.args.users}", "bench-api", ""),
            "lab": (f"lab API (run {run})", "api", run),
        }
        # Both APIs are driven at the same moment, each by its own client
        # process: both then meet the same machine, and a round's ratio no longer
        # moves with the machine's speed from one drive to the next (docs/bench.md).
        with ThreadPoolExecutor(2) as pool:
            for i in range(self.args.rounds):
                self.restart_apis(queue)
                say(
                    f"[{queue}] round {i + 1}/{self.args.rounds}: {apis['bare'][0]}, and the {apis['lab'][0]}"
                    f" at the same time ..."
                )
                drives = {
                    side: pool.submit(self.drive, service, queue, side_run)
                    for side, (_, service, side_run) in apis.items()
                }
                for side, drive in drives.items():
                    rounds[side].append(drive.result())
        row["bare"], row["lab"] = combine(rounds["bare"]), combine(rounds["lab"])
        row["run"] = run
        bare_target = row["bare"]["enqueued"]
        lab_target = row["lab"]["enqueued"]
        if queue == "background":  # ran inside the APIs; nothing to drain
            c("rm", "--stop", "--force", "bench-api", check=False, timeout=120)
            return row
        if self.mode == "after-response":  # a 202 came before its publish: count what was published
            drain = lambda *question: self.client("python", "-m", "services.bare.drain", *question)
            lab_target = row["lab"]["published"] = settled_count(
                lambda: drain("--published", run)["enqueued"], lab_target
            )
            bare_target = row["bare"]["published"] = settled_count(
                lambda: drain("--bare-backlog", queue)["depth"], bare_target
            )
        counter = Counter(self.client_name, done_key(queue), run)
        try:
            self.drain_queue(queue, row, counter, bare_target, lab_target)
        finally:
            counter.close()
            # The bare API stays up through the drain: a backlog too short for it is topped up through both APIs.
            c("rm", "--stop", "--force", "bench-api", check=False, timeout=120)
        return row

    def top_up(self, queue: str, run: str, n: int) -> dict[str, int]:
        """n more tasks into each side's queue, through each side's own API at the same time (the workers
        frozen meanwhile); the tasks each API accepted."""
        apis = {"bare": ("bench-api", ""), "lab": ("api", run)}
        with ThreadPoolExecutor(2) as pool:
            drives = {
                side: pool.submit(
                    self.client,
                    "python",
                    "-m",
                    "services.bare.loadgen",
                    f"http://{service}:8000/api/v1/incr/io/simple/{queue}",
                    "--requests",
                    str(n),
                    "--users",
                    str(self.args.users),
                    "--warmup",
                    "0",
                    *(["--run", side_run] if side_run else []),
                )
                for side, (service, side_run) in apis.items()
            }
            return {side: drive.result()["ok"] for side, drive in drives.items()}

    def paired(self, counter: Counter, bare: Side, lab: Side, queue: str, run: str) -> PairedDrain:
        a = self.args
        top_up = lambda n: self.top_up(queue, run, n)
        return PairedDrain(counter, bare, lab, cpu_seconds, sides, a.drain_window_s, a.drain_s, self.say, top_up)

    def drain_queue(self, queue: str, row: dict, counter: Counter, bare_target: int, lab_target: int) -> None:
        """The bare worker and the lab's drain in turns (scripts/bench_drain.py); then the lab's empties its queue."""
        c, bench_svc = self.compose, f"bench-{queue}"
        bare_start = lambda *extra: (
            lambda: c(
                "up",
                "-d",
                "--no-deps",
                "--force-recreate",
                bench_svc,
                extra_env={**self.env, **dict(extra)},
                timeout=300,
            )
        )
        bare = lambda *extra: Side("bare", bare_target, bare_start(*extra), lambda: c.ids(bench_svc))
        lab = Side(
            "lab",
            lab_target,
            lambda: c("start", queue, timeout=120),
            lambda: c.ids(queue),
        )
        self.say(f"[{queue}] drains: the bare worker and the lab's, in turns ({bare_target} and {lab_target} tasks)")
        drain = self.paired(counter, bare(), lab, queue, row["run"])
        try:
            paused_from = time.time()
            with paused(c.ids("prometheus")):  # the whole drain: scripts/bench_drain.py
                result = drain.run()
            row["prometheus_paused"] = [round(paused_from, 1), round(time.time(), 1)]
        finally:
            c("rm", "--stop", "--force", bench_svc, check=False, timeout=120)
        row["drain_window_s"], row["bare_drain"], row["lab_drain"] = result["window_s"], result["bare"], result["lab"]
        row["drain_topped_up"] = result["topped_up"]
        # What each queue now holds in all, top-ups included: the fast arq drain below goes on from there.
        bare_target, lab_target = drain.sides["bare"].target, lab.target
        if queue != "arq":
            self.say(f"[{queue}] the lab's worker empties its queue (not measured; its CPU limit lifted meanwhile) ...")
            with cpu_limit_lifted(c.ids(queue)):
                drain.wait_until_done(lab)
            return
        # arq once more at ARQ_POLL_DELAY=0.01, on what is left of both queues;
        # the lab's at that setting is a one-off container beside the stopped service.
        c("stop", queue, timeout=120)
        say_fast = f"[arq] again at ARQ_POLL_DELAY={FAST_ARQ_POLL}"
        self.say(say_fast)
        name = f"bench-lab-arq-{self.stamp}"
        one_off = lambda: c(
            "run",
            "-d",
            "--rm",
            "--no-deps",
            "--name",
            name,
            "-e",
            f"ARQ_POLL_DELAY={FAST_ARQ_POLL}",
            "arq",
            extra_env=self.env,
        )
        fast_lab = Side("lab", lab_target, one_off, lambda: container_id(name))
        fast = self.paired(counter, bare(("ARQ_POLL_DELAY", FAST_ARQ_POLL)), fast_lab, queue, row["run"])
        try:
            with paused(c.ids("prometheus")):
                result = fast.run()
            row["drain_window_s_fast"], row["bare_drain_fast"], row["lab_drain_fast"] = (
                result["window_s"],
                result["bare"],
                result["lab"],
            )
            row["drain_topped_up_fast"] = result["topped_up"]
            self.say(f"{say_fast}: the lab's one-off worker empties its queue (not measured) ...")
            fast.wait_until_done(fast_lab)
        finally:
            c("rm", "--stop", "--force", bench_svc, check=False, timeout=120)
            remove_container(name)
            c("start", queue, check=False, timeout=120)

    def run(self, queues: list[str]) -> dict:
        rows = []
        self.client_up()
        try:
            for queue in queues:
                rows.append(self.bench_queue(queue))
        finally:
            self.client_down()
            self.compose(
                "rm", "--stop", "--force", "bench-api", *(f"bench-{q}" for q in LIMIT_KNOBS), check=False, timeout=120
            )
            for queue in queues:
                if queue != "background":
                    self.compose("start", queue, check=False, timeout=120)
        return {
            "schema": SCHEMA,
            "run": f"bench-{self.stamp}",
            "time": datetime.now().isoformat(timespec="seconds"),
            "mode": self.mode,
            "blocking_publish": self.api_env.get("BLOCKING_PUBLISH", "inline"),
            "requests": self.args.requests,
            "users": self.args.users,
            "warmup": self.args.warmup,
            "api_drives": "together",
            "api_limits": self.api_limits,
            "worker_limits": {q: R.limits_of(cs, q) for q, cs in self.workers.items()},
            "knobs": {q: R.knobs_of(cs, q) for q, cs in self.workers.items()},
            "rows": rows,
        }


def api_state(container_id: str | None) -> dict | None:
    """The container's state as `docker inspect` has it, or None if it is gone."""
    if container_id is None:
        return None
    proc = subprocess.run(
        ["docker", "inspect", "--format", "{{json .State}}", container_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def api_down(before: dict | None, after: dict | None) -> str | None:
    """Why an API stopped answering during a drive, or None if it ran throughout.
    The bare API's plain BackgroundTasks keep no bound on the tasks that wait
    to run after their responses: under 0.2 CPU / 200M it has been killed at
    its memory limit. The bench's API does not restart (docker-compose.yml),
    so such a kill shows here and in the record; a container that did restart
    (the lab's API) is a new process whose CPU counter started again at zero."""
    if after is None:
        return "not running"
    if after.get("Running"):
        return "restarted" if before and before.get("StartedAt") != after.get("StartedAt") else None
    if after.get("OOMKilled"):
        return "killed at its memory limit (OOM)"
    return f"exited with code {after.get('ExitCode')}"


def remove_container(name: str) -> None:
    """A container started by name (`run --name`): gone, running or not, and no error if it never was."""
    subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False, timeout=120)


def sides(i: int) -> tuple[str, str]:
    """Which drain window goes first in pair i (scripts/bench_drain.py):
    bare, lab, then lab, bare, and so on. A machine that drifts steadily over
    a bench (the same bare worker's drain fell here from 141 to 98 tasks/s in
    ten minutes) then costs both sides alike; bare first in every pair charged
    the whole drift to the lab."""
    return ("bare", "lab") if i % 2 == 0 else ("lab", "bare")


def settled_count(read: Callable[[], int], accepted: int, stall_s: float = 5.0, every_s: float = 0.5) -> int:
    """In `after-response` mode a 202 promises nothing (docs/api.md, "Enqueue modes"). A
    lab publish that fails after its answer (a Redis timeout under the CPU
    quota) is counted in lab_enqueue_errors_total, not in the ledger, and left
    the lab's drain waiting for a task that never came; a bare API killed at
    its memory limit takes every publish still waiting in its BackgroundTasks
    with it, and its worker's drain ran dry in windows counted as measured.
    Each side's drain target is therefore what it really published (the lab's
    ledger, the bare queue's length), read once all `accepted` are in or once
    the count has not moved for `stall_s`; the notes show any difference."""
    last, last_at = -1, time.monotonic()
    while (count := read()) < accepted:
        if count != last:
            last, last_at = count, time.monotonic()
        elif time.monotonic() - last_at >= stall_s:
            break
        time.sleep(every_s)
    return count


def combine(rounds: list[dict]) -> dict:
    """Several rounds of one API as one result: RPS over all measured requests,
    latency percentiles as the mean of the rounds', memory at its highest."""
    ok, elapsed = sum(r["ok"] for r in rounds), sum(r["elapsed_s"] for r in rounds)
    mean = lambda key: (
        round(sum(r[key] for r in rounds) / len(rounds), 1) if all(r.get(key) is not None for r in rounds) else None
    )
    peaks = [r["api_peak_mb"] for r in rounds if r.get("api_peak_mb")]
    sent = sum(r["requests"] + r.get("warmup", 0) for r in rounds)
    cpu = sum(r["api_cpu_s"] for r in rounds) if all(r.get("api_cpu_s") is not None for r in rounds) else None
    return {
        "requests": sum(r["requests"] for r in rounds),
        "ok": ok,
        "errors": sum(r["errors"] for r in rounds),
        "statuses": {
            s: sum(r["statuses"].get(s, 0) for r in rounds) for s in {s for r in rounds for s in r["statuses"]}
        },
        "enqueued": ok + sum(r.get("warmup_ok", 0) for r in rounds),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else None,
        "rps_rounds": [r["rps"] for r in rounds],
        "windows": [r["window"] for r in rounds],
        "api_started": [r.get("api_started") for r in rounds],
        "p50_ms": mean("p50_ms"),
        "p95_ms": mean("p95_ms"),
        "api_peak_mb": max(peaks) if peaks else None,
        "api_cpu_us_per_request": round(cpu / sent * 1e6) if cpu is not None and sent else None,
        "generator_cpu": max(r["generator_cpu"] or 0 for r in rounds),
        "generator_bound": any(r["generator_bound"] for r in rounds),
        "api_down": [f"round {i}: {r['api_down']}" for i, r in enumerate(rounds, 1) if r.get("api_down")],
    }


# -- The table -----------------------------------------------------------------------------
def _ratio(lab, bare) -> float | None:
    """lab / bare to two places, rounded down: the ✗ is judged on the figure
    shown, and 0.899 must not show as a 0.9 that meets the budget."""
    return math.floor(lab / bare * 100 + 1e-9) / 100 if lab and bare else None


def _by_round(what: str, bare_rounds, lab_rounds) -> list[str]:
    """Each round's lab / bare ratio (round i of one side ran next to round i of
    the other). Driven together, one round's RPS ratio moves by about 0.02 about
    its mean here, so rounds spread much wider say the machine was not quiet;
    one drain window's ratio moves far more (_drain_pairs)."""
    if not bare_rounds or not lab_rounds or len(bare_rounds) != len(lab_rounds) or len(bare_rounds) < 2:
        return []
    ratios = [_ratio(lab, bare) for bare, lab in zip(bare_rounds, lab_rounds)]
    return [f"{what} ratio by round {', '.join('-' if r is None else f'{r:g}' for r in ratios)}"]


def _drain_pairs(bare_rounds, lab_rounds) -> list[str]:
    """Drains in windows taken in turns (scripts/bench_drain.py): the median and
    range of the pairs' ratios; records of two rounds list each round's."""
    if bare_rounds and lab_rounds and len(bare_rounds) == len(lab_rounds) > 4:
        return [f"drain pairs {spread(pair_ratios(bare_rounds, lab_rounds))}"]
    return _by_round("drain", bare_rounds, lab_rounds)


# A window in which a worker used less than this share of its CPU quota was
# not held back by its CPU: its rate there says how the library schedules
# tasks, not what a task costs.
CPU_BOUND_SHARE = 0.8


def _idle_windows(drain: dict, cpus) -> int:
    """How many of a side's windows its worker spent partly idle (see CPU_BOUND_SHARE)."""
    if not cpus:
        return 0
    return sum(
        1
        for w in drain.get("windows") or []
        if w.get("cpu_s") is not None and w.get("s") and w["cpu_s"] / w["s"] / cpus < CPU_BOUND_SHARE
    )


def _not_cpu_bound(bare: dict, lab: dict, cpus) -> list[str]:
    """A note for a drain whose windows were not all CPU-bound. arq at
    ARQ_POLL_DELAY=0.01 under 0.5 CPU runs at one of two rates: flat out, or,
    sleeping between polls with its few jobs done, at about half of it and
    half its quota; which one, from one window to the next, is the quota's
    timing. Its ratio then compares two schedules, and the CPU per task is
    what says what the lab costs."""
    idle = [
        f"{name} {n} of {len(drain['windows'])}"
        for name, drain in (("bare", bare), ("lab", lab))
        if (n := _idle_windows(drain, cpus))
    ]
    return [f"windows not CPU-bound (under {CPU_BOUND_SHARE:.0%} of the quota): {', '.join(idle)}"] if idle else []


def _drain_cell(b: dict, l: dict, cpus) -> str:
    """The drain ratio, marked ✗ under budget. A rate under budget from
    workers whose windows were not all CPU-bound is judged again on the CPU
    each side spent per task (bare ÷ lab: the ratio two CPU-bound workers
    would show), written beside it: such a rate says how the library
    scheduled its tasks in those windows. arq at ARQ_POLL_DELAY=0.01 under
    0.5 CPU read 0.77 in one bench and 1.13 in the next; in the first its lab
    worker spent 1.07 times the bare one's CPU per task. (A rate at or above
    budget needs no second figure: arq at its default polling spends most of
    its CPU idle, and its CPU per task says nothing about a task.)"""
    d_ratio = _ratio(l.get("rate"), b.get("rate"))
    cpu_ratio = _ratio(b.get("cpu_us_per_task"), l.get("cpu_us_per_task"))
    if (d_ratio or 0) >= BUDGET_RATIO or cpu_ratio is None or not (_idle_windows(b, cpus) or _idle_windows(l, cpus)):
        return _mark(d_ratio, (d_ratio or 0) >= BUDGET_RATIO)
    return _or_dash(d_ratio) + f" (CPU {cpu_ratio:g})" + ("" if cpu_ratio >= BUDGET_RATIO else " ✗")


def _or_dash(value) -> str:
    return "-" if value is None else f"{value:g}"


def _mark(value, ok) -> str:
    return _or_dash(value) + ("" if ok or value is None else " ✗")


SCHEMA = "bench/1"
HEADER = (
    "| queue | mode | API / worker limits | bare RPS | lab RPS | RPS ratio | API CPU µs/request bare / lab "
    "| bare p50/p95 ms | lab p50/p95 ms "
    "| bare API peak MB | lab API peak MB | bare drain/s | lab drain/s | drain ratio | worker CPU µs/task bare / lab "
    "| notes | run |\n"
    "|---|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|"
)


def table(records: list[dict]) -> str:
    return "\n".join([HEADER, *(line for record in records for line in rows(record))])


def _row_notes(bare: dict, lab: dict) -> list[str]:
    """What the notes column says of a queue's load, bare and lab: generator, errors, publishing, rounds."""
    notes = []
    if bare.get("generator_bound") or lab.get("generator_bound"):
        notes.append("generator CPU-bound")
    if bare.get("errors") or lab.get("errors"):
        notes.append(f"errors bare {bare.get('errors', 0)} / lab {lab.get('errors', 0)}")
    for side, result, where in (("bare", bare, "never in its queue"), ("lab", lab, "lab_enqueue_errors_total")):
        if result.get("published") is not None and result["published"] < result.get("enqueued", 0):
            notes.append(
                f"{side}: {result['enqueued'] - result['published']} of {result['enqueued']} "
                f"accepted tasks not published ({where})"
            )
        if result.get("api_down"):  # the first round it was seen down says when and why
            notes.append(f"{side} API down from {result['api_down'][0]}")
    notes += _by_round("RPS", bare.get("rps_rounds"), lab.get("rps_rounds"))
    return notes


def _load_cells(bare: dict, lab: dict) -> tuple[str, ...]:
    """The load's cells, bare beside lab: RPS and its ratio, API CPU per request, latency, API memory."""
    rps_ratio = _ratio(lab.get("rps"), bare.get("rps"))
    lab_peak = lab.get("api_peak_mb")
    return (
        f"{bare.get('rps', '-')}",
        f"{lab.get('rps', '-')}",
        _mark(rps_ratio, (rps_ratio or 0) >= BUDGET_RATIO),
        f"{bare.get('api_cpu_us_per_request') or '-'} / {lab.get('api_cpu_us_per_request') or '-'}",
        f"{bare.get('p50_ms', '-')}/{bare.get('p95_ms', '-')}",
        f"{lab.get('p50_ms', '-')}/{lab.get('p95_ms', '-')}",
        f"{bare.get('api_peak_mb', '-')}",
        _mark(lab_peak, (lab_peak or 0) <= BUDGET_PEAK_MB),
    )


def _row_line(record: dict, row: dict, suffix: str, label: str, extra_notes: list[str]) -> str:
    """One table row: a labelled row (the fast drain) has the drain's cells only."""
    q, bare, lab = row["queue"], row.get("bare") or {}, row.get("lab") or {}
    api = R.limit_text(record.get("api_limits"))
    limits = f"{api} / {R.limit_text(row.get('worker_limits')) if row.get('worker_limits') else '-'}"
    b, l = row.get(f"bare_drain{suffix}") or {}, row.get(f"lab_drain{suffix}") or {}
    cpus = (row.get("worker_limits") or {}).get("cpus")
    cells = [
        q + label,
        record.get("mode", ""),
        limits,
        *(_load_cells(bare, lab) if not label else ("", "", "", "", "", "", "", "")),
        _or_dash(b.get("rate")),
        _or_dash(l.get("rate")),
        _drain_cell(b, l, cpus) if b else "-",
        f"{b.get('cpu_us_per_task') or '-'} / {l.get('cpu_us_per_task') or '-'}" if b else "-",
        "; ".join(extra_notes + _drain_pairs(b.get("rate_rounds"), l.get("rate_rounds")) + _not_cpu_bound(b, l, cpus))
        or "",
        record.get("run", ""),
    ]
    return "| " + " | ".join(str(x) for x in cells) + " |"


def rows(record: dict) -> list[str]:
    """One row per queue (arq twice): RPS, latency, API memory and drain, bare beside lab.
    A ratio below the budget is marked ✗."""
    lines = []
    for row in record["rows"]:
        notes = _row_notes(row.get("bare") or {}, row.get("lab") or {})
        arq_note = [R.arq_cap(record.get("knobs") or {})] if row["queue"] == "arq" else []
        lines.append(_row_line(record, row, "", "", arq_note + notes))
        if "bare_drain_fast" in row:
            lines.append(_row_line(record, row, "_fast", f" (ARQ_POLL_DELAY={FAST_ARQ_POLL})", []))
    return lines


def ratios(record: dict) -> list[dict]:
    """Each queue's figures of a bench in a few fields (`make results`, `make
    compare`): the lab's RPS and drain rate against the bare app's (lab ÷ bare,
    rounded down as in the table), and each side's CPU per request and per task."""
    out = []
    for row in record.get("rows", []):
        bare, lab = row.get("bare") or {}, row.get("lab") or {}
        b, l = row.get("bare_drain") or {}, row.get("lab_drain") or {}
        out.append(
            {
                "queue": row["queue"],
                "run": record.get("run"),
                "time": record.get("time"),
                "mode": record.get("mode"),
                "api_limits": R.limit_text(record.get("api_limits")),
                "worker_limits": R.limit_text(row.get("worker_limits")) if row.get("worker_limits") else "-",
                "rps_ratio": _ratio(lab.get("rps"), bare.get("rps")),
                "drain_ratio": _ratio(l.get("rate"), b.get("rate")),
                "api_cpu_us_per_request": [bare.get("api_cpu_us_per_request"), lab.get("api_cpu_us_per_request")],
                "worker_cpu_us_per_task": [b.get("cpu_us_per_task"), l.get("cpu_us_per_task")],
            }
        )
    return out


def short_table(record: dict) -> str:
    """One bench as `make results` shows it by default: its ratios, ✗ under the budget."""
    lines = [
        "| queue | mode | API / worker limits | RPS lab/bare | drain lab/bare | run |",
        "|---|---|---|---:|---:|---|",
    ]
    for r in ratios(record):
        rps, drain = r["rps_ratio"], r["drain_ratio"]
        lines.append(
            f"| {r['queue']} | {r['mode']} | {r['api_limits']} / {r['worker_limits']} "
            f"| {_mark(rps, (rps or 0) >= BUDGET_RATIO)} | {_mark(drain, (drain or 0) >= BUDGET_RATIO)} | {r['run']} |"
        )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--worker", default="all", help="a queue, or all (default)")
    p.add_argument("--requests", type=int, default=3000, help="requests per API and queue (default 3000)")
    p.add_argument("--users", type=int, default=50, help="concurrent connections (default 50)")
    p.add_argument("--warmup", type=int, default=200, help="requests sent first, not measured (default 200)")
    p.add_argument(
        "--rounds", type=int, default=4, help="rounds of the bare and the lab API driven at the same time (default 4)"
    )
    p.add_argument(
        "--drain-s",
        type=float,
        default=30,
        help="how long each worker's drain is measured, in windows taken in turns (default 30 s); "
        "the lab's queue is emptied regardless",
    )
    p.add_argument(
        "--drain-window-s",
        type=float,
        default=1.0,
        help="the shortest drain window (default 1 s; longer if it would hold under 40 tasks)",
    )
    p.add_argument(
        "--backlog-wait-s",
        type=float,
        default=120,
        help="how long a lab queue's earlier backlog may take to empty before the bench gives up (default 120 s)",
    )
    p.add_argument("--results-dir", default="results")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    queues = list(QUEUES) if args.worker == "all" else [args.worker]
    if any(q not in QUEUES for q in queues):
        print(f"make bench: worker {args.worker}: one of {', '.join(QUEUES)} or all", file=sys.stderr)
        return 2
    compose = Compose(profile="bench")
    started = time.time()
    try:
        record = Bench(args, compose).run(queues)
    except LoadError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    ended = time.time()
    # The bench in Grafana: one region over its whole window, and the API dashboard there.
    grafana = Grafana(compose)
    body = R.annotation(
        "end",
        record["run"],
        args.worker,
        "io/simple",
        args.users,
        R.limit_text(record["api_limits"]),
        "-",
        ended,
        duration_s=ended - started,
        tag="bench",
    )
    if problem := grafana.problem or grafana.annotate(body):
        print(problem)
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{record['run']}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print()
    print(table([record]))
    print(f"\nrecorded in {path}")
    if link := grafana.run_link("api", started, ended):
        print(f"Grafana, this bench: {link}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
