"""`make capacity`: the highest arrival rate each queue's whole path sustains under the limits in force.

    make capacity worker=arq|...|all [max_wait=5s step=30s start=5 precision=10 max_rate= reps=1 check=1 seed=N
                                      target_pct= max_reps=6]

Each step is an open-model run, `make load worker=Q rate=R duration=<step>
wait=1` (the next step starts with an empty backlog), judged from its record
(labctl/records/capacity.py says the rules): sustained when nothing failed,
the rate asked was sent on time, the backlog did not grow faster than 5 % of
the rate over the step's second half, and the tasks' p95 wait stayed
under max_wait. A search starts at `start` tasks/s and doubles until a step is
not sustained (halves while the first is not), then bisects between the
highest rate sustained and the lowest not until they are within `precision` %.
A generator short of CPU ends the search where it is.

reps=N searches every queue N times, the queues in a random order (from
`seed`) in each repetition: the sustained rate is the median of the searches
with its 95 % interval and n. A later search walks from the queue's first
result instead of starting over: up by `precision` % while sustained, down
while not, until the verdict turns (`walk`); it brackets the rate as finely in
two or three steps as the first did in eight or more. With one search it is the search's result, the
bracket beside it. Every step the worker could not keep up with also gives the
rate it completed tasks at when saturated; their median and interval show too.

target_pct=X then adds repetitions, each only of the queues whose sustained
rate's interval is still wider than +-X % of its median (in a random order
again), until none is or a queue has had max_reps searches; the record says
why each stopped. The searches bracket a rate to `precision` %, so a target
much under it asks for more searches than it gains.

check=1 then runs each queue at 0.8x and 1.3x of its sustained rate for
check_s (60 s): the first should be sustained and the second not.

Written to results/capacity-<time>.json, .md and .html (a wait-against-rate
chart per queue). The steps' own runs are ordinary run records beside it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Annotated

from lab import load_params
from labctl import stats
from labctl.config import Opt
from labctl.errors import EXIT_FAILED, EXIT_OK, LabError, ParamError
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load
from labctl.platform.lab import Lab
from labctl.queues import parse_workers
from labctl.records.capacity import (
    AT_CAP,
    WITHIN,
    CapacityRecord,
    QueueCapacity,
    Step,
    judge,
    saturated_rate,
)
from labctl.records.run import ServiceLimits, limit_text, workers_limit_text
from labctl.records.store import Store
from labctl.render import capacity_page
from labctl.render.console import Console

# A task that waits more than this at the 95th percentile is no longer "in the
# background" for most uses; 5 s is also a bound of the lab's wait histogram, so
# whether a p95 lies under it is read exactly, not interpolated.
MAX_WAIT = "5s"
STEP = "30s"  # a second half of 15 one-second readings of the backlog for its slope
START_RATE = 5.0
PRECISION_PCT = 10.0
MIN_RATE = 0.5
CHECK = "60s"
CHECK_FACTORS = (0.8, 1.3)
# target_pct=: at most this many searches of a queue. A later search is a short walk,
# so one more costs little; the cap bounds a queue whose verdicts swing from search to
# search, whose interval no number of searches would narrow.
MAX_REPS = 6


@dataclass
class CapacityOptions:
    """make capacity's own options, as given (checked by `parse`)."""

    workers: str = ""  # make capacity's worker= (the load's option)
    max_wait: Annotated[str, Opt("the p95 wait (enqueue to start) a sustained rate keeps under")] = MAX_WAIT
    step: Annotated[str, Opt("each step's load: 30s, 1m")] = STEP
    start: Annotated[float, Opt("the first rate tried, tasks/s")] = START_RATE
    precision: Annotated[float, Opt("bisect until the bracket is this many % of its lower rate")] = PRECISION_PCT
    max_rate: Annotated[float | None, Opt("the highest rate tried (default: what Locust sends)")] = None
    reps: Annotated[int, Opt("searches of each queue, the queues in a random order in each")] = 1
    check: Annotated[bool, Opt("then run 0.8x and 1.3x of each rate found")] = False
    check_s: Annotated[str, Opt("how long each check runs")] = CHECK
    seed: Annotated[int | None, Opt("the seed of the queues' order (default: drawn, recorded)")] = None
    # None: reps only.
    target_pct: Annotated[float | None, Opt("then search again each queue whose interval is wider than +-this %")] = (
        None
    )
    max_reps: Annotated[int, Opt("target_pct=: at most this many searches of a queue")] = MAX_REPS
    queues: list[str] = field(default_factory=list)
    max_wait_s: float = 0.0
    step_s: float = 0.0
    check_duration_s: float = 0.0

    def parse(self, load: LoadOptions) -> CapacityOptions:
        """The options checked, before anything starts; ParamError names the one refused."""
        queues = parse_workers(self.workers)
        waits = _duration("max_wait", self.max_wait)
        step_s = _duration("step", self.step)
        check_s = _duration("check_s", self.check_s)
        most = load_params.MAX_RATE_PER_PROCESS * load.locust_workers
        max_rate = most if self.max_rate is None else self.max_rate
        if not MIN_RATE <= self.start <= max_rate:
            raise ParamError(f"start={self.start:g}: a rate from {MIN_RATE:g} to max_rate ({max_rate:g}) tasks/s")
        if not 0 < max_rate <= most:
            raise ParamError(
                f"max_rate={max_rate:g}: above 0 and at most {most:g}, what {load.locust_workers} Locust worker(s) "
                "send (locust_workers= more)"
            )
        if not 1 <= self.precision <= 100:
            raise ParamError(f"precision={self.precision:g}: a percentage from 1 to 100")
        if self.reps < 1:
            raise ParamError(f"reps={self.reps}: a whole number above 0")
        if self.target_pct is not None and not 0 < self.target_pct <= 100:
            raise ParamError(f"target_pct={self.target_pct:g}: a percentage above 0, at most 100")
        if self.target_pct is not None and self.max_reps < max(self.reps, 2):
            raise ParamError(f"max_reps={self.max_reps}: at least reps ({self.reps}) and 2, for an interval")
        if (load.rate, load.iterations, load.duration) != (None, None, None):
            raise ParamError("rate=, iterations= and duration= are the search's own: give start=, step=, max_rate=")
        return replace(
            self, queues=queues, max_wait_s=waits, step_s=step_s, check_duration_s=check_s, max_rate=max_rate
        )


def _duration(name: str, text: str) -> float:
    """`5s`, `2m`, `90`, and `500ms` (a wait may be under a second) -> seconds."""
    ms = text.strip().lower().removesuffix("ms")
    try:
        if ms != text.strip().lower() and ms.replace(".", "", 1).isdigit() and float(ms) > 0:
            return float(ms) / 1000
        return float(load_params.parse_duration(text))
    except load_params.ParamError:
        raise ParamError(f"{name}={text!r}: a duration above 0, like 5s, 500ms or 2m") from None


# -- The search ----------------------------------------------------------------------------
def search(try_rate: Callable[[float], Step], start: float, max_rate: float, precision_pct: float) -> list[Step]:
    """Steps up (doubling) or down (halving) from `start` until one side of the
    limit is found, then bisection; the steps in the order they ran."""
    steps: list[Step] = []
    lo: float | None = None
    hi: float | None = None

    def step(rate: float) -> Step | None:
        s = try_rate(round(rate, 2))
        steps.append(s)
        return None if s.limited_by == "generator" else s

    rate = start
    while True:
        s = step(rate)
        if s is None:
            return steps
        if s.sustained:
            lo = rate
            if rate >= max_rate or hi is not None:
                break
            rate = min(rate * 2, max_rate)
        else:
            hi = rate
            if lo is not None or rate / 2 < MIN_RATE:
                break
            rate /= 2
    while lo is not None and hi is not None and (hi - lo) / lo > precision_pct / 100:
        mid = (lo + hi) / 2
        s = step(mid)
        if s is None:
            break
        lo, hi = (mid, hi) if s.sustained else (lo, mid)
    return steps


def walk(try_rate: Callable[[float], Step], start: float, max_rate: float, precision_pct: float) -> list[Step]:
    """A later search: from an earlier search's rate, up by `precision_pct` % while
    sustained or down while not, until the verdict turns; the steps in order."""
    factor = 1 + precision_pct / 100
    steps: list[Step] = []
    rate = start
    while True:
        s = try_rate(round(rate, 2))
        steps.append(s)
        if s.limited_by == "generator" or s.sustained != steps[0].sustained:
            return steps
        if s.sustained and rate >= max_rate or not s.sustained and rate / factor < MIN_RATE:
            return steps
        rate = min(rate * factor, max_rate) if s.sustained else rate / factor


def first_found(steps: list[Step], queue: str) -> float | None:
    """The rate a queue's first search sustained: where its later searches start."""
    return bracket([s for s in steps if s.queue == queue and s.phase == "search" and s.rep == 1])[0]


def bracket(steps: list[Step]) -> tuple[float | None, float | None]:
    """The highest rate sustained, and the lowest above it that was not."""
    ok = [s.rate for s in steps if s.sustained]
    lo = max(ok) if ok else None
    above = [s.rate for s in steps if not s.sustained and s.limited_by != "generator" and (lo is None or s.rate > lo)]
    return lo, (min(above) if above else None)


def first_limit(steps: list[Step], lo: float | None) -> str | None:
    """What stopped a search: the limit of its lowest rate above `lo` not sustained."""
    above = [s for s in steps if not s.sustained and (lo is None or s.rate > lo)]
    return min(above, key=lambda s: s.rate).limited_by if above else None


def summarize(steps: list[Step]) -> QueueCapacity:
    """A queue's result from its steps (every repetition's search, and the checks)."""
    searched = [s for s in steps if s.phase == "search"]
    runs = [[s for s in searched if s.rep == r] for r in sorted({s.rep for s in searched})] or [[]]
    found = [bracket(run) for run in runs]
    limits = [first_limit(run, lo) for run, (lo, _) in zip(runs, found)]
    lo, hi = found[-1]
    result = QueueCapacity(
        sustained_rate=stats.estimate(f[0] for f in found).as_json(),
        bracket=[lo, hi],
        # the most searches' limit; the last search's on a tie
        limited_by=max(reversed(limits), key=limits.count) if limits else None,
        saturated_rate=saturated_rate(searched).as_json(),
    )
    at = next((s for s in reversed(runs[-1]) if s.sustained and s.rate == lo), None)  # its last step at `lo`
    if at is not None:
        result.api_cpu, result.worker_cpu, result.worker_cpu_limit = at.api_cpu, at.worker_cpu, at.worker_cpu_limit
        if lo and result.worker_cpu_limit:
            result.tasks_per_cpu = round(lo / result.worker_cpu_limit, 1)
    checks: dict[str, bool | None] = {f"{s.factor:g}x": s.sustained for s in steps if s.phase == "check"}
    if checks:
        checks["passed"] = checks.get("0.8x") is True and checks.get("1.3x") is False
        result.checks = checks
    return result


def searches(record: CapacityRecord, queue: str) -> int:
    return sum(queue in order for order in record.order)


def why_stopped(record: CapacityRecord, queue: str, target_pct: float, max_reps: int) -> str:
    """`within` (its interval within +-target_pct %), `max_reps`, or `` while it may search again."""
    est = stats.from_json(summarize([s for s in record.steps if s.queue == queue]).sustained_rate)
    if est.within(target_pct):
        return WITHIN
    return AT_CAP if searches(record, queue) >= max_reps else ""


def still_wide(record: CapacityRecord, target_pct: float, max_reps: int) -> list[str]:
    """The queues to search again: their sustained rate's interval wider than +-target_pct %, fewer than max_reps searches."""
    return [q for q in record.queues_asked if not why_stopped(record, q, target_pct, max_reps)]


# -- Running it ---------------------------------------------------------------------------
@dataclass
class Stepper:
    """Runs the steps of one `make capacity`, each as a load run named <base>-<queue>-<s|c><rate>-<rep>."""

    load: LoadOptions
    options: CapacityOptions
    lab: Lab
    ui: Console
    base: str
    api_limits: ServiceLimits | None = None  # the first run's
    worker_limits: dict[str, ServiceLimits] = field(default_factory=dict)  # each queue's, as its runs recorded them

    def __call__(self, queue: str, rate: float, rep: int = 1, factor: float | None = None) -> Step:
        """One step's run and its verdict; with `factor`, a check of `factor` x the rate found."""
        phase = "search" if factor is None else "check"
        seconds = self.options.step_s if factor is None else self.options.check_duration_s
        run = f"{self.base}-{queue}-{phase[0]}{rate:g}-{rep}".replace(".", "_")
        self.ui.say(f"\n== {queue}: {rate:g} tasks/s ({phase}, repetition {rep})")
        options = self.load.but(worker=queue, rate=rate, duration=seconds, run=run, wait=True)
        record = run_load(options, self.lab, self.ui)
        self.api_limits = self.api_limits or record.limits.api
        self.worker_limits.update(record.limits.workers)
        step = judge(record, queue, rate, self.options.max_wait_s, rep=rep, phase=phase)
        step.factor = factor
        verdict = "sustained" if step.sustained else f"NOT sustained ({step.limited_by}: {'; '.join(step.reasons)})"
        self.ui.say(f"-> {queue} at {rate:g} tasks/s: {verdict}")
        return step


def capacity(load: LoadOptions, given: CapacityOptions, lab: Lab, ui: Console) -> int:
    o = given.parse(load)
    top = o.max_rate or o.start
    load.but(worker=o.queues[0], rate=top, duration=o.step_s).parse()  # the load's own checks
    started = time.time()
    base = load.run or f"capacity-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    seed = random.SystemRandom().randrange(2**31) if o.seed is None else o.seed
    rng = random.Random(seed)
    record = CapacityRecord(
        base=base,
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        queues_asked=o.queues,
        params={
            "endpoint": load.endpoint or "io/simple",
            "step_s": o.step_s,
            "max_wait_s": o.max_wait_s,
            "start": o.start,
            "precision_pct": o.precision,
            "max_rate": top,
            "reps": o.reps,
            "target_pct": o.target_pct,
            "max_reps": o.max_reps if o.target_pct is not None else None,
            "seed": seed,
            "check_s": o.check_duration_s if o.check else None,
        },
        platform=lab.describe(),
        order=[rng.sample(o.queues, len(o.queues)) for _ in range(o.reps)],
    )
    ui.say(f"{o.reps} search(es) of {len(o.queues)} queue(s), max_wait {o.max_wait_s:g} s, steps of {o.step_s:g} s")
    for rep, order in enumerate(record.order, 1):
        ui.say(f"  repetition {rep}: {' '.join(order)}")
    step = Stepper(load, o, lab, ui, base)
    failed = interrupted = ""

    def searched(rep: int, order: list[str]) -> None:
        for queue in order:
            earlier = first_found(record.steps, queue) if rep > 1 else None
            find = partial(walk, start=earlier) if earlier else partial(search, start=o.start)
            record.steps += find(partial(step, queue, rep=rep), max_rate=top, precision_pct=o.precision)

    try:
        for rep, order in enumerate(record.order, 1):
            searched(rep, order)
        while o.target_pct is not None and (wide := still_wide(record, o.target_pct, o.max_reps)):
            record.order.append(rng.sample(wide, len(wide)))
            ui.say(f"\n== repetition {len(record.order)}: {' '.join(record.order[-1])} (interval wider than "
                   f"+-{o.target_pct:g} %)")  # fmt: skip
            searched(len(record.order), record.order[-1])
        for queue in o.queues if o.check else []:
            found = summarize([s for s in record.steps if s.queue == queue]).sustained_rate.get("median")
            record.steps += [step(queue, round(f * found, 2), factor=f) for f in CHECK_FACTORS] if found else []
    except LabError as exc:
        failed = str(exc)
        ui.say(f"\nmake capacity: {exc}")
    except KeyboardInterrupt:
        failed = interrupted = "interrupted"
    ran = [q for q in o.queues if any(s.queue == q for s in record.steps)]
    record.queues = {q: summarize([s for s in record.steps if s.queue == q]) for q in ran}
    if o.target_pct is not None:
        record.stopped = {q: why_stopped(record, q, o.target_pct, o.max_reps) for q in ran}
    record.wall_s = round(time.time() - started, 1)
    record.api_limits, record.worker_limits = limit_text(step.api_limits), workers_limit_text(step.worker_limits)
    store = Store(Path(load.results_dir))
    paths = [
        store.save(record),
        store.write_text(base, ".md", capacity_page.markdown(record)),
        store.write_text(base, ".html", capacity_page.html_page(record)),
    ]
    ui.say("\n" + capacity_page.markdown(record))
    ui.say("written: " + ", ".join(str(p) for p in paths))
    if interrupted:
        raise KeyboardInterrupt
    return EXIT_FAILED if failed or len(ran) < len(o.queues) else EXIT_OK
