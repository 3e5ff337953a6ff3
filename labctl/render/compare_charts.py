"""A comparison's charts, matplotlib drawn as inline SVG for its report page: a
panel per queue over time for each series (each run a thin line, the median over
its runs a thick one), and each queue's median with its 95 % interval for each
ranked figure. Every line's and bar's group carries its numbers as data-*
attributes. One colour per queue.
"""

from __future__ import annotations

import statistics

from labctl.queues import QUEUES
from labctl.records.compare import CompareRecord
from labctl.records.compare_figures import RANKED
from labctl.render import charts
from labctl.render.plain_page import esc

# One colour per queue, the same in every report (labctl.queues.QUEUES' order): matplotlib's tab10.
PALETTE = charts.TAB10
CHARTS = (
    ("requests", "Requests per second, as Locust sent them", "req/s"),
    ("throughput", "Throughput: tasks completed per second", "tasks/s"),
    ("backlog", "Backlog: tasks waiting in the queue", "tasks"),
    ("done_pct", "The drain: the run's tasks completed so far", "% of the run's tasks"),
)


def colour(queue: str) -> str:
    order = list(QUEUES)
    return PALETTE[order.index(queue) % len(PALETTE)] if queue in order else "#000"


PANEL_W, PANEL_H, PANELS_PER_ROW = 190, 150, 5


def median_line(samples: list[list[list[float]]], step: float) -> list[list[float]]:
    """The median over runs at each instant (t rounded to the sampling step), where at
    least half the runs have a sample."""
    at: dict[float, list[float]] = {}
    for run in samples:
        for t, v in run:
            at.setdefault(round(t / step) * step, []).append(v)
    need = max(1, (len(samples) + 1) // 2)
    return [[t, round(statistics.median(vs), 3)] for t, vs in sorted(at.items()) if len(vs) >= need]


def chart(record: CompareRecord, key: str, title: str, ylabel: str) -> str:
    """Small multiples: a panel per queue on shared axes, each run of the queue a thin line
    (its group carries its queue, rep, run and samples as data-* attributes), the median over
    its runs a thick one."""
    queues = [q for q in record.queues if any(s.queue == q for s in record.series)]
    cols = min(PANELS_PER_ROW, max(1, len(queues)))
    rows = -(-len(queues) // cols)
    fig, axes = charts.figure(PANEL_W * cols, PANEL_H * rows + 40, rows, cols, sharex=True, sharey=True, squeeze=False)
    data: dict[str, dict[str, object]] = {}
    step = float(record.series_step_s or 2)
    top = 0.0
    for ax in axes.flat[len(queues) :]:
        ax.set_visible(False)
    for ax, queue in zip(axes.flat, queues):
        runs = [s for s in record.series if s.queue == queue]
        for s in runs:
            samples: list[list[float]] = getattr(s, key)
            gid = f"line-{key}-{queue}-r{s.rep}"  # the SVG group a test finds the run's line by
            drawn = [[t, max(v, 0)] for t, v in samples]  # the y axis starts at 0, as every series does
            top = max([top, *(v for _, v in drawn)])
            charts.plot_xy(ax, drawn, color=colour(queue), lw=0.7, alpha=0.35).set_gid(gid)
            data[gid] = {"queue": queue, "rep": s.rep, "run": s.run, "samples": len(samples), "values": samples}
        middle = median_line([getattr(s, key) for s in runs], step)
        if middle:
            gid = f"median-{key}-{queue}"
            charts.plot_xy(ax, [[t, max(v, 0)] for t, v in middle], color=colour(queue), lw=2.0).set_gid(gid)
            data[gid] = {"queue": queue, "runs": len(runs), "values": middle}
        ax.set_title(f"{queue} (n={len(runs)})", fontsize=10)
        ax.grid(alpha=0.3)
    axes.flat[0].set_ylim(0, top * 1.05 or 1)  # shared by every panel
    fig.supxlabel("seconds since the run's first request", fontsize=10)
    fig.supylabel(ylabel, fontsize=10)
    fig.tight_layout()
    svg = charts.svg_with_line_data(charts.svg(fig), data)
    svg = svg.replace("<svg ", f"<svg id='chart-{key}' role='img' aria-label='{esc(title)}' ", 1)
    return f"<h3>{esc(title)}</h3>{svg}"


def errorbar_chart(record: CompareRecord) -> str:
    """Each queue's median with its 95 % interval, for each ranked figure: a dot and its bar,
    the queues in their ranking's order; each bar's group carries its figures."""
    fig, axes = charts.figure(920, 70 + 26 * max(1, len(record.queues)), 1, len(RANKED), squeeze=False)
    data: dict[str, dict[str, object]] = {}
    for ax, (title, key) in zip(axes.flat, RANKED):
        entries = list(reversed(record.ranking.get(key) or []))  # the first rank on top
        medians = [e.median for e in entries if e.median is not None]
        for y, e in enumerate(entries):
            est = e.estimate
            if est.median is None:
                continue
            low = est.low if est.low is not None else est.median
            high = est.high if est.high is not None else est.median
            bar = ax.errorbar(
                [est.median],
                [y],
                xerr=[[est.median - low], [high - est.median]],
                fmt="o",
                color=colour(e.queue),
                capsize=3,
                ms=5,
            )
            gid = f"bar-{key}-{e.queue}"
            bar.lines[0].set_gid(gid)
            data[gid] = {"queue": e.queue, "median": est.median, "low": low, "high": high, "n": est.n}
        ax.set_yticks(range(len(entries)), [f"{e.rank}. {e.queue}" for e in entries])
        # An interval of two runs can reach far: the axis keeps the medians readable, and such a
        # bar runs off its edge.
        ax.set_xlim(0, 1.5 * max(medians, default=1.0))
        ax.set_ylim(-0.6, len(entries) - 0.4)
        ax.set_xlabel(f"{title}: median and 95 % interval")
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    svg = charts.svg_with_line_data(charts.svg(fig), data)
    return svg.replace("<svg ", "<svg id='chart-ranking' role='img' aria-label='each queue with its interval' ", 1)


def charts_section(record: CompareRecord) -> str:
    if not record.series:
        return "<p class='warn'>No series: Prometheus had none for these runs.</p>"
    head = (
        "<p class='muted'>From Prometheus (query_range over each run, a sample every "
        f"{esc(record.series_step_s)} s; the rates over 10 s windows). A panel per queue on shared axes: each of "
        "its runs a thin line, the median over its runs at each instant the thick one. The x axis starts at "
        "each run's first request.</p>"
    )
    return head + "".join(chart(record, key, title, ylabel) for key, title, ylabel in CHARTS)
