"""The paired drain windows of `make bench`: the bare worker and the lab's, in turns of short windows.

Both workers are started on their own backlog, but only one runs at a time:
the other sits in `docker pause` (its cgroup frozen: no CPU, its connections,
read-ahead and half-done tasks kept as they were). A window thaws one side for
`window_s`, freezes it again, and counts what it did meanwhile: the tasks it
finished (read from Redis while both sides are frozen, so the count cannot
move under the reading) and the CPU its containers used (their cgroup).

Sides take turns, bare-lab then lab-bare (`sides`), so the two windows of a
pair run seconds apart: drains measured one after the other, minutes apart,
met the machine's slow drift, which moves both windows of a pair alike
(docs/results/2026-11-28-figures-out-of-comments.md: how far it moved one
worker's rate between two benches).

Prometheus stays frozen for the whole drain (drains.py, `paused`): a scrape
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
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from labctl.errors import LabError
from labctl.platform import docker
from labctl.polling import Progress, wait_until

WARM_S = 1.0  # a side runs this long after its first task before it is measured: imports, connections, caches
MIN_TASKS_PER_WINDOW = 40
MIN_TASKS_MEASURED = 400  # per side: a slow worker does few tasks in measure_s, and their ratio moves bench to bench
MIN_PAIRS = 4  # arq at its default polling: long windows, and a ratio that needs several of them
START_TIMEOUT_S = 120  # a worker's container start and imports, under a small CPU quota
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
    windows: list[dict[str, Any]] = field(default_factory=list)


class Counter:
    """services/bare/drain.py --watch in the bench's client container, kept up for the whole drain."""

    def __init__(self, client: str, counter: str, run: str):
        self.proc = docker.exec_interactive(
            client, "python", "-m", "services.bare.drain", "--watch", "--counter", counter, "--ledger-run", run
        )

    def __call__(self) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise LabError(f"the drain counter exited: {self.proc.stderr.read()[-2000:]}")
        return cast(dict[str, int], json.loads(line))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@contextmanager
def cpu_limit_lifted(ids: list[str]) -> Iterator[None]:
    """The containers may use every core of the host meanwhile, then get their own limit back.

    For the unmeasured tail of a drain: a queue that runs a few tasks a second
    under its limit (RQ forks a work horse per job) would otherwise keep the
    bench waiting for many minutes on tasks nobody measures."""
    limits = {cid: docker.nano_cpus(cid) for cid in ids}
    for cid in ids:
        docker.set_cpus(cid, os.cpu_count() or 1)
    try:
        yield
    finally:
        for cid, nano in limits.items():
            if nano:
                docker.set_cpus(cid, nano / 1e9)


def sides(i: int) -> tuple[str, str]:
    """Which drain window goes first in pair i: bare, lab, then lab, bare, and
    so on. A machine that drifts steadily over a bench then costs both sides
    alike; bare first in every pair charged the whole drift to the lab."""
    return ("bare", "lab") if i % 2 == 0 else ("lab", "bare")


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
        say: Callable[[str], None] = print,
        top_up: Callable[[int], dict[str, int]] | None = None,
    ):
        self.counter, self.sides, self.cpu_seconds, self.order = counter, {"bare": bare, "lab": lab}, cpu_seconds, sides
        self.window_s, self.measure_s, self.say = window_s, measure_s, say
        # top_up(n): n more tasks into each side's queue; what each side's queue really got.
        self.top_up = top_up
        self.topped_up: dict[str, int] = {}

    def cpu(self, side: Side) -> float | None:
        values = [self.cpu_seconds(i) for i in side.ids]
        known = [v for v in values if v is not None]
        return sum(known) if len(known) == len(values) else None

    def warm(self, side: Side) -> None:
        """Start a side, let it run WARM_S past its first task, freeze it."""
        base = self.counter()[side.name]
        side.start()
        side.ids = side.containers()
        if not side.ids:
            raise LabError(f"the {side.name} worker did not start")
        first = wait_until(lambda: self.counter()[side.name] - base, timeout_s=START_TIMEOUT_S, every_s=0.1)
        if not first:
            raise LabError(f"the {side.name} worker finished no task within {START_TIMEOUT_S} s of its start")
        first += base
        began = time.monotonic()
        time.sleep(WARM_S)
        self.switch(side, "pause")
        side.done = self.counter()[side.name]
        side.rate = (side.done - first) / (time.monotonic() - began)

    # A side's `docker pause` or `unpause`, one container per docker call: the window's
    # clock runs over the side's own pause and unpause.
    def switch(self, side: Side, action: str) -> tuple[float, float]:
        began = time.perf_counter()
        for container in side.ids:
            docker.freeze(container, action)
        return began, time.perf_counter()

    def window(self, side: Side, length: float) -> None:
        cpu_before, done_before = self.cpu(side), side.done
        a, b = self.switch(side, "unpause")
        time.sleep(length)
        c, d = self.switch(side, "pause")
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

    def run(self) -> dict[str, Any]:
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
                    self.switch(side, "unpause")
        return {
            "window_s": round(length, 2),
            "bare": summary(bare),
            "lab": summary(lab),
            "topped_up": dict(self.topped_up),
        }

    def wait_until_done(self, side: Side) -> int:
        """A thawed side works until its whole backlog is done (not measured),
        for as long as it moves: a slow worker is waited for (procrastinate
        empties many rounds' tasks one query a job), one stalled STALL_S is not."""
        progress = Progress(STALL_S)
        done = 0

        def finished() -> bool:
            nonlocal done
            done = self.counter()[side.name]
            progress.see(done)
            if done < side.target and progress.stalled:
                raise LabError(f"the {side.name} worker stopped at {done} of {side.target} tasks")
            return done >= side.target

        wait_until(finished, timeout_s=None, every_s=0.2)
        return done


def summary(side: Side) -> dict[str, Any]:
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
