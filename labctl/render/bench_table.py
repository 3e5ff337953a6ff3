"""make bench's tables: every figure of a bench record, bare beside lab, and
the short one `make results` shows (the ratios against the budget). Each ratio
is its median over the pairs, its interval and n (labctl/records/bench.py,
`BudgetRatio`): ✗ under the budget, `unsure` where the interval holds it."""

from __future__ import annotations

import statistics
from typing import Any

from labctl.platform.containers import limit_text
from labctl.records.bench import (
    BUDGET_PEAK_MB,
    BUDGET_RATIO,
    BenchRecord,
    BudgetRatio,
    _ratio,
    drain_cpu_ratio,
    drain_ratio,
    ratios,
    rps_ratio,
    window_rates,
)
from labctl.render.run_table import arq_knobs
from labctl.render.table import markdown_table

FAST_ARQ_POLL = "0.01"


LEGEND = (
    f"Ratios: lab ÷ bare, the median over the rounds (RPS) or the drain's pairs of windows, its 95 % interval "
    f"and n, rounded down; ✗ under the {BUDGET_RATIO:g} budget; unsure: the interval holds {BUDGET_RATIO:g}, "
    f"so the median may be on either side of it (more rounds narrow it: docs/bench.md)."
)


def _data(record: BenchRecord | dict[str, Any]) -> dict[str, Any]:
    return record.as_json() if isinstance(record, BenchRecord) else record


def ratio_cell(r: BudgetRatio, judge: bool = True) -> str:
    """`0.93 [0.88–0.97] (n=8)`; under the budget `0.89 ✗ [0.85–0.93] (n=8)`; `unsure` at the end
    when the interval holds the budget; `(no interval)` without one. judge=False:
    the figure without its verdict (a ratio judged by another, the drain's CPU)."""
    if r.value is None:
        return "-"
    text = f"{r.value:.2f}" + ("" if r.meets or not judge else " ✗")
    text += f" [{r.low:.2f}–{r.high:.2f}] (n={r.n})" if r.has_interval else " (no interval)"
    return text + (" unsure" if r.unsure and judge else "")


def pair_ratios(bare_rates: list[float | None], lab_rates: list[float | None]) -> list[float]:
    return [lab / bare for bare, lab in zip(bare_rates, lab_rates) if bare and lab is not None]


def spread(ratios: list[float]) -> str:
    """`median 0.95, 0.88-1.02 over 12 pairs`: how far one pair of windows moves the ratio."""
    if not ratios:
        return ""
    return f"median {statistics.median(ratios):.2f}, {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} pairs"


# -- The table -----------------------------------------------------------------------------
def _by_round(what: str, bare_rounds: list[float | None] | None, lab_rounds: list[float | None] | None) -> list[str]:
    """Each round's lab / bare ratio (round i of one side ran next to round i of
    the other). Driven together, one round's RPS ratio moves little about its
    mean (docs/results/2026-11-28-figures-out-of-comments.md), so rounds spread much wider say the machine was not
    quiet; one drain window's ratio moves far more (_drain_pairs)."""
    if not bare_rounds or not lab_rounds or len(bare_rounds) != len(lab_rounds) or len(bare_rounds) < 2:
        return []
    ratios = [_ratio(lab, bare) for bare, lab in zip(bare_rounds, lab_rounds)]
    return [f"{what} ratio by round {', '.join('-' if r is None else f'{r:g}' for r in ratios)}"]


def _drain_pairs(bare_rounds: list[float | None], lab_rounds: list[float | None]) -> list[str]:
    """Drains in windows taken in turns (experiments/bench/paired_windows.py): the median and
    range of the pairs' ratios; records of two rounds list each round's."""
    if bare_rounds and lab_rounds and len(bare_rounds) == len(lab_rounds) > 4:
        return [f"drain pairs {spread(pair_ratios(bare_rounds, lab_rounds))}"]
    return _by_round("drain", bare_rounds, lab_rounds)


# A window in which a worker used less than this share of its CPU quota was
# not held back by its CPU: its rate there says how the library schedules
# tasks, not what a task costs.
CPU_BOUND_SHARE = 0.8


def _idle_windows(drain: dict[str, Any], cpus: float | None) -> int:
    """How many of a side's windows its worker spent partly idle (see CPU_BOUND_SHARE)."""
    if not cpus:
        return 0
    return sum(
        1
        for w in drain.get("windows") or []
        if w.get("cpu_s") is not None and w.get("s") and w["cpu_s"] / w["s"] / cpus < CPU_BOUND_SHARE
    )


def _not_cpu_bound(bare: dict[str, Any], lab: dict[str, Any], cpus: float | None) -> list[str]:
    """A note for a drain whose windows were not all CPU-bound. arq at
    a fast poll under a small CPU quota runs at one of two rates: flat out, or,
    sleeping between polls with its few jobs done, at a fraction of it and of
    its quota; which one, from one window to the next, is the quota's timing. Its ratio then compares two schedules, and the CPU per task is
    what says what the lab costs."""
    idle = [
        f"{name} {n} of {len(drain['windows'])}"
        for name, drain in (("bare", bare), ("lab", lab))
        if (n := _idle_windows(drain, cpus))
    ]
    return [f"windows not CPU-bound (under {CPU_BOUND_SHARE:.0%} of the quota): {', '.join(idle)}"] if idle else []


def _drain_cell(b: dict[str, Any], l: dict[str, Any], cpus: float | None) -> str:
    """The drain ratio, judged. A rate under budget from
    workers whose windows were not all CPU-bound is judged again on the CPU
    each side spent per task (bare ÷ lab: the ratio two CPU-bound workers
    would show), written beside it: such a rate says how the library
    scheduled its tasks in those windows (arq at a fast poll: its rate ratio
    moved from bench to bench far more than its CPU per task did: the figures in
    docs/results/2026-11-28-figures-out-of-comments.md).
    (A rate at or above
    budget needs no second figure: arq at its default polling spends most of
    its CPU idle, and its CPU per task says nothing about a task.)"""
    rate, cpu = drain_ratio(b, l), drain_cpu_ratio(b, l)
    if rate.meets or cpu.value is None or not (_idle_windows(b, cpus) or _idle_windows(l, cpus)):
        return ratio_cell(rate)
    return f"{ratio_cell(rate, judge=False)} (CPU {ratio_cell(cpu)})"


def _or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _mark(value: float | None, ok: bool) -> str:
    return _or_dash(value) + ("" if ok or value is None else " ✗")


HEADER = (
    "queue",
    "mode",
    "API / worker limits",
    "bare RPS",
    "lab RPS",
    "RPS ratio",
    "API CPU µs/request bare / lab",
    "bare p50/p95 ms",
    "lab p50/p95 ms",
    "bare API peak MB",
    "lab API peak MB",
    "bare drain/s",
    "lab drain/s",
    "drain ratio",
    "worker CPU µs/task bare / lab",
    "notes",
    "run",
)
TEXT = {
    "queue",
    "mode",
    "API / worker limits",
    "RPS ratio",
    "bare p50/p95 ms",
    "lab p50/p95 ms",
    "drain ratio",
    "notes",
    "run",
}


def table(records: list[BenchRecord | dict[str, Any]]) -> str:
    cells = (cells for record in records for cells in rows_cells(_data(record)))
    return markdown_table(HEADER, cells, TEXT) + "\n\n" + LEGEND


def _row_notes(bare: dict[str, Any], lab: dict[str, Any]) -> list[str]:
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


def _load_cells(bare: dict[str, Any], lab: dict[str, Any]) -> tuple[str, ...]:
    """The load's cells, bare beside lab: RPS and its ratio, API CPU per request, latency, API memory."""
    lab_peak = lab.get("api_peak_mb")
    return (
        f"{bare.get('rps', '-')}",
        f"{lab.get('rps', '-')}",
        ratio_cell(rps_ratio(bare, lab)),
        f"{bare.get('api_cpu_us_per_request') or '-'} / {lab.get('api_cpu_us_per_request') or '-'}",
        f"{bare.get('p50_ms', '-')}/{bare.get('p95_ms', '-')}",
        f"{lab.get('p50_ms', '-')}/{lab.get('p95_ms', '-')}",
        f"{bare.get('api_peak_mb', '-')}",
        _mark(lab_peak, (lab_peak or 0) <= BUDGET_PEAK_MB),
    )


def _row_line(
    record: dict[str, Any], row: dict[str, Any], suffix: str, label: str, extra_notes: list[str]
) -> list[str]:
    """One table row: a labelled row (the fast drain) has the drain's cells only."""
    q, bare, lab = row["queue"], row.get("bare") or {}, row.get("lab") or {}
    api = limit_text(record.get("api_limits"))
    limits = f"{api} / {limit_text(row.get('worker_limits')) if row.get('worker_limits') else '-'}"
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
        "; ".join(extra_notes + _drain_pairs(window_rates(b), window_rates(l)) + _not_cpu_bound(b, l, cpus)) or "",
        record.get("run", ""),
    ]
    return [str(x) for x in cells]


def rows_cells(record: dict[str, Any]) -> list[list[str]]:
    """The cells of each row: one per queue, and arq's again at a fast poll."""
    lines = []
    for row in record["rows"]:
        notes = _row_notes(row.get("bare") or {}, row.get("lab") or {})
        arq_note = [arq_knobs(record.get("knobs") or {})] if row["queue"] == "arq" else []
        lines.append(_row_line(record, row, "", "", arq_note + notes))
        if "bare_drain_fast" in row:
            lines.append(_row_line(record, row, "_fast", f" (ARQ_POLL_DELAY={FAST_ARQ_POLL})", []))
    return lines


def short_table(record: BenchRecord | dict[str, Any]) -> str:
    """One bench as `make results` shows it by default: its ratios, judged as in the full table."""
    cells = [
        [
            r["queue"],
            r["mode"],
            f"{r['api_limits']} / {r['worker_limits']}",
            ratio_cell(BudgetRatio.from_json(r["rps_ratio_interval"])),
            ratio_cell(BudgetRatio.from_json(r["drain_ratio_interval"])),
            r["run"],
        ]
        for r in ratios(_data(record))
    ]
    header = ("queue", "mode", "API / worker limits", "RPS lab/bare", "drain lab/bare", "run")
    text = {"queue", "mode", "API / worker limits", "RPS lab/bare", "drain lab/bare", "run"}
    return markdown_table(header, cells, text) + "\n\n" + LEGEND
