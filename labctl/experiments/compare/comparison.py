"""One comparison under the lab's current limits: every rep of every queue, a slow
queue's backlog run by a one-off worker after its watch, the record and its report."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from lab.queues import BY_NAME
from labctl.clients.api import api_address, ledger
from labctl.clients.prometheus import Prometheus
from labctl.errors import LabError, LabNotRunning
from labctl.experiments.compare.options import CompareOptions, command_line, describe, run_options
from labctl.experiments.compare.rounds import Rounds
from labctl.experiments.compare.series import SERIES_AFTER_S, SERIES_STEP_S, cpu_seconds, middle_rate, run_series
from labctl.experiments.compare.setting import (
    latest_bench,
    latest_capacity,
    latest_chaos,
    published_beside,
    setting_of,
)
from labctl.load_run.backlog import wait_for_empty
from labctl.load_run.steps import run_load
from labctl.platform.compose import Compose
from labctl.platform.lab import Lab
from labctl.polling import Progress, wait_until
from labctl.queues import EMPTIER_SETTINGS, service_of
from labctl.records.compare import AT_CAP, OUT_OF_TIME, CompareParams, CompareRecord, Series
from labctl.records.compare_run import CompareRun, run_row
from labctl.records.run import RunRecord
from labctl.records.run_tasks import DrainWatch, backlog_of
from labctl.records.store import Store
from labctl.render import compare_page, compare_table
from labctl.render.console import Console

SWEEP_STALL_S = 60
# The warm-up run's load: long enough for every queue to take requests, short enough
# that the slowest drainer's share of it empties in seconds.
WARMUP_RUN_S = 8
WHY_STOPPED = {AT_CAP: "it reached max_rounds", OUT_OF_TIME: "the time budget ran out"}


class Comparison:
    """The runs of one comparison, on the compose project or the Swarm stack."""

    def __init__(self, options: CompareOptions, queues: list[str], lab: Lab, ui: Console, name: str | None = None):
        self.options, self.queues, self.lab, self.ui = options, queues, lab, ui
        self.name = name or f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
        self.store = Store(options.results_dir)
        addr = lab.port("prometheus", 9090)
        if not addr:
            raise LabNotRunning(
                "Prometheus is not running: make compare reads the backlog and the charts from it (make up)"
            )
        self.prom = Prometheus(addr)
        self.rows: list[CompareRun] = []
        self.records: list[RunRecord] = []
        self.series: list[Series] = []
        self.notes: list[str] = []
        seed = options.seed if options.seed is not None else secrets.randbelow(1_000_000)
        self.rounds = Rounds(
            queues, seed, options.rounds, options.max_rounds, options.target_pct, options.budget_min * 60
        )

    def one(self, queue: str, rep: int) -> None:
        """One load run of a queue, its tasks watched for a bounded time and the rest run by a
        one-off worker where its queue drains slower (empty_backlog), and what Prometheus saw of it."""
        run = f"{self.name}-{queue}-r{rep}"
        if note := wait_for_empty(self.prom.queue_depths, queue, self.options.backlog_wait_s, self.ui.say):
            self.notes.append(note)
        record = run_load(run_options(self.options, queue, run), self.lab, self.ui)
        start = record.load_started_at or 0.0
        # The run's window: to its last settled task, or to the end of its watch.
        window_end = record.window_end or record.load_ended_at or start
        cpu = cpu_seconds(
            self.prom, list(dict.fromkeys([service_of(queue), "api"])), start, min(time.time(), window_end + 3)
        )
        if record.is_draining():
            self.empty_backlog(queue, record)
        if record.unsettled():
            self.notes.append(f"{run}: not every task settled ({'; '.join(record.warnings)})")
        self.records.append(record)
        self.rows.append(run_row(record.as_json(), queue, rep, cpu, self.warmup_s, window_end))

    @property
    def warmup_s(self) -> float | None:
        """The warm-up a run's RPS leaves out: none for runs of a request count (the whole load's)."""
        return None if self.options.requests else self.options.warmup_s

    def empty_backlog(self, queue: str, record: RunRecord) -> None:
        """The rest of a run's backlog, which its queue drains slower than its API enqueued, run
        by a one-off worker of the queue beside its own, its CPU limit lifted (EMPTIER_SETTINGS);
        the run's record then holds the ledger's whole counts and the drain it measured
        (RunRecord.emptied). On a Swarm stack, or for `background`, the run's own workers finish
        it (at most --drain-timeout)."""
        watch = (record.tasks.draining if record.tasks else None) or DrainWatch()
        self.ui.say(
            f"{queue} drains at {watch.rate_per_s} tasks/s: {watch.backlog} task(s) left, "
            f"projected to take {watch.projected_empty_s} s more; a one-off {queue} worker runs them now"
        )
        api = api_address(self.lab)
        progress = Progress(SWEEP_STALL_S)

        def emptied() -> dict[str, Any] | None:
            led = ledger(api, record.run)
            progress.see(backlog_of(led) if led else None)
            if progress.stalled:
                raise LabError(f"the rest of {record.run}'s backlog stopped moving for {SWEEP_STALL_S} s")
            return led if led and backlog_of(led) == 0 else None

        if isinstance(self.lab, Compose) and queue in BY_NAME:
            prefix = BY_NAME[queue].limits_prefix
            limits = {f"{prefix}_CPUS": str(os.cpu_count() or 1), f"{prefix}_MEM": "1G"}
            by = f"a one-off {queue} worker without its CPU limit" + "".join(
                f", {k}={v}" for k, v in EMPTIER_SETTINGS.get(queue, {}).items()
            )
            with self.lab.one_off(queue, limits, EMPTIER_SETTINGS.get(queue, {})):
                led = wait_until(emptied, timeout_s=self.options.drain_timeout, every_s=1)
        else:
            by = f"the lab's own {queue} workers"
            led = wait_until(emptied, timeout_s=self.options.drain_timeout, every_s=1)
        if not led:
            self.notes.append(f"{record.run}: its backlog was not emptied within {self.options.drain_timeout:.0f} s")
            return
        record.emptied(led, by)
        self.store.save(record)

    def collect_series(self) -> None:
        """Every run's series, read once all ran: by then the 10 s rates after each run's end are in
        (the last run's after a short wait)."""
        if self.records:
            last = self.records[-1]
            until = (last.window_end or last.load_ended_at or 0.0) + SERIES_AFTER_S + SERIES_STEP_S
            time.sleep(max(0.0, min(until - time.time(), SERIES_AFTER_S + SERIES_STEP_S)))
        for row, record in zip(self.rows, self.records):
            try:
                series = run_series(self.prom, record, row.queue, row.rep)
            except (httpx.HTTPError, LabError) as exc:
                self.notes.append(f"{row.run}: no series from Prometheus ({exc})")
                continue
            self.series.append(series)
            # The charts over the middle of the load, against the table's figures.
            warmup = self.warmup_s or 0.0
            row.chart_rps_middle = middle_rate(series.requests, record, warmup)
            row.chart_throughput_middle = middle_rate(series.throughput, record, warmup)

    def warm_up(self) -> None:
        """A short run of every queue at once (`worker=all`), not counted: the API's first
        requests to each queue (its client, its connections, the library's import) and the
        workers' first tasks land here, not in the first counted run. Its tasks are counted
        by its own ledger; the queues are empty again before the first counted run."""
        run = f"{self.name}-warmup"
        self.ui.say(f"\n== make compare {self.name}: a warm-up run of every queue at once, not counted")
        options = run_options(self.options, "all", run).but(
            worker=",".join(self.queues), duration=WARMUP_RUN_S, iterations=None, drain_watch=0.0
        )
        try:
            run_load(options, self.lab, self.ui)
        except (LabError, httpx.HTTPError) as exc:
            self.notes.append(f"the warm-up run failed: {exc}")

    def run_all(self) -> float:
        """The rounds (experiments/compare/rounds.py): every queue in each of the first, then
        only those whose RPS interval is still wide; the queues of a round in a seeded random
        order. The wall time."""
        started = time.monotonic()
        if self.options.warmup_run:
            self.warm_up()
        rps: dict[str, list[float]] = {q: [] for q in self.queues}
        run_s: dict[str, list[float]] = {q: [] for q in self.queues}
        done = 0
        while order := self.rounds.next(rps, run_s, time.monotonic() - started):
            number = len(self.rounds.orders)
            for position, queue in enumerate(order, 1):
                rep = len(run_s[queue]) + 1
                self.ui.say(
                    f"\n== make compare {self.name}: round {number} ({position}/{len(order)}), {queue} run {rep}; "
                    f"{done} run(s) done, {(time.monotonic() - started) / 60:.1f} min"
                )
                run_started = time.monotonic()
                try:
                    self.one(queue, rep)
                    self.rows[-1].round = number
                    if (figure := self.rows[-1].rps) is not None:
                        rps[queue].append(figure)
                except (LabError, httpx.HTTPError) as exc:
                    self.ui.say(f"{queue} run {rep} failed: {exc}")
                    self.notes.append(f"{queue} run {rep} (round {number}) failed: {exc}")
                run_s[queue].append(time.monotonic() - run_started)
                done += 1
        for queue, why in self.rounds.why_not_within().items():
            self.notes.append(
                f"{queue}: its RPS interval is wider than +-{self.options.target_pct:g} % ({WHY_STOPPED.get(why, why)})"
            )
        self.collect_series()
        return time.monotonic() - started

    def record(self, wall_s: float) -> CompareRecord:
        o = self.options
        length = {} if o.requests else {"duration_s": o.duration_s, "warmup_s": o.warmup_s}
        params = CompareParams(
            workers=self.queues,
            requests=o.requests,
            users=o.users,
            quick=o.quick,
            rounds=o.rounds,
            max_rounds=o.max_rounds,
            target_pct=o.target_pct,
            budget_min=o.budget_min,
            seed=self.rounds.seed,
            warmup_run=o.warmup_run,
            **length,
            drain_watch_s=o.drain_watch_s,
            setting=o.setting or None,
            spawn=o.spawn,
            endpoint=o.endpoint,
            locust_workers=o.locust_workers,
        )
        setting, notes = setting_of(self.records, self.lab)
        beside, why_not = published_beside(setting, params) if self.records else (None, "no run")
        return CompareRecord(
            run=self.name,
            time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            command=command_line(self.queues, replace(o, seed=self.rounds.seed)),
            wall_s=round(wall_s, 1),
            params=params,
            rounds=self.rounds.as_json(),
            runs=self.rows,
            series=self.series,
            series_step_s=SERIES_STEP_S,
            setting=setting,
            bench=latest_bench(self.store, self.queues),
            chaos=latest_chaos(self.store, self.queues),
            capacity=latest_capacity(self.store, self.queues),
            published=beside,
            published_note=why_not,
            notes=self.notes + notes,
        )

    def write(self, record: CompareRecord) -> dict[str, Path]:
        record.report = str(self.store.path(self.name, ".html"))
        return {
            "json": self.store.save(record),
            "md": self.store.write_text(self.name, ".md", compare_table.markdown(record) + "\n"),
            "html": self.store.write_text(self.name, ".html", compare_page.page(record)),
        }


def compare_once(
    options: CompareOptions,
    queues: list[str],
    lab: Lab,
    ui: Console,
    name: str | None = None,
    before: Callable[[list[str]], object] | None = None,
) -> tuple[CompareRecord, bool]:
    """One comparison under the lab's current limits: its record, written, and its paths;
    `before(queues)` first (make compare capacity=1: a make capacity its report shows)."""
    if before is not None:
        before(queues)
    comparison = Comparison(options, queues, lab, ui, name)
    ui.say(
        f"make compare {comparison.name}: {', '.join(queues)}, {describe(options)} of {options.endpoint} from "
        f"{options.users} users a run, under the stack's limits; {options.rounds} round(s) of every queue, then "
        f"more for a queue whose RPS interval is wider than +-{options.target_pct:g} % (at most {options.max_rounds} "
        f"rounds, {options.budget_min:g} min); seed {comparison.rounds.seed}"
        + ("; quick: a first look, its intervals as wide as its few runs make them" if options.quick else "")
    )
    wall_s = comparison.run_all()
    if not comparison.rows:
        raise LabError("no run finished; nothing to report")
    record = comparison.record(wall_s)
    paths = comparison.write(record)
    ui.say(f"\n{compare_table.markdown(record)}\n")
    for note in record.notes:
        ui.say(f"NOTE: {note}")
    ui.say(f"report: {paths['html']}  (table: {paths['md']}, record: {paths['json']}); {wall_s:.0f} s in all")
    failed = len(comparison.rows) < sum(len(o) for o in comparison.rounds.orders) or any(
        not r.settled for r in comparison.rows
    )
    return record, failed
