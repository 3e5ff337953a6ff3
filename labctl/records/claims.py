"""make claims' record (results/claims-<time>.json, beside its .md and .html):
the queue authors' benchmarks run here, one entry per run. `schema` "claims/1".

Every figure the report shows is derived here from the runs, by `rows`
(each benchmark's rows: the published figure beside the lab's, mean and range
over the repetitions) and `verdicts` (each claim's ratio, repetition by
repetition, and the rule's answer). The rules (`decide`):

magnitude  a published ratio R holds where every repetition's ratio lies in
           [R/1.5, 1.5 R]; for R >= 2, it fails where any is below 2, and is
           "direction only" where all are at least 2 but none in the band;
           "inconclusive" where the repetitions fall on both sides of an edge.
parity     "on par": every ratio in [0.67, 1.5].
slightly   "slightly faster": the median rate ratio in [1.0, 1.5] and none
           below 0.95; above 1.5 it is much faster (more than claimed); below 1.0 it fails.
much       "much faster": every ratio at least 2.
event      a run that the author saw fail: recorded as it ends here.
absolute   a figure that no machine moves (a sleep-bound rate): every repetition's
           figure within a tenth of the published one (its ratio to it in [0.9, 1.1]).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from labctl.records.base import Record
from labctl.records.claims_published import BENCHES, CLAIMS, Claim

SCHEMA = "claims/1"
BAND = 1.5
PARITY = (0.67, 1.5)
SLIGHTLY = (1.0, 1.5, 0.95)
MUCH = 2.0
ABSOLUTE = (0.9, 1.1)


class ClaimsRun(BaseModel):
    """One run of one configuration of a benchmark (one repetition)."""

    bench: str
    queue: str  # the row: saq, arq, rq-simple, celery-threads, ...
    path: str  # author (the author's files, patched as the record shows), port, own, lab
    setup: str = "unlimited"  # or limited (0.2 CPU / 200M per worker container)
    rep: int = 1
    n: int = 0
    params: dict[str, Any] = {}
    figures: dict[str, float | None] = {}
    accounting: dict[str, Any] = {}
    status: str = "ok"
    busy_before: float | None = None  # the share of the two cores others used just before
    loadavg: list[float] = []
    started_at: float | None = None
    wall_s: float | None = None
    redis: dict[str, Any] = {}
    output: list[str] = []


class ClaimsRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""
    wall_s: float | None = None
    params: dict[str, Any] = {}  # scale, reps, only, setups
    setting: dict[str, Any] = {}  # versions, machine, image, redis
    sources: dict[str, Any] = {}  # per vendored file: origin, commit, blob, licence, the patch as a diff
    runs: list[ClaimsRun] = []
    notes: list[str] = []
    report: str | None = None


# -- Figures over the repetitions --------------------------------------------------------------
def stats(values: Iterable[float | None]) -> dict | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    return {"mean": round(sum(xs) / len(xs), 4), "min": min(xs), "max": max(xs), "n": len(xs)}


def ok(run: ClaimsRun) -> bool:
    return run.status == "ok"


def select(runs: Iterable[ClaimsRun], bench: str, queue: str, setup: str, column: str = "") -> list[ClaimsRun]:
    return [
        r
        for r in runs
        if r.bench == bench
        and r.queue == queue
        and r.setup == setup
        and (not column or r.params.get("column") == column)
    ]


def row_keys(runs: Iterable[ClaimsRun]) -> list[tuple[str, str, str, str]]:
    """(bench, setup, column, queue) of every configuration that ran, in the order it first ran."""
    seen: dict[tuple[str, str, str, str], None] = {}
    for r in runs:
        seen.setdefault((r.bench, r.setup, str(r.params.get("column", "")), r.queue), None)
    return list(seen)


def published_figure(bench: str, queue: str, figure: str, column: str = "") -> float | None:
    """The author's figure for this row: for streaq's tables, the column's seconds stand for the timed figure."""
    row = BENCHES[bench]["published"].get(queue, {})
    if column and figure in ("spawn_done_s", "first_last_s"):
        return row.get(column)
    if bench == "streaq_sleep" and column and figure == "efficiency" and row.get(column):
        workers = int(column[1:])
        return round(BENCHES[bench]["n"] / (workers * 32) / row[column], 3)
    return row.get(figure)


def rows(record: ClaimsRecord) -> list[dict]:
    """Each configuration's figures: published, and the lab's mean/min/max over its ok runs."""
    out = []
    for bench, setup, column, queue in row_keys(record.runs):
        runs = select(record.runs, bench, queue, setup, column)
        good = [r for r in runs if ok(r)]
        figures = {
            f: {"published": published_figure(bench, queue, f, column), "lab": stats(r.figures.get(f) for r in good)}
            for f in BENCHES[bench]["figures"]
        }
        out.append(
            {
                "bench": bench,
                "setup": setup,
                "column": column,
                "queue": queue,
                "path": runs[0].path,
                "n": runs[0].n,
                "params": runs[0].params,
                "reps": len(runs),
                "failed": [f"rep {r.rep}: {r.status}" for r in runs if not ok(r)],
                "figures": figures,
                "lost": sum(int(r.accounting.get("lost") or 0) for r in runs),
                "duplicates": sum(int(r.accounting.get("duplicates") or 0) for r in runs),
            }
        )
    return out


# -- Claims --------------------------------------------------------------------------------------
def rep_ratios(runs: list[ClaimsRun], claim: Claim, setup: str) -> list[float]:
    """The claim's ratio in each repetition where both rows ran to the end (the same rep index);
    for an absolute claim, each repetition's figure over the published one."""
    if claim.rule == "absolute":
        published = published_figure(claim.bench, claim.num, claim.figure, claim.column)
        found = [
            r.figures.get(claim.figure) for r in select(runs, claim.bench, claim.num, setup, claim.column) if ok(r)
        ]
        return [round(v / published, 3) for v in found if v and published]
    num = {r.rep: r for r in select(runs, claim.bench, claim.num, setup, claim.column) if ok(r)}
    den = {r.rep: r for r in select(runs, claim.bench, claim.den, setup, claim.column) if ok(r)}
    out = []
    for rep in sorted(set(num) & set(den)):
        a, b = num[rep].figures.get(claim.figure), den[rep].figures.get(claim.figure)
        if a and b:
            out.append(round(a / b, 3))
    return out


def decide(rule: str, published: float | None, ratios: list[float]) -> str:
    """A claim's verdict from its ratios, one per repetition (the module's docstring)."""
    if not ratios:
        return "no data"
    if rule == "parity":
        lo, hi = PARITY
        inside = [lo <= r <= hi for r in ratios]
        return "holds" if all(inside) else ("fails" if not any(inside) else "inconclusive")
    if rule == "absolute":
        lo, hi = ABSOLUTE
        inside = [lo <= r <= hi for r in ratios]
        return "holds" if all(inside) else ("fails" if not any(inside) else "inconclusive")
    if rule == "much":
        return "holds" if all(r >= MUCH for r in ratios) else "fails"
    if rule == "slightly":
        lo, hi, floor = SLIGHTLY
        median = statistics.median(ratios)
        if median > hi and min(ratios) > hi:
            return "much faster than claimed"
        if lo <= median <= hi and min(ratios) >= floor:
            return "holds"
        return "fails" if median < lo else "inconclusive"
    if rule == "magnitude":
        assert published
        inside = [published / BAND <= r <= published * BAND for r in ratios]
        if all(inside):
            return "holds"
        if published >= 2 and any(r < 2 for r in ratios):
            return "fails"
        if not any(inside):
            return "direction only" if published >= 2 else "fails"
        return "inconclusive"
    raise ValueError(f"unknown rule {rule}")


def event(runs: list[ClaimsRun], claim: Claim, setup: str) -> tuple[str, list[str]]:
    found = select(runs, claim.bench, claim.num, setup, claim.column)
    if not found:
        return "no data", []
    statuses = [r.status for r in found]
    failed = [s for s in statuses if s != "ok"]
    return ("holds: it failed here too" if failed else "fails: it finished here"), statuses


def poll_floor(runs: list[ClaimsRun], claim: Claim, setup: str) -> str:
    """Where arq's side of a claim sits at its poll floor (within a tenth of it in every repetition), say so:
    the ratio is then the floor over the other queue's time, and moves with the machine's speed."""
    if claim.num != "arq" and claim.den != "arq":
        return ""
    arq = [r for r in select(runs, claim.bench, "arq", setup, claim.column) if ok(r)]
    floors = [(r.figures.get(claim.figure), r.figures.get("noop_floor_s")) for r in arq]
    if floors and all(t and f and abs(t - f) <= 0.1 * f for t, f in floors):
        return (
            f"arq at its poll floor in every repetition ({floors[0][1]} s: a poll every 0.5 s, "
            "at most queue_read_limit jobs read a poll)"
        )
    return ""


def verdicts(record: ClaimsRecord) -> list[dict]:
    out = []
    for claim in CLAIMS:
        for setup in ("unlimited", "limited"):
            if not select(record.runs, claim.bench, claim.num, setup, claim.column):
                continue
            entry: dict[str, Any] = {
                "id": claim.id,
                "text": claim.text,
                "bench": claim.bench,
                "setup": setup,
                "num": claim.num,
                "den": claim.den,
                "figure": claim.figure,
                "column": claim.column,
                "rule": claim.rule,
                "published": claim.published,
                "note": claim.note,
            }
            if claim.rule == "event":
                entry["verdict"], entry["statuses"] = event(record.runs, claim, setup)
                entry["ratios"] = []
            else:
                ratios = rep_ratios(record.runs, claim, setup)
                entry["ratios"] = ratios
                entry["ratio"] = stats(ratios)
                entry["verdict"] = decide(claim.rule, claim.published, ratios)
            if cause := poll_floor(record.runs, claim, setup):
                entry["cause"] = cause
            out.append(entry)
    return out


def accounting_ok(accounting: Mapping) -> bool:
    return accounting.get("lost") == 0 and accounting.get("enqueued") == accounting.get("completed")


def lab_rows(record: ClaimsRecord) -> list[dict]:
    """The lab's own path beside the bare one, per job shape and queue: the lab's first -> last
    task (its ledger) over the author's path's figure for the same job, lab / bare (above 1: the lab slower)."""
    out = []
    for r in rows(record):
        if r["bench"] != "lab_path":
            continue
        bare = r["params"]["bare"]
        found = [x for x in select(record.runs, bare["bench"], r["queue"], "unlimited", bare["column"]) if ok(x)]
        lab = r["figures"]["first_last_s"]["lab"]
        base = stats(x.figures.get(bare["figure"]) for x in found)
        out.append(
            {
                "shape": r["params"]["shape"],
                "queue": r["queue"],
                "n": r["n"],
                "lab": lab,
                "bare": base,
                "bare_from": f"{bare['bench']} {bare['figure']}" + (f" ({bare['column']})" if bare["column"] else ""),
                "ratio": round(lab["mean"] / base["mean"], 2) if lab and base and base["mean"] else None,
                "failed": r["failed"],
            }
        )
    return out
