"""`make claims`: the queue authors' published benchmarks, run here and set beside their figures.

    uv run python -m labctl claims [--quick] [--scale 1] [--reps 2] [--only saq_simple,rq_doc,...]
                                   [--setups unlimited,limited]

Each benchmark as its author runs it (authors.py: the author's files at the
published commit, vendored with their changes shown as diffs, sources.py; the
Dramatiq claim through a port of its script; the blog's through minimal workers
of our own, its code being unpublished), on a Redis of its own (machine.py),
first with no CPU limit, as the authors ran, then with each worker container
held to the lab's limits (WORKER_CPUS / WORKER_MEM). The queue order turns from
one repetition to the next. Every job is counted (claims_tally.py, or the
author's own counter or log lines), and a run that misses one, or does not
finish, is recorded as failed with its reason.

It writes results/claims-<time>.json (every run), .md and .html (the report:
published against measured figures and ratios, each claim's verdict, the
setups' quirks, the patches), and prints the claims' table. Each claim is
decided on its ratio's 95 % interval by the rules of docs/claims.md
(records/claims_rules.py), which is why every configuration a claim reads runs
at least twice by default (one no claim reads runs once). --report NAME writes a recorded run's report again (its verdicts
by this version's rules), running nothing. --quick: N scaled by 0.1, one
repetition, the smaller process counts: a smoke test, which decides no claim.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from labctl.config import RESULTS_DIR, RESULTS_HELP, Opt
from labctl.errors import EXIT_OK, LabError, ParamError
from labctl.experiments.claims import plan as P
from labctl.experiments.claims import sources
from labctl.experiments.claims.machine import Machine, image_versions, machine_description
from labctl.experiments.claims.ports import blog_calibrate
from labctl.experiments.claims.steps import LIMITED, UNLIMITED, Config, run_fields
from labctl.records.claims import ClaimsRecord, ClaimsRun
from labctl.records.store import Store
from labctl.render import claims_page
from labctl.render.console import Console

SETUPS = (UNLIMITED, LIMITED)
# Two runs a side, the least a t interval needs: a third narrows every interval (Welch's t quantile
# falls from 4.3-12.7 to 2.8-4.3) but takes the full run well past the hour it is sized for on the
# 2-core machine (docs/claims.md); `--reps 3` buys it.
REPS = 2


@dataclass
class ClaimsOptions:
    quick: Annotated[
        bool,
        Opt("N scaled by 0.1, one repetition: a smoke test, it decides no claim", "--quick", envvar="CLAIMS_QUICK"),
    ] = False
    scale: Annotated[float, Opt("every benchmark's N multiplied by this", envvar="CLAIMS_SCALE")] = 1.0
    reps: Annotated[int, Opt("repetitions of every configuration (an interval needs 2)", envvar="CLAIMS_REPS")] = REPS
    only: Annotated[str, Opt(f"benchmarks to run, comma-separated (default all): {', '.join(P.BENCH_ORDER)}")] = ""
    setups: Annotated[str, Opt("unlimited, limited, or both")] = ",".join(SETUPS)
    quiet_wait_s: Annotated[
        float,
        Opt(
            "before each run, wait up to this long for the machine's other work to quiet down",
            envvar="CLAIMS_QUIET_WAIT_S",
        ),
    ] = 5.0
    results_dir: Annotated[Path, Opt(RESULTS_HELP, "--results-dir")] = RESULTS_DIR

    @property
    def benches(self) -> list[str]:
        return _names(self.only)

    @property
    def setup_names(self) -> list[str]:
        return _names(self.setups)

    def check(self) -> None:
        unknown = [b for b in self.benches if b not in P.BENCH_ORDER]
        if unknown:
            raise ParamError(f"--only {','.join(unknown)}: not a benchmark ({', '.join(P.BENCH_ORDER)})")
        bad = [s for s in self.setup_names if s not in SETUPS]
        if bad or not self.setup_names:
            raise ParamError(f"--setups {self.setups}: unlimited, limited or both")
        if not 0 < self.scale <= 5 or self.reps < 1:
            raise ParamError("--scale must lie in (0, 5] and --reps be at least 1")
        if self.quick:
            self.scale, self.reps = min(self.scale, 0.1), 1


def _names(text: str) -> list[str]:
    return [x for x in text.replace(",", " ").split() if x]


def rotated(items: list[Any], rep: int) -> list[Any]:
    k = (rep - 1) % len(items) if items else 0
    return items[k:] + items[:k]


class Claims:
    def __init__(self, options: ClaimsOptions, ui: Console):
        self.o, self.ui = options, ui
        self.stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        self.name = f"claims-{self.stamp}"
        self.store = Store(options.results_dir)
        # Mounted into the steps' containers: docker wants an absolute path.
        self.work = self.store.beside(f"{self.name}-work").resolve()
        self.machine = Machine(self.work, self.stamp, ui.say, quiet_wait_s=options.quiet_wait_s)
        self.runs: list[ClaimsRun] = []
        self.notes: list[str] = []

    def plan(self) -> list[tuple[str, str, int, list[Config]]]:
        benches = [b for b in P.BENCH_ORDER if not self.o.benches or b in self.o.benches]
        out = []
        for setup in self.o.setup_names:
            for bench in benches:
                configs = P.configs(bench, setup, self.o.scale, self.o.quick)
                if bench == "lab_path" and len(benches) > 1:  # the shapes whose author's benchmark runs too
                    configs = [c for c in configs if c.params["bare"]["bench"] in benches]
                for rep in range(1, self.o.reps + 1):
                    these = [c for c in configs if not c.most_reps or rep <= c.most_reps]
                    if these:
                        out.append((bench, setup, rep, rotated(these, rep)))
        return out

    def measure(self, config: Config, rep: int, done: int, total: int) -> None:
        m = self.machine
        m.flush()
        busy, load = m.quiet()
        run = f"{config.bench}-{config.queue}-{config.setup}-{config.params.get('column', '')}-r{rep}-{m.steps}"
        self.ui.progress(done / total, f"{config.label} rep {rep}", force=True)
        started = time.time()
        try:
            result = P.MEASURE[config.bench](m, config, rep, run)
        except (LabError, OSError, ValueError, KeyError, TypeError) as exc:
            # One run that cannot be measured is recorded as failed; the others still run.
            result = ClaimsRun(**run_fields(config, rep), status=f"failed: {type(exc).__name__}: {str(exc)[-500:]}")
        for r in result if isinstance(result, list) else [result]:
            r.busy_before, r.loadavg, r.started_at = busy, load, round(started, 3)
            self.runs.append(r)
            line = f"{r.bench} {r.queue} {r.setup} rep {rep}: {r.status}; " + ", ".join(
                f"{k}={v}" for k, v in r.figures.items() if v is not None
            )
            self.ui.say(line + f"; lost {r.accounting.lost}, dup {r.accounting.duplicates}")

    def run(self) -> ClaimsRecord:
        started = time.time()
        source_info = sources.stage(self.work)
        plan = self.plan()
        total = sum(len(configs) for *_, configs in plan)
        self.machine.up()
        try:
            versions = image_versions(self.machine.image, self.work)
            redis_info = self.machine.redis_info()
            done = 0
            for bench, setup, rep, configs in plan:
                if bench == "blog_cpu" and rep == 1:
                    self.machine.flush()
                    body = blog_calibrate(self.machine, f"calibrate-{setup}", setup == LIMITED)
                    self.notes.append(f"blog cpu job's body alone ({setup}): {body} ms")
                for config in configs:
                    self.measure(config, rep, done, total)
                    done += 1
                self.store.save(self.record(started, source_info, versions, redis_info))  # kept if cut short
        finally:
            self.ui.end_progress()
            self.machine.down()
        return self.record(started, source_info, versions, redis_info)

    def record(
        self, started: float, source_info: dict[str, Any], versions: dict[str, Any], redis_info: dict[str, Any]
    ) -> ClaimsRecord:
        o = self.o
        command = "make claims" + (" quick=1" if o.quick else "")
        if not o.quick and o.scale != 1:
            command += f" scale={o.scale}"
        if o.reps != REPS and not o.quick:
            command += f" reps={o.reps}"
        if o.benches:
            command += f" only={','.join(o.benches)}"
        if o.setup_names != list(SETUPS):
            command += f" setups={','.join(o.setup_names)}"
        return ClaimsRecord.model_validate(
            {
                "run": self.name,
                "time": datetime.now().isoformat(timespec="seconds"),
                "command": command,
                "wall_s": round(time.time() - started, 1),
                "params": {
                    "scale": o.scale,
                    "reps": o.reps,
                    "quick": o.quick,
                    "only": o.benches,
                    "setups": o.setup_names,
                },
                "setting": {
                    "image": self.machine.image,
                    "limits": self.machine.limits,
                    "versions": versions,
                    "redis": redis_info,
                    "machine": machine_description(),
                },
                "sources": source_info,
                "runs": [r.model_dump() for r in self.runs],
                "notes": self.notes,
            }
        )


def write_report(store: Store, record: ClaimsRecord, ui: Console) -> None:
    """The record saved (first: the runs are kept whatever the rendering meets), then its .md and .html."""
    record.report = str(store.path(record.run, ".html"))
    path = store.save(record)
    store.write_text(record.run, ".md", claims_page.markdown(record))
    store.write_text(record.run, ".html", claims_page.page(record))
    ui.say("")
    ui.say(claims_page.verdicts_markdown(record))
    ui.say(f"\nrecorded in {path}; the report: {record.report} (and .md), {record.wall_s:.0f} s of runs")


def claims(options: ClaimsOptions, ui: Console) -> int:
    options.check()
    runner = Claims(options, ui)
    write_report(runner.store, runner.run(), ui)
    return EXIT_OK


def report_again(name: str, results_dir: Path, ui: Console) -> int:
    """A recorded run's report written again from its runs, with this version's rules and pages."""
    store = Store(results_dir)
    found = [r for r in store.of(ClaimsRecord) if r.run == name]
    if not found:
        raise LabError(f"no claims record {store.path(name)}")
    write_report(store, found[-1], ui)
    return EXIT_OK
