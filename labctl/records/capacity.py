"""make capacity's record (results/capacity-<time>.json, beside its .md and
.html): for each queue, the highest arrival rate the whole path sustains under
the limits in force, from steps of open-model load. `schema` "capacity/1".

A step is one `make load worker=Q rate=R duration=<step>` with wait=1, judged
by `judge` from its run record alone:

  errors     a request failed, or a task failed or was lost
  generator  Locust's own processes ran out of CPU: the step says nothing of the queue
  api        the rate the API took over the step's second half (its enqueue
             counter as scraped, else the ledger's timeline) fell under
             RATE_KEPT of the rate asked, or over LATE_SHARE of the sends of
             the schedule's second half went late (every user was waiting on the API)
  worker     over the step's second half the backlog grew faster than GROWTH_SHARE
             of the rate (its least-squares slope), or the p95 wait (enqueue to
             start) passed max_wait

and sustained when none of these holds. The p95 wait comes from the lab's
histograms (lab_task_wait_seconds), interpolated within a bucket; compared
with a max_wait that is a bucket bound (5 s by default) the comparison is exact.
The backlog is the ledger's pending count, exact, read once a second."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from labctl import stats
from labctl.queues import service_of
from labctl.records.base import AsRead, Figure, Record
from labctl.records.run import Quantiles, Resources, RunRecord, TaskTimes

SCHEMA = "capacity/1"
RATE_KEPT = 0.95  # the API answered fast enough that the schedule sent this share of the rate
LATE_SHARE_PCT = 5.0  # ...and at most this share of the sends went late
# The backlog may grow at most this share of the rate over the step's second half:
# slower than that, it takes twenty steps to hold one step of arrivals. A slope over
# every second of the half, not two readings: the tasks a worker holds in flight or
# fetched in one batch make any one reading jump by that many. The slope itself is
# compared, not the low end of its interval: a rule that gave the benefit of the
# doubt called steps sustained whose queue completed fewer tasks a second than it
# was sent (docs/capacity.md).
GROWTH_SHARE = 0.05
LIMITS = ("errors", "generator", "api", "worker")
# Why a queue's searches stopped under target_pct=: its interval got within the target,
# or it reached max_reps.
WITHIN, AT_CAP = "within", "max_reps"


class Step(Record):
    """One step of a search: a rate, what its run showed, and the verdict."""

    queue: str
    rate: float  # asked, requests (tasks) a second
    run: str
    rep: int = 1
    phase: str = "search"  # search, or check (0.8x and 1.3x of the found rate)
    factor: float | None = None  # a check's rate over the rate found
    sustained: bool = False
    limited_by: str | None = None  # one of LIMITS when not sustained
    reasons: list[str] = []
    achieved_rate: float | None = None  # requests a second over the whole load, its users' start included
    sent_half: float | None = None  # tasks the API took a second over the second half (the api rule's)
    late_sends_pct: float | None = None  # of the sends of the schedule's second half (else of the whole step)
    failures: int = 0
    wait_p50_s: float | None = None
    wait_p95_s: float | None = None
    latency_p95_s: float | None = None
    backlog_slope: float | None = None  # tasks/s: the ledger's pending over the load's second half
    backlog_slope_low: float | None = None  # ...the low end of its 95 % interval
    slope_bound: float | None = None
    throughput_half: float | None = None  # tasks completed a second over the second half
    api_cpu: float | None = None  # cores used over the run's window
    worker_cpu: float | None = None
    worker_cpu_limit: float | None = None


class QueueCapacity(Record):
    """A queue's result over its searches."""

    sustained_rate: dict[str, Any] = {}  # stats.Estimate over the searches: median, low, high, n
    bracket: list[float | None] = []  # the last search's highest rate sustained and lowest not
    limited_by: str | None = None  # why the first rate above it was not sustained (most searches)
    saturated_rate: dict[str, Any] = {}  # Estimate of the worker's throughput in its saturated steps
    api_cpu: float | None = None  # at the sustained rate (the step's run)
    worker_cpu: float | None = None
    worker_cpu_limit: float | None = None
    tasks_per_cpu: float | None = None  # the sustained rate over the worker's CPU limit
    checks: dict[str, bool | None] = {}  # "0.8x"/"1.3x": sustained; "passed": 0.8x held and 1.3x did not


class CapacityParams(AsRead):
    """What make capacity was asked: its steps' load and how its searches ran."""

    endpoint: str = ""
    step_s: Figure = 0
    max_wait_s: Figure | None = None
    start: Figure | None = None
    precision_pct: Figure | None = None
    max_rate: Figure | None = None
    reps: int = 1
    target_pct: Figure | None = None
    max_reps: int | None = None
    seed: int | None = None
    check_s: Figure | None = None  # the checks' duration (check=1)


class CapacityRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    base: str
    time: str = ""
    queues_asked: list[str] = []
    params: CapacityParams = CapacityParams()
    platform: dict[str, Any] = {}
    api_limits: str | None = None
    worker_limits: str | None = None
    order: list[list[str]] = []  # each repetition's queues in the order they ran
    stopped: dict[str, str] = {}  # target_pct=: why each queue's searches stopped (WITHIN or AT_CAP)
    steps: list[Step] = []
    queues: dict[str, QueueCapacity] = {}
    wall_s: float | None = None


def second_half(record: RunRecord) -> tuple[stats.Interval, float, float] | None:
    """Over the second half of the load, from the ledger's timeline (at, enqueued,
    completed, failed, pending, once a second): the backlog's slope with its
    interval, the tasks completed a second and the tasks taken a second
    (least-squares slopes, tasks/s). The half starts once every user has long
    started: the whole load's rate is short of the rate asked by the seconds the
    users took to start (100 a second, two per task a second)."""
    start, end, timeline = record.load_started_at, record.load_ended_at, record.timeline
    if not start or not end or timeline is None:
        return None
    rows = [r for r in timeline.rows if (start + end) / 2 <= r[0] <= end]
    if len(rows) < 3:
        return None
    at = [r[0] for r in rows]
    pending, done, sent = (stats.slope_interval(at, [r[col] for r in rows]) for col in (4, 2, 1))
    return (pending, done.mean, sent.mean) if pending is not None and done is not None and sent is not None else None


def scraped_half(record: RunRecord) -> float | None:
    """The tasks the API took a second over the second half of the load, from its
    enqueue counter as Prometheus scraped it every 2 s (the record's enqueued_scrapes).
    The ledger's timeline is read through the loaded API, whose answers can come
    seconds late near its limit; the counter is scraped from its metrics thread.
    None without the scrapes (older records: the timeline's slope stands)."""
    start, end, scrapes = record.load_started_at, record.load_ended_at, record.enqueued_scrapes
    if not start or not end or scrapes is None:
        return None
    return scrapes.rate((start + end) / 2, end)


def judge(
    record: RunRecord, queue: str, rate: float, max_wait_s: float, *, rep: int = 1, phase: str = "search"
) -> Step:
    """A step's verdict from its run record (the module's docstring says the rules)."""
    tasks = record.tasks
    times = (record.task_times or {}).get(queue) or TaskTimes()
    wait, latency = times.wait or Quantiles(), times.latency or Quantiles()
    resources = record.resources or {}
    api, worker = resources.get("api") or Resources(), resources.get(service_of(queue)) or Resources()
    step = Step(
        queue=queue,
        rate=rate,
        run=record.run,
        rep=rep,
        phase=phase,
        achieved_rate=record.rps,
        # Over the schedule's second half, where the users' start is behind it; the whole
        # step's share for a record without it.
        late_sends_pct=(
            record.late_sends_steady_pct if record.late_sends_steady_pct is not None else record.late_sends_pct
        ),
        failures=record.failures + ((tasks.failed or 0) + (tasks.lost or 0) if tasks else 0),
        wait_p50_s=wait.p50,
        wait_p95_s=wait.p95,
        latency_p95_s=latency.p95,
        api_cpu=api.cpu_used_cores,
        worker_cpu=worker.cpu_used_cores,
        worker_cpu_limit=worker.cpu_limit_cores,
    )
    half = second_half(record)
    if half is not None:
        step.backlog_slope, step.backlog_slope_low = round(half[0].mean, 2), round(half[0].low, 2)
        step.throughput_half, step.sent_half = round(half[1], 2), round(half[2], 2)
        step.slope_bound = round(rate * GROWTH_SHARE, 2)
    scraped = scraped_half(record)
    if scraped is not None:
        step.sent_half = scraped
    reasons: dict[str, list[str]] = {k: [] for k in LIMITS}
    if step.failures:
        reasons["errors"].append(f"{step.failures} request(s) or task(s) failed or lost")
    if not tasks or not tasks.settled:
        reasons["errors"].append("the step's tasks did not all settle")
    if record.generator.cpu_bound:
        reasons["generator"].append("Locust's processes ran out of CPU")
    taken = step.sent_half if step.sent_half is not None else step.achieved_rate  # no timeline: the whole load's
    if taken is None or taken < RATE_KEPT * rate:
        reasons["api"].append(f"took {taken} of {rate:g} tasks/s over the second half")
    if (step.late_sends_pct or 0) > LATE_SHARE_PCT:
        reasons["api"].append(f"{step.late_sends_pct:g} % of the sends late")
    if step.backlog_slope is None or step.slope_bound is None:
        reasons["worker"].append("no timeline to read the backlog from")
    elif step.backlog_slope > step.slope_bound:
        reasons["worker"].append(
            f"backlog grew {step.backlog_slope:g} tasks/s [from {step.backlog_slope_low:g}] (bound {step.slope_bound:g})"
        )
    if step.wait_p95_s is None:
        reasons["worker"].append("no task wait recorded")
    elif step.wait_p95_s > max_wait_s:
        reasons["worker"].append(f"p95 wait {step.wait_p95_s:g} s > {max_wait_s:g} s")
    step.limited_by = next((k for k in LIMITS if reasons[k]), None)
    step.sustained = step.limited_by is None
    step.reasons = [r for k in LIMITS for r in reasons[k]]
    return step


def saturated_rate(steps: list[Step]) -> stats.Estimate:
    """The worker's throughput where it could not keep up: each step limited by the
    worker gives one (its completions a second over the second half, when the backlog
    was there to work on)."""
    return stats.estimate(
        s.throughput_half
        for s in steps
        if s.limited_by == "worker" and s.backlog_slope_low is not None and s.backlog_slope_low > (s.slope_bound or 0)
    )
