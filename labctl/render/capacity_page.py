"""make capacity's table and page: per queue, the rate sustained (the median of
its searches, 95 % interval and n; the last search's bracket), what stopped the
first rate above it, the CPU there and the rate the worker reached saturated;
then every step; and the wait-against-rate chart of each queue (matplotlib,
inline SVG), each step a point, the sustained ones filled: the hockey stick."""

from __future__ import annotations

import html
from collections.abc import Sequence

from labctl import stats
from labctl.records.capacity import WITHIN, CapacityRecord, QueueCapacity, Step
from labctl.render import charts, plain_page
from labctl.render.table import markdown_table

HEADER = (
    "queue",
    "sustained tasks/s",
    "bracket",
    "limited by",
    "saturated tasks/s",
    "API CPU",
    "worker CPU",
    "tasks/s per CPU",
    "0.8x / 1.3x",
)
STEP_HEADER = (
    "queue",
    "rep",
    "phase",
    "rate",
    "sent",
    "late %",
    "p95 wait s",
    "backlog /s",
    "bound",
    "done/s",
    "verdict",
)
LEGEND = (
    "sustained: the highest rate a search kept (nothing failed, sent on time, the backlog grew by at most 5 % of the "
    "rate over the step's second half, p95 wait under max_wait); the median of the searches [95 % interval] "
    "(n). bracket: the last search's highest rate sustained and the lowest not. saturated: the tasks completed a "
    "second in the steps the worker could not keep up with. CPU: cores used at the sustained rate; tasks/s per CPU: "
    "the sustained rate over the worker's CPU limit."
)


def _check(q: QueueCapacity) -> str:
    if not q.checks:
        return "-"
    shown = " / ".join("held" if q.checks.get(k) else "not" for k in ("0.8x", "1.3x") if k in q.checks)
    return f"{shown} ({'as expected' if q.checks.get('passed') else 'NOT as expected'})"


def bracket_text(bracket: Sequence[float | None]) -> str:
    """`140 – 150`: a search's highest rate sustained and lowest not; `≥ 140` when none failed above it."""
    lo, hi = (list(bracket) + [None, None])[:2]
    return f"{stats.num(lo)} – {stats.num(hi)}" if hi is not None else f"≥ {stats.num(lo)}"


def queue_rows(record: CapacityRecord) -> list[list[str]]:
    return [
        [
            name,
            stats.text(stats.from_json(q.sustained_rate)),
            bracket_text(q.bracket),
            q.limited_by or ("max_rate reached" if q.bracket and q.bracket[0] is not None else "-"),
            stats.text(stats.from_json(q.saturated_rate)),
            stats.num(q.api_cpu),
            stats.num(q.worker_cpu),
            stats.num(q.tasks_per_cpu),
            _check(q),
        ]
        for name, q in record.queues.items()
    ]


def step_row(s: Step) -> list[str]:
    verdict = "sustained" if s.sustained else f"{s.limited_by}: {'; '.join(s.reasons)}"
    return [
        s.queue,
        str(s.rep),
        s.phase,
        stats.num(s.rate),
        stats.num(s.achieved_rate),
        stats.num(s.late_sends_pct),
        stats.num(s.wait_p95_s),
        stats.num(s.backlog_slope),
        stats.num(s.slope_bound),
        stats.num(s.throughput_half),
        verdict,
    ]


def summary_line(record: CapacityRecord) -> str:
    p = record.params
    return (
        f"{record.base}: {', '.join(record.queues_asked)}; endpoint {p.endpoint}, steps of {_g(p.step_s)} s, "
        f"max_wait {_g(p.max_wait_s)} s, precision {_g(p.precision_pct)} %, {p.reps} search(es) "
        f"{target_text(record)}(seed {p.seed}); API {record.api_limits}, worker {record.worker_limits}; "
        f"{len(record.steps)} steps in {stats.num((record.wall_s or 0) / 60)} min"
    )


def _g(x: float | None) -> str:
    """A parameter as given (`0.5`, `30`); `-` where the record has none."""
    return "-" if x is None else f"{x:g}"


def target_text(record: CapacityRecord) -> str:
    """target_pct=: the target, and the queues that did not reach it."""
    p = record.params
    if p.target_pct is None:
        return ""
    short = [f"{q} ({why or 'stopped'})" for q, why in record.stopped.items() if why != WITHIN]
    return (
        f"then more while an interval was wider than +-{p.target_pct:g} % (at most {p.max_reps}; "
        f"not within: {', '.join(short) or 'none'}) "
    )


def markdown(record: CapacityRecord) -> str:
    return (
        f"{summary_line(record)}\n\n{markdown_table(HEADER, queue_rows(record))}\n\n{LEGEND}\n\n"
        f"Every step:\n\n{markdown_table(STEP_HEADER, [step_row(s) for s in record.steps])}\n"
    )


def svg_plot(record: CapacityRecord) -> str:
    """p95 wait against the rate asked, one panel per queue; the sustained steps filled,
    max_wait a dashed line. Each queue's points ride on its line's data-* attributes."""
    names = list(record.queues) or record.queues_asked
    cols = min(3, max(1, len(names)))
    rows = -(-len(names) // cols)
    fig, axes = charts.figure(380 * cols, 300 * rows, rows, cols, squeeze=False)
    data: dict[str, dict[str, object]] = {}
    max_wait = float(record.params.max_wait_s or 0)
    for ax, name in zip(axes.flat, names):
        steps = sorted((s for s in record.steps if s.queue == name and s.wait_p95_s is not None), key=lambda s: s.rate)
        if steps:
            ax.plot([s.rate for s in steps], [s.wait_p95_s for s in steps], color="grey", lw=0.8, gid=f"wait-{name}")
            for s in steps:
                ax.plot(
                    s.rate,
                    s.wait_p95_s,
                    "o",
                    color="tab:green" if s.sustained else "tab:red",
                    fillstyle="full" if s.sustained else "none",
                )
            data[f"wait-{name}"] = {"queue": name, "samples": [[s.rate, s.wait_p95_s] for s in steps]}
        if max_wait:
            ax.axhline(max_wait, ls="--", color="red", lw=0.8)
        ax.set_yscale("symlog", linthresh=0.1)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("tasks/s asked")
        ax.set_ylabel("p95 wait s")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(f"make capacity ({record.base}): p95 wait against the rate; filled = sustained", fontsize=10)
    fig.tight_layout()
    return charts.svg_with_line_data(charts.svg(fig), data)


def html_page(record: CapacityRecord) -> str:
    return plain_page.page(
        record.base,
        f"<h1>make capacity</h1>\n<p>{html.escape(summary_line(record))}</p>\n"
        f"{plain_page.table(HEADER, queue_rows(record))}\n<p>{html.escape(LEGEND)}</p>\n{svg_plot(record)}\n"
        f"<h2>Every step</h2>\n{plain_page.table(STEP_HEADER, [step_row(s) for s in record.steps])}\n",
    )
