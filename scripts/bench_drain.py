"""The drain half of `make bench`: the bare worker and the lab's, in turns of short windows.

Both workers are started on their own backlog, but only one runs at a time:
the other sits in `docker pause` (its cgroup frozen: no CPU, its connections,
read-ahead and half-done tasks kept as they were). A window thaws one side for
`window_s`, freezes it again, and counts what it did meanwhile: the tasks it
finished (read from Redis while both sides are frozen, so the count cannot
move under the reading) and the CPU its containers used (their cgroup).

Sides take turns, bare-lab then lab-bare (bench.sides), so the two windows of a
pair run seconds apart. Drains measured one after the other, minutes apart,
moved the same bare worker's rate by up to 30 % between two benches, three
times the budget; a drift that slow moves both windows of a pair alike.

Prometheus stays frozen for the whole drain (bench.py, `paused`): a scrape
that times out against a frozen worker stays queued on its socket and is
answered when the worker thaws, so a lab window would also pay for the bare
window's scrapes; and Prometheus thawed with the lab's side alone put its
scrapes of the whole stack, and their CPU on the host's cores, into the
lab's windows only (docs/results/2026-11-28-a-quiet-drain.md). The drain's
figures therefore leave out what the lab's worker spends on being scraped
(docs/metrics.md, "What a scrape costs").

A window holds at least MIN_TASKS_PER_WINDOW tasks (arq at its default polling
gets longer windows), each side is measured over at least MIN_TASKS_MEASURED
tasks (RQ, forking a process per task, takes longer than `measure_s` to
reach them), and the drain stops before a window would find its
backlog empty, so every window measures a worker that had work throughout.

The drain is a length, not a count: once both sides are warm (their rates
known), a backlog too short for the windows planned is topped up, the same
number of tasks on each side (`top_up`, through each side's own API), so a
faster machine measures as many windows as a slower one.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from scripts.compose import LoadError

WARM_S = 1.0  # a side runs this long after its first task before it is measured: imports, connections, caches
MIN_TASKS_PER_WINDOW = 40
MIN_TASKS_MEASURED = 400  # per side: a slow worker does few tasks in measure_s, and their ratio moves bench to bench
MIN_PAIRS = 4  # arq at its default polling: windows of 6 s, and a ratio that needs several of them
START_TIMEOUT_S = 120  # a worker's container start and imports, at 0.2 CPU
EMPTY_TIMEOUT_S = 600
STALL_S = 30


@dataclass
class Side:
    """One worker under the drain clock: how to start it, where its containers are, what it must do."""

    name: str  # "bare" or "lab": its key in the counter's answers
    target: int  # tasks waiting for it in all
    start: Callable[[], object]
    containers: Callable[[], list[str]]
    ids: list[str] = field(default_factory=list)
    done: int = 0
    rate: float = 0.0  # its last rate, for the next window's length and whether its backlog lasts
    windows: list[dict] = field(default_factory=list)


class Counter:
    """services/bare/drain.py --watch in the bench's client container, kept up for the whole drain."""

    def __init__(self, client: str, counter: str, run: str):
        cmd = [
            "docker",
            "exec",
            "-i",
            client,
            "python",
            "-m",
            "services.bare.drain",
            "--watch",
            "--counter",
            counter,
            "--ledger-run",
            run,
        ]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def __call__(self) -> dict[str, int]:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise LoadError(f"the drain counter exited: {self.proc.stderr.read()[-2000:]}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def container_id(name: str) -> list[str]:
    """The full id of a container started by name: its cgroup is named by it."""
    proc = subprocess.run(
        ["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True, timeout=60, check=False
    )
    return proc.stdout.split() if proc.returncode == 0 else []


@contextmanager
def paused(ids: list[str]) -> Iterator[None]:
    """The containers frozen meanwhile (`docker pause`), then thawed."""
    for cid in ids:
        docker("pause", cid)
    try:
        yield
    finally:
        for cid in ids:
            docker("unpause", cid)


@contextmanager
def cpu_limit_lifted(ids: list[str]) -> Iterator[None]:
    """The containers may use every core of the host meanwhile, then get their own limit back.

    For the unmeasured tail of a drain: a queue that runs a few tasks a second
    under its limit (RQ forks a work horse per job) would otherwise keep the
    bench waiting for many minutes on tasks nobody measures."""
    limits = {}
    for cid in ids:
        proc = subprocess.run(
            ["docker", "inspect", "-f", "{{.HostConfig.NanoCpus}}", cid],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        limits[cid] = int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0
    for cid in ids:
        docker("update", "--cpus", str(os.cpu_count() or 1), cid)
    try:
        yield
    finally:
        for cid, nano in limits.items():
            if nano:
                docker("update", "--cpus", f"{nano / 1e9:g}", cid)


def docker(*args: str, tries: int = 5) -> None:
    """A docker command; `pause` and `unpause` are given one container each: a
    retried call on several could read as done on one's "already paused"
    while another still failed to freeze."""
    for attempt in range(tries):
        proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode == 0 or "is not paused" in proc.stderr or "is already paused" in proc.stderr:
            return
        # The cgroup freezer gives up on a container whose processes fork as it
        # freezes them (RQ forks a work horse per job): try again.
        if "unable to freeze" not in proc.stderr or attempt == tries - 1:
            raise LoadError(f"docker {' '.join(args)}: {proc.stderr.strip()}")
        time.sleep(0.1)


class PairedDrain:
    def __init__(
        self,
        counter: Counter,
        bare: Side,
        lab: Side,
        cpu_seconds: Callable[[str], float | None],
        sides: Callable[[int], tuple[str, str]],
        window_s: float = 1.0,
        measure_s: float = 30.0,
        say=print,
        top_up: Callable[[int], dict[str, int]] | None = None,
    ):
        self.counter, self.sides, self.cpu_seconds, self.order = counter, {"bare": bare, "lab": lab}, cpu_seconds, sides
        self.window_s, self.measure_s, self.say = window_s, measure_s, say
        # top_up(n): n more tasks into each side's queue; what each side's queue really got.
        self.top_up = top_up
        self.topped_up: dict[str, int] = {}

    def cpu(self, side: Side) -> float | None:
        values = [self.cpu_seconds(i) for i in side.ids]
        return None if any(v is None for v in values) else sum(values)

    def warm(self, side: Side) -> None:
        """Start a side, let it run WARM_S past its first task, freeze it."""
        base = self.counter()[side.name]
        side.start()
        side.ids = side.containers()
        if not side.ids:
            raise LoadError(f"the {side.name} worker did not start")
        deadline = time.monotonic() + START_TIMEOUT_S
        while (first := self.counter()[side.name]) == base:
            if time.monotonic() > deadline:
                raise LoadError(f"the {side.name} worker finished no task within {START_TIMEOUT_S} s of its start")
            time.sleep(0.1)
        began = time.monotonic()
        time.sleep(WARM_S)
        self.freeze(side)
        side.done = self.counter()[side.name]
        side.rate = (side.done - first) / (time.monotonic() - began)

    # One container per docker call, and the window's clock runs over the
    # side's own pause and unpause.
    def freeze(self, side: Side) -> tuple[float, float]:
        began = time.perf_counter()
        for container in side.ids:
            docker("pause", container)
        return began, time.perf_counter()

    def thaw(self, side: Side) -> tuple[float, float]:
        began = time.perf_counter()
        for container in side.ids:
            docker("unpause", container)
        return began, time.perf_counter()

    def window(self, side: Side, length: float) -> None:
        cpu_before, done_before = self.cpu(side), side.done
        a, b = self.thaw(side)
        time.sleep(length)
        c, d = self.freeze(side)
        side.done = self.counter()[side.name]
        cpu_after = self.cpu(side)
        seconds = (c + d) / 2 - (a + b) / 2  # from half-way through the thaw to half-way through the freeze
        tasks = side.done - done_before
        side.rate = tasks / seconds
        side.windows.append(
            {
                "tasks": tasks,
                "s": round(seconds, 3),
                "thaw_freeze_s": round((b - a) + (d - c), 3),  # its own containers' pause and unpause
                "cpu_s": None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 4),
            }
        )

    def lasts(self, side: Side, length: float) -> bool:
        """Its backlog holds another window's work with room to spare."""
        return side.target - side.done > 1.5 * max(side.rate, 1.0) * length

    def fill(self, pairs: int, length: float) -> None:
        """Both backlogs made to last every window planned (and the spare `lasts` asks), with room for a
        rate above the warm-up's: what the shorter one lacks is added to each, through top_up."""
        need = {
            side.name: math.ceil(1.5 * max(side.rate, 1.0) * length * (pairs + 1.5)) - (side.target - side.done)
            for side in self.sides.values()
        }
        short = max(need.values())
        if short <= 0 or self.top_up is None:
            return
        self.say(f"  the backlogs would not last {pairs} pairs of windows: {short} more tasks on each side ...")
        added = self.top_up(short)
        for name, n in added.items():
            self.sides[name].target += n
            self.topped_up[name] = self.topped_up.get(name, 0) + n

    def run(self) -> dict:
        bare, lab = self.sides["bare"], self.sides["lab"]
        try:
            for side in (bare, lab):
                self.say(f"  starting the {side.name} worker ({side.target - side.done} tasks wait for it) ...")
                self.warm(side)
            slowest = max(min(bare.rate, lab.rate), 0.1)
            length = max(self.window_s, MIN_TASKS_PER_WINDOW / slowest)
            pairs = max(MIN_PAIRS, round(self.measure_s / length), math.ceil(MIN_TASKS_MEASURED / (slowest * length)))
            self.fill(pairs, length)
            self.say(f"  {pairs} pairs of {length:.1f} s windows at most, in turns ...")
            for i in range(pairs):
                if not (self.lasts(bare, length) and self.lasts(lab, length)):
                    break
                for name in self.order(i):
                    self.window(self.sides[name], length)
        finally:
            for side in (bare, lab):
                if side.ids:
                    self.thaw(side)
        return {
            "window_s": round(length, 2),
            "bare": summary(bare),
            "lab": summary(lab),
            "topped_up": dict(self.topped_up),
        }

    def wait_until_done(self, side: Side, timeout: float = EMPTY_TIMEOUT_S) -> int:
        """A thawed side works until its whole backlog is done (not measured)."""
        deadline, last, last_at = time.monotonic() + timeout, -1, time.monotonic()
        while (done := self.counter()[side.name]) < side.target:
            now = time.monotonic()
            if done != last:
                last, last_at = done, now
            if now > deadline or now - last_at > STALL_S:
                raise LoadError(f"the {side.name} worker stopped at {done} of {side.target} tasks")
            time.sleep(0.2)
        return done


def summary(side: Side) -> dict:
    tasks = sum(w["tasks"] for w in side.windows)
    seconds = sum(w["s"] for w in side.windows)
    cpu = [w["cpu_s"] for w in side.windows]
    return {
        "target": side.target,
        "done": side.done,
        "windows": side.windows,
        "measured_tasks": tasks,
        "measured_s": round(seconds, 2),
        "rate": round(tasks / seconds, 1) if seconds > 0 else None,
        "rate_rounds": [round(w["tasks"] / w["s"], 1) for w in side.windows],
        "cpu_us_per_task": round(sum(cpu) / tasks * 1e6) if tasks and None not in cpu else None,
    }


def pair_ratios(bare_rates: list, lab_rates: list) -> list[float]:
    return [lab / bare for bare, lab in zip(bare_rates, lab_rates) if bare and lab is not None]


def spread(ratios: list[float]) -> str:
    """`median 0.95, 0.88-1.02 over 12 pairs`: how far one pair of windows moves the ratio."""
    if not ratios:
        return ""
    return f"median {statistics.median(ratios):.2f}, {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} pairs"
