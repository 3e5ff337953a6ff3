"""The drains of `make bench`: what each API enqueued, drained by the bare worker and the lab's
in turns (paired_windows.py), then the lab's queue emptied; for arq all this once more at
ARQ_POLL_DELAY=0.01 s. And each side's drain target: what it really published."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from labctl.experiments.bench.client import BenchStep
from labctl.experiments.bench.options import LIMIT_KNOBS
from labctl.experiments.bench.paired_windows import Counter, PairedDrain, Side, cpu_limit_lifted, sides
from labctl.platform import docker
from labctl.platform.cgroups import cpu_seconds
from labctl.polling import Progress, wait_until
from labctl.queues import EMPTIER_SETTINGS
from labctl.render.bench_table import FAST_ARQ_POLL


@dataclass
class Drains(BenchStep):
    stamp: str

    def top_up(self, queue: str, run: str, n: int) -> dict[str, int]:
        """n more tasks into each side's queue, through each side's own API at the same time (the workers
        frozen meanwhile); the tasks each API accepted."""
        apis = {"bare": ("bench-api", ""), "lab": ("api", run)}
        with ThreadPoolExecutor(2) as pool:
            drives = {
                side: pool.submit(self.client.loadgen, service, queue, side_run, n, 0)
                for side, (service, side_run) in apis.items()
            }
            return {side: drive.result()["ok"] for side, drive in drives.items()}

    def paired(self, counter: Counter, bare: Side, lab: Side, queue: str, run: str) -> PairedDrain:
        a = self.args
        return PairedDrain(
            counter,
            bare,
            lab,
            cpu_seconds,
            sides,
            a.drain_window_s,
            a.drain_s,
            self.say,
            top_up=lambda n: self.top_up(queue, run, n),
        )

    @contextmanager
    def emptier(self, queue: str) -> Iterator[None]:
        """For the unmeasured emptying of a queue whose own worker is slow at it whatever its
        CPU (RQ forks a work horse per job, docket looks for work DOCKET_CONCURRENCY tasks at a
        time every 0.1 s: every round's tasks would take the bench many minutes), a one-off
        worker of the queue beside it (labctl/queues.py EMPTIER_SETTINGS); none for the others."""
        settings = EMPTIER_SETTINGS.get(queue)
        if not settings:
            yield
            return
        name = f"bench-empty-{queue}-{self.stamp}"
        unlimited = {f"{LIMIT_KNOBS[queue]}_CPUS": str(os.cpu_count() or 1), f"{LIMIT_KNOBS[queue]}_MEM": "1G"}
        self.compose.start_one_off(queue, name, {**self.env, **unlimited}, settings)
        try:
            yield
        finally:
            docker.remove_container(name)

    def drain_queue(self, queue: str, row: dict[str, Any], counter: Counter, bare_target: int, lab_target: int) -> None:
        """The bare worker and the lab's drain in turns (paired_windows.py); then the lab's empties its queue."""
        c, bench_svc = self.compose, f"bench-{queue}"
        bare_start: Callable[..., Callable[[], None]] = lambda *extra: (
            lambda: c.start_service(bench_svc, {**self.env, **dict(extra)}, recreate=True)
        )
        bare: Callable[..., Side] = lambda *extra: Side(
            "bare", bare_target, bare_start(*extra), lambda: c.ids(bench_svc)
        )
        lab = Side("lab", lab_target, lambda: c.start(queue), lambda: c.ids(queue))
        self.say(f"[{queue}] drains: the bare worker and the lab's, in turns ({bare_target} and {lab_target} tasks)")
        drain = self.paired(counter, bare(), lab, queue, row["run"])
        try:
            with docker.paused(c.ids("prometheus")) as pause:  # the whole drain: paired_windows.py
                result = drain.run()
            row["prometheus_paused"] = [round(pause.frozen_at, 1), round(pause.thawed_at, 1)]
        finally:
            c.remove(bench_svc)
        row["drain_window_s"], row["bare_drain"], row["lab_drain"] = result["window_s"], result["bare"], result["lab"]
        row["drain_topped_up"] = result["topped_up"]
        # What each queue now holds in all, top-ups included: the fast arq drain below goes on from there.
        bare_target, lab_target = drain.sides["bare"].target, lab.target
        if queue != "arq":
            self.say(f"[{queue}] the lab's worker empties its queue (not measured; its CPU limit lifted meanwhile) ...")
            with cpu_limit_lifted(c.ids(queue)), self.emptier(queue):
                drain.wait_until_done(lab)
            return
        # arq once more at ARQ_POLL_DELAY=0.01, on what is left of both queues;
        # the lab's at that setting is a one-off container beside the stopped service.
        c.stop(queue)
        say_fast = f"[arq] again at ARQ_POLL_DELAY={FAST_ARQ_POLL}"
        self.say(say_fast)
        name = f"bench-lab-arq-{self.stamp}"
        one_off = lambda: c.start_one_off("arq", name, self.env, {"ARQ_POLL_DELAY": FAST_ARQ_POLL})
        fast_lab = Side("lab", lab_target, one_off, lambda: docker.container_ids(name))
        fast = self.paired(counter, bare(("ARQ_POLL_DELAY", FAST_ARQ_POLL)), fast_lab, queue, row["run"])
        try:
            with docker.paused(c.ids("prometheus")):
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
            c.remove(bench_svc)
            docker.remove_container(name)
            c.start(queue, check=False)


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
    progress = Progress(stall_s)
    count = 0

    def in_or_still() -> bool:
        nonlocal count
        count = read()
        progress.see(count)
        return count >= accepted or progress.still_for >= stall_s

    wait_until(in_or_still, timeout_s=None, every_s=every_s)
    return count
