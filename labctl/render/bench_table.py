"""make bench's tables: every figure of a bench record, bare beside lab, and
the short one `make results` shows (the ratios against the budget). Each ratio
is its median over the pairs, its interval and n (labctl/records/bench.py,
`BudgetRatio`): ✗ under the budget, `unsure` where the interval holds it."""

from __future__ import annotations

import statistics

from labctl.records.bench import (
    BUDGET_PEAK_MB,
    BUDGET_RATIO,
    ApiLoad,
    BenchRecord,
    BenchRow,
    BudgetRatio,
    Drain,
    _ratio,
    drain_cpu_ratio,
    drain_ratio,
    rps_ratio,
)
from labctl.records.run import limit_text
from labctl.render.run_table import arq_knobs
from labctl.render.table import markdown_table

FAST_ARQ_POLL = "0.01"


LEGEND = (
    f"Ratios: lab ÷ bare, the median over the rounds (RPS) or the drain's pairs of windows, its 95 % interval "
    f"and n, rounded down; ✗ under the {BUDGET_RATIO:g} budget; unsure: the interval holds {BUDGET_RATIO:g}, "
    f"so the median may be on either side of it (more rounds narrow it: docs/bench.md)."
)


def ratio_cell(r: BudgetRatio, judge: bool = True) -> str:
    """`0.93 [0.88–0.97] (n=8)`; under the budget `0.89 ✗ [0.85–0.93] (n=8)`; `unsure` at the end
    when the interval holds the budget; `(no interval)` without one. judge=False:
    the figure without its verdict (a ratio judged by another, the drain's CPU)."""
    if r.value is None:
        return "-"
    text = f"{r.value:.2f}" + ("" if r.meets or not judge else " ✗")
    text += f" [{r.low:.2f}–{r.high:.2f}] (n={r.n})" if r.has_interval else " (no interval)"
    return text + (" unsure" if r.unsure and judge else "")


def spread(ratios: list[float]) -> str:
    """`median 0.95, 0.88-1.02 over 12 pairs`: how far one pair of windows moves the ratio."""
    if not ratios:
        return ""
    return f"median {statistics.median(ratios):.2f}, {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} pairs"


# -- The table -----------------------------------------------------------------------------
def _by_round(what: str, bare_rounds: list[float | None], lab_rounds: list[float | None]) -> list[str]:
    """Each round's lab / bare ratio (round i of one side ran next to round i of the other). Driven together,
    one round's RPS ratio moves little about its mean (docs/results/2026-11-28-figures-out-of-comments.md), so
    rounds spread much wider say the machine was not quiet; one drain window's ratio moves far more (_drain_pairs)."""
    if not bare_rounds or not lab_rounds or len(bare_rounds) != len(lab_rounds) or len(bare_rounds) < 2:
        return []
    ratios = [_ratio(lab, bare) for bare, lab in zip(bare_rounds, lab_rounds)]
    return [f"{what} ratio by round {', '.join('-' if r is None else f'{r:g}' for r in ratios)}"]


def _drain_pairs(bare_rounds: list[float | None], lab_rounds: list[float | None]) -> list[str]:
    """Drains in windows taken in turns (experiments/bench/paired_windows.py): the median and
    range of the pairs' ratios; records of two rounds list each round's."""
    if bare_rounds and lab_rounds and len(bare_rounds) == len(lab_rounds) > 4:
        ratios = [lab / bare for bare, lab in zip(bare_rounds, lab_rounds) if bare and lab is not None]
        return [f"drain pairs {spread(ratios)}"]
    return _by_round("drain", bare_rounds, lab_rounds)


# A window in which a worker used less than this share of its CPU quota was
# not held back by its CPU: its rate there says how the library schedules
# tasks, not what a task costs.
CPU_BOUND_SHARE = 0.8


def _idle_windows(drain: Drain, cpus: float | None) -> int:
    """How many of a side's windows its worker spent partly idle (see CPU_BOUND_SHARE)."""
    if not cpus:
        return 0
    return sum(1 for w in drain.windows if w.cpu_s is not None and w.s and w.cpu_s / w.s / cpus < CPU_BOUND_SHARE)


def _not_cpu_bound(bare: Drain, lab: Drain, cpus: float | None) -> list[str]:
    """A note for a drain whose windows were not all CPU-bound. arq at a fast poll under a small CPU quota runs
    at one of two rates: flat out, or, sleeping between polls with its few jobs done, at a fraction of it and of
    its quota; which one, from one window to the next, is the quota's timing. Its ratio then compares two
    schedules, and the CPU per task is what says what the lab costs."""
    idle = [
        f"{name} {n} of {len(drain.windows)}"
        for name, drain in (("bare", bare), ("lab", lab))
        if (n := _idle_windows(drain, cpus))
    ]
    return [f"windows not CPU-bound (under {CPU_BOUND_SHARE:.0%} of the quota): {', '.join(idle)}"] if idle else []


def _drain_cell(b: Drain, l: Drain, cpus: float | None) -> str:
    """The drain ratio, judged. A rate under budget from workers whose windows were not all CPU-bound is judged
    again on the CPU each side spent per task (bare ÷ lab: the ratio two CPU-bound workers would show), written
    beside it: such a rate says how the library scheduled its tasks in those windows (arq at a fast poll: its
    rate ratio moved from bench to bench far more than its CPU per task did: the figures in
    docs/results/2026-11-28-figures-out-of-comments.md). (A rate at or above budget needs no second figure:
    arq at its default polling spends most of its CPU idle, and its CPU per task says nothing about a task.)"""
    rate, cpu = drain_ratio(b, l), drain_cpu_ratio(b, l)
    if rate.meets or cpu.value is None or not (_idle_windows(b, cpus) or _idle_windows(l, cpus)):
        return ratio_cell(rate)
    return f"{ratio_cell(rate, judge=False)} (CPU {ratio_cell(cpu)})"


def _or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _as_written(value: float | None) -> str:
    """A figure as the record holds it: 310.0 stays 310.0, as the bench rounded it to its tenth."""
    return "-" if value is None else str(value)


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


def table(records: list[BenchRecord]) -> str:
    cells = (cells for record in records for cells in rows_cells(record))
    return markdown_table(HEADER, cells, TEXT) + "\n\n" + LEGEND


def _row_notes(bare: ApiLoad, lab: ApiLoad) -> list[str]:
    """What the notes column says of a queue's load, bare and lab: generator, errors, publishing, rounds."""
    notes = []
    if bare.generator_bound or lab.generator_bound:
        notes.append("generator CPU-bound")
    if bare.errors or lab.errors:
        notes.append(f"errors bare {bare.errors} / lab {lab.errors}")
    for side, result, where in (("bare", bare, "never in its queue"), ("lab", lab, "lab_enqueue_errors_total")):
        if result.published is not None and result.published < result.enqueued:
            notes.append(
                f"{side}: {result.enqueued - result.published} of {result.enqueued} "
                f"accepted tasks not published ({where})"
            )
        if result.api_down:  # the first round it was seen down says when and why
            notes.append(f"{side} API down from {result.api_down[0]}")
    notes += _by_round("RPS", bare.rps_rounds, lab.rps_rounds)
    return notes


def _load_cells(bare: ApiLoad, lab: ApiLoad) -> tuple[str, ...]:
    """The load's cells, bare beside lab: RPS and its ratio, API CPU per request, latency, API memory."""
    return (
        _as_written(bare.rps),
        _as_written(lab.rps),
        ratio_cell(rps_ratio(bare, lab)),
        f"{bare.api_cpu_us_per_request or '-'} / {lab.api_cpu_us_per_request or '-'}",
        f"{_as_written(bare.p50_ms)}/{_as_written(bare.p95_ms)}",
        f"{_as_written(lab.p50_ms)}/{_as_written(lab.p95_ms)}",
        _as_written(bare.api_peak_mb),
        _or_dash(lab.api_peak_mb) + (" ✗" if (lab.api_peak_mb or 0) > BUDGET_PEAK_MB else ""),
    )


def _drain_cells(row: BenchRow, fast: bool) -> list[str]:
    """A drain's cells, bare beside lab: its rates, their ratio (judged), the CPU a task."""
    b, l = row.drains_or_empty(fast)
    measured = row.drains(fast)[0] is not None
    return [
        _or_dash(b.rate),
        _or_dash(l.rate),
        _drain_cell(b, l, row.worker_cpus) if measured else "-",
        f"{b.cpu_us_per_task or '-'} / {l.cpu_us_per_task or '-'}" if measured else "-",
    ]


def _drain_notes(row: BenchRow, fast: bool) -> list[str]:
    """What the notes column says of a drain: the spread of its pairs' ratios, the windows not CPU-bound."""
    b, l = row.drains_or_empty(fast)
    return _drain_pairs(b.window_rates(), l.window_rates()) + _not_cpu_bound(b, l, row.worker_cpus)


def _limits(record: BenchRecord, row: BenchRow) -> str:
    return f"{limit_text(record.api_limits)} / {limit_text(row.worker_limits)}"


def _row_line(record: BenchRecord, row: BenchRow, fast: bool, extra_notes: list[str]) -> list[str]:
    """One table row: the fast drain's row (arq's at a fast poll) has the drain's cells only."""
    return [
        row.queue + (f" (ARQ_POLL_DELAY={FAST_ARQ_POLL})" if fast else ""),
        record.mode,
        _limits(record, row),
        *(("",) * 8 if fast else _load_cells(row.bare, row.lab)),
        *_drain_cells(row, fast),
        "; ".join(extra_notes + _drain_notes(row, fast)),
        record.run,
    ]


def rows_cells(record: BenchRecord) -> list[list[str]]:
    """The cells of each row: one per queue, and arq's again at a fast poll."""
    lines = []
    for row in record.rows:
        arq_note = [arq_knobs(record.knobs)] if row.queue == "arq" else []
        lines.append(_row_line(record, row, False, arq_note + _row_notes(row.bare, row.lab)))
        if row.bare_drain_fast is not None:
            lines.append(_row_line(record, row, True, []))
    return lines


def short_table(record: BenchRecord) -> str:
    """One bench as `make results` shows it by default: its ratios, judged as in the full table."""
    cells = [
        [
            row.queue,
            record.mode,
            _limits(record, row),
            ratio_cell(rps_ratio(row.bare, row.lab)),
            ratio_cell(drain_ratio(*row.drains_or_empty())),
            record.run,
        ]
        for row in record.rows
    ]
    header = ("queue", "mode", "API / worker limits", "RPS lab/bare", "drain lab/bare", "run")
    return markdown_table(header, cells, header) + "\n\n" + LEGEND  # every column text
