"""make claims' record (results/claims-<time>.json, beside its .md and .html):
the queue authors' benchmarks run here, one entry per run. `schema` "claims/1"
(the runs alone: everything below is derived from them, so an older record is
read and decided by this version's rules as far as its runs allow).

Every figure the report shows is derived here from the runs, with labctl/stats.py:
`rows` (each benchmark's rows: the published figure beside the median here, its
95 % interval and n), `verdicts` (each claim's ratio with its interval, the
verdict of its rule, claims_rules.py, and the scale of the runs it rests on)
and `lab_rows` (the lab's own path over the author's, per job shape).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from labctl.records import claims_rules as rules
from labctl.records.base import AsRead, Figure, Record
from labctl.records.claims_published import BENCHES, CLAIMS, STREAQ_CONCURRENCY, Claim
from labctl.stats import Estimate, Ratio, estimate, ratio

SCHEMA = "claims/1"


class Bare(AsRead):
    """The author's benchmark, figure and column a lab path's job shape is set against."""

    bench: str
    figure: str
    column: str = ""


class ConfigParams(AsRead):
    """A configuration's parameters (plan.py); those no report reads (sleep, kind, knobs, ...) kept as read."""

    column: str = ""
    workers: int | None = None
    processes: int | None = None
    shape: str = ""
    bare: Bare | None = None


class Accounting(AsRead):
    """The jobs of a run as counted (steps.account); a benchmark's own counts kept as read."""

    enqueued: int | None = None
    completed: int | None = None
    executions: int | None = None
    duplicates: int | None = None
    lost: int | None = None


class ClaimsRun(BaseModel):
    """One run of one configuration of a benchmark (one repetition)."""

    bench: str
    queue: str  # the row: saq, arq, rq-simple, celery-threads, ...
    path: str  # author (the author's files, patched as the record shows), port, own, lab
    setup: str = "unlimited"  # or limited (0.2 CPU / 200M per worker container)
    rep: int = 1
    n: int = 0
    params: ConfigParams = Field(default_factory=ConfigParams)
    figures: dict[str, float | None] = {}
    accounting: Accounting = Field(default_factory=Accounting)
    status: str = "ok"
    busy_before: float | None = None  # the share of the two cores others used just before
    loadavg: list[float] = []
    started_at: float | None = None
    wall_s: float | None = None
    redis: dict[str, Any] = {}
    output: list[str] = []


class ClaimsParams(AsRead):
    """What make claims was asked."""

    scale: Figure = 1
    reps: int | None = None
    quick: bool = False
    only: list[str] = []
    setups: list[str] = []


class ClaimsSetting(AsRead):
    """Where the runs ran: the image, a limited worker container's limits, Redis and the machine."""

    image: str | None = None
    limits: dict[str, str] | None = None  # cpus, memory
    versions: dict[str, str] = {}  # package -> version, in the image
    redis: dict[str, str] = {}  # from INFO server
    machine: dict[str, str | bool] = {}


class Source(AsRead):
    """A vendored file: where it comes from, its licence, and the patch applied to it as a diff."""

    repo: str = ""
    commit: str = ""
    origin: str = ""
    blob: str = ""
    licence: str = ""
    diff: str = ""


class ClaimsRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""
    wall_s: float | None = None
    params: ClaimsParams = Field(default_factory=ClaimsParams)
    setting: ClaimsSetting = Field(default_factory=ClaimsSetting)
    sources: dict[str, Source] = {}  # per vendored file
    runs: list[ClaimsRun] = []
    notes: list[str] = []
    report: str | None = None


# -- Figures over the repetitions --------------------------------------------------------------
def ok(run: ClaimsRun) -> bool:
    return run.status == "ok"


def select(runs: Iterable[ClaimsRun], bench: str, queue: str, setup: str, column: str = "") -> list[ClaimsRun]:
    return [
        r
        for r in runs
        if r.bench == bench and r.queue == queue and r.setup == setup and (not column or r.params.column == column)
    ]


def values(runs: Iterable[ClaimsRun], figure: str) -> list[float]:
    """The figure of every run that ended ok and has it."""
    return [float(v) for r in runs if ok(r) and (v := r.figures.get(figure)) is not None]


def row_keys(runs: Iterable[ClaimsRun]) -> list[tuple[str, str, str, str]]:
    """(bench, setup, column, queue) of every configuration that ran, in the order it first ran."""
    return list(dict.fromkeys((r.bench, r.setup, r.params.column, r.queue) for r in runs))


def published_figure(bench: str, queue: str, figure: str, column: str = "") -> float | None:
    """The author's figure for this row: for streaq's tables, the column's seconds stand for the timed figure."""
    table = BENCHES[bench]
    if column and figure in ("spawn_done_s", "first_last_s"):
        return table.figure(queue, column)
    if bench == "streaq_sleep" and column and figure == "efficiency" and (seconds := table.figure(queue, column)):
        workers = int(column[1:])
        return round(table.n / (workers * STREAQ_CONCURRENCY) / seconds, 3)
    return table.figure(queue, figure)


@dataclass(frozen=True)
class Beside:
    """A figure as its author published it, and here: the median of the ok runs with its interval and n."""

    published: float | None
    lab: Estimate


@dataclass(frozen=True)
class ConfigRow:
    """One configuration of a benchmark (a row of its table) over its repetitions."""

    bench: str
    setup: str
    column: str
    queue: str
    path: str
    n: int
    params: ConfigParams
    reps: int
    failed: list[str]  # `rep 2: timeout`, one per run that did not finish
    figures: dict[str, Beside]
    lost: int
    duplicates: int


def rows(record: ClaimsRecord) -> list[ConfigRow]:
    """Each configuration's figures: published, and here the median of its ok runs with its 95 % interval and n."""
    out = []
    for bench, setup, column, queue in row_keys(record.runs):
        runs = select(record.runs, bench, queue, setup, column)
        figures = {
            f: Beside(published_figure(bench, queue, f, column), estimate(values(runs, f)))
            for f in BENCHES[bench].figures
        }
        out.append(
            ConfigRow(
                bench=bench,
                setup=setup,
                column=column,
                queue=queue,
                path=runs[0].path,
                n=runs[0].n,
                params=runs[0].params,
                reps=len(runs),
                failed=[f"rep {r.rep}: {r.status}" for r in runs if not ok(r)],
                figures=figures,
                lost=sum(r.accounting.lost or 0 for r in runs),
                duplicates=sum(r.accounting.duplicates or 0 for r in runs),
            )
        )
    return out


# -- Claims --------------------------------------------------------------------------------------
def claim_ratio(runs: list[ClaimsRun], claim: Claim, setup: str) -> Ratio:
    """The claim's ratio with its 95 % interval: the numerator's runs over the denominator's (Welch on
    logs: every ok run of each side counts, a failed run on one side leaves the other's in); for an
    absolute claim, the figure's own interval over its published value."""
    num = values(select(runs, claim.bench, claim.num, setup, claim.column), claim.figure)
    if claim.rule == "absolute":
        published = published_figure(claim.bench, claim.num, claim.figure, claim.column)
        est = estimate(num)
        if est.median is None or not published:
            return Ratio(None, None, None, est.n, 0)
        low, high = (None if x is None else x / published for x in (est.low, est.high))
        return Ratio(est.median / published, low, high, est.n, 0)
    return ratio(num, values(select(runs, claim.bench, claim.den, setup, claim.column), claim.figure))


def workers_published(bench: str, column: str) -> int:
    if column.startswith("w") and column[1:].isdigit():
        return int(column[1:])
    return BENCHES[bench].workers or 1


def scale(runs: list[ClaimsRun], claim: Claim, setup: str) -> str:
    """Where the claim's runs here are smaller than the author's, by how much: N here against N
    published, and the worker processes where they differ. Empty where the runs are the author's size."""
    found = select(runs, claim.bench, claim.num, setup, claim.column)
    if not found:
        return ""
    n, published_n = min(r.n for r in found), BENCHES[claim.bench].n
    workers = found[0].params.workers or found[0].params.processes or 1
    published_w = workers_published(claim.bench, claim.column)
    parts = []
    if n < published_n:
        parts.append(f"N {n:,} here, {published_n:,} published")
    if workers != published_w:
        parts.append(f"{workers} worker process{'es' if workers > 1 else ''} here, {published_w} published")
    return "; ".join(parts)


def event_seen(runs: list[ClaimsRun], claim: Claim, setup: str) -> list[str]:
    """What each run of an event's configuration did here: finished or how it failed, with how long
    its tasks took (first start to last end), their efficiency and the jobs lost."""
    out = []
    for r in select(runs, claim.bench, claim.num, setup, claim.column):
        shown = [f"{f} {r.figures[f]}" for f in ("first_last_s", "efficiency") if r.figures.get(f)]
        shown.append(f"lost {r.accounting.lost}")
        out.append(f"rep {r.rep}: {'finished' if ok(r) else r.status} ({', '.join(shown)})")
    return out


def poll_floor(runs: list[ClaimsRun], claim: Claim, setup: str) -> str:
    """Where arq's side of a claim sits at its poll floor (within a tenth of it in every run), say so:
    the ratio is then the floor over the other queue's time, and moves with the machine's speed."""
    if claim.num != "arq" and claim.den != "arq":
        return ""
    arq = [r for r in select(runs, claim.bench, "arq", setup, claim.column) if ok(r)]
    floors = [(r.figures.get(claim.figure), r.figures.get("noop_floor_s")) for r in arq]
    if floors and all(t and f and abs(t - f) <= 0.1 * f for t, f in floors):
        return (
            f"arq at its poll floor in every run ({floors[0][1]} s: a poll every 0.5 s, "
            "at most queue_read_limit jobs read a poll)"
        )
    return ""


def is_quick(record: ClaimsRecord) -> bool:
    """A quick run (make claims quick=1): a smoke test, whose verdicts are no claim's."""
    return record.params.quick


@dataclass(frozen=True)
class Verdict:
    """A claim decided in one setup: its ratio with its interval (none for an event: what each
    run did, `seen`), what its rule says, the verdict shown (a quick run's: the smoke test's),
    the scale of the runs it rests on, and what the ratio rests on (`cause`)."""

    claim: Claim
    setup: str
    scale: str  # empty where the runs are the author's size
    rule_says: str
    verdict: str
    ratio: Ratio | None = None
    seen: list[str] = field(default_factory=list)
    cause: str = ""

    @property
    def id(self) -> str:
        return self.claim.id


def verdicts(record: ClaimsRecord) -> list[Verdict]:
    """Each claim in each setup that ran: its ratio with its interval, the rule's verdict
    (claims_rules.py), the scale of the runs it rests on, and what the ratio rests on."""
    out = []
    for claim in CLAIMS:
        for setup in ("unlimited", "limited"):
            found = select(record.runs, claim.bench, claim.num, setup, claim.column)
            if not found:
                continue
            r, seen = None, []
            if claim.rule == "event":
                seen = event_seen(record.runs, claim, setup)
                says = rules.event([run.status for run in found])
            else:
                r = claim_ratio(record.runs, claim, setup)
                says = rules.decide(claim.rule, claim.published, r)
            out.append(
                Verdict(
                    claim=claim,
                    setup=setup,
                    scale=scale(record.runs, claim, setup),
                    rule_says=says,
                    verdict=rules.SMOKE if is_quick(record) else says,
                    ratio=r,
                    seen=seen,
                    cause=poll_floor(record.runs, claim, setup),
                )
            )
    return out


@dataclass(frozen=True)
class LabRow:
    """The lab's path for one job shape and queue beside the author's path for the same job."""

    shape: str
    queue: str
    n: int
    lab: Estimate  # the lab's first -> last task, s (its ledger)
    bare: Estimate
    bare_from: str  # the author's benchmark and figure it is set against
    ratio: Ratio  # lab / bare: above 1, the lab slower
    failed: list[str]


def lab_rows(record: ClaimsRecord) -> list[LabRow]:
    """The lab's own path beside the bare one, per job shape and queue: the lab's first -> last
    task (its ledger) over the author's path's figure for the same job, lab / bare (above 1: the lab slower)."""
    out = []
    for r in rows(record):
        if r.bench != "lab_path":
            continue
        bare = r.params.bare
        assert bare is not None, "a lab path's configuration names the author's benchmark it is set against"
        lab = values(select(record.runs, "lab_path", r.queue, r.setup, r.column), "first_last_s")
        base = values(select(record.runs, bare.bench, r.queue, "unlimited", bare.column), bare.figure)
        out.append(
            LabRow(
                shape=r.params.shape,
                queue=r.queue,
                n=r.n,
                lab=estimate(lab),
                bare=estimate(base),
                bare_from=f"{bare.bench} {bare.figure}" + (f" ({bare.column})" if bare.column else ""),
                ratio=ratio(lab, base),
                failed=r.failed,
            )
        )
    return out
