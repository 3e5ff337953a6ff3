"""make scale's tables and page: each count over its runs (every figure's
median, interval and n; the drain rate's speed-up over the first count, and
what it shows), then every run; and the four panels against the count
(matplotlib, inline SVG: no network needed)."""

from __future__ import annotations

import html

from labctl import stats
from labctl.records.scale import CountFigures, ScaleRecord, ScaleRun, count_figures
from labctl.render import charts, plain_page
from labctl.render.table import markdown_table

# (key, column title) of the figures, in order: each count's over its runs, and each run's.
FIGURE_COLUMNS = (
    ("rps", "API req/s"),
    ("p95_ms", "p95 ms"),
    ("drain_rate", "drain rate tasks/s"),
    ("all_done_s", "all tasks done s"),
    ("redis_cpu_mean", "Redis CPU mean"),
    ("redis_cpu_peak", "Redis CPU peak"),
    ("workers_cpu", "workers' CPU"),
    ("busy_replicas", "replicas that ran tasks"),
)
# Every run's table: the count, the figures, the ledger.
COLUMNS = (
    ("rep", "rep"),
    ("replicas", "replicas"),
    *FIGURE_COLUMNS,
    ("enqueued", "enqueued"),
    ("completed", "completed"),
    ("duplicates", "dup"),
    ("lost", "lost"),
    ("run", "run"),
)
LEGEND = (
    "Each figure: the median of the count's runs [its 95 % interval] (n shown where it is not the runs'). "
    "Speed-up: the drain rate over the first count's, its 95 % interval (the runs independent); "
    "faster or slower where the interval excludes 1, no difference shown where it holds 1."
)


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def columns(summary: ScaleRecord) -> tuple[tuple[str, str], ...]:
    """Every run's columns: over nodes, the node count beside the replicas."""
    return (COLUMNS[0], ("nodes", "nodes"), *COLUMNS[1:]) if summary.axis == "nodes" else COLUMNS


def speedup_cell(figures: CountFigures) -> str:
    """`1.96 [1.85–2.08] faster`; the first count is the reference."""
    if figures.speedup is None:
        return "1 (reference)"
    return f"{stats.ratio_text(figures.speedup)} {figures.speedup.verdict}"


def count_rows(summary: ScaleRecord) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the counts' table."""
    axis = summary.axis
    counts = count_figures(summary)
    first = f"{counts[0].count} {axis[:-1]}(s)" if counts else "the first count"
    header = [axis, "runs", *(title for _, title in FIGURE_COLUMNS[:3]), f"speed-up over {first}"]
    header += [title for _, title in FIGURE_COLUMNS[3:]] + ["exact runs"]
    rows = []
    for c in counts:
        est = [stats.text(c.figures[key], show_n=c.figures[key].n != c.runs) for key, _ in FIGURE_COLUMNS]
        rows.append([str(c.count), str(c.runs), *est[:3], speedup_cell(c), *est[3:], f"{c.exact} of {c.runs}"])
    return header, rows


def order_line(summary: ScaleRecord) -> str:
    """`Order (seed 7): repetition 1: 4 1 2; repetition 2: 2 4 1`; nothing for an older record."""
    if not summary.order:
        return ""
    reps = "; ".join(f"repetition {i}: {' '.join(map(str, o))}" for i, o in enumerate(summary.order, 1))
    return f"Order (seed {summary.seed}): {reps}."


def run_rows(summary: ScaleRecord) -> list[list[str]]:
    # the columns are named by the run's fields (tests/unit/test_scale.py checks each is one)
    return [[cell(getattr(row, key)) for key, _ in columns(summary)] for row in summary.rows]


def markdown(summary: ScaleRecord) -> str:
    header, rows = count_rows(summary)
    lines = [
        f"# make scale worker={summary.worker}: {summary.base}",
        "",
        summary_line(summary),
        "",
        "## Each count over its runs",
        "",
        markdown_table(header, rows, {header[5]}),
        "",
        LEGEND,
        "",
        "## Every run",
        "",
        *([order_line(summary), ""] if summary.order else []),
        markdown_table([title for _, title in columns(summary)], run_rows(summary), {"run"}),
    ]
    axis = summary.axis
    notes = [f"- {summary.count(row)} {axis[:-1]}(s){_rep(row)}: {w}" for row in summary.rows for w in row.warnings]
    if axis == "nodes":
        names = {row.nodes: row.node_names for row in summary.rows}
        notes += [f"- {n} node(s): {', '.join(nodes)}" for n, nodes in names.items()]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _rep(row: ScaleRun) -> str:
    return f", repetition {row.rep}" if row.rep else ""


def summary_line(summary: ScaleRecord) -> str:
    platform, p = summary.platform, summary.params
    where = (
        f"Swarm stack {platform.stack}, {platform.nodes} node(s)"
        if platform.orchestrator == "swarm"
        else f"compose project {platform.project}"
    )
    length = f"{p.requests} requests" if p.requests else f"{p.duration_s:g} s of load"
    spread = (
        f"; the workers spread over 1 node or more, {summary.per_node} replica(s) a node"
        if summary.axis == "nodes"
        else ""
    )
    return (
        f"{length} of {p.endpoint} from {p.users} users per run, {summary.reps} run(s) of each count, "
        f"on the {where}{spread}; worker limits {summary.worker_limits or '-'}, "
        f"API {summary.api_limits or '-'}."
    )


PANELS = (
    ("API req/s", (("rps", "API req/s (Locust)"),)),
    ("drain rate, tasks/s", (("drain_rate", "tasks completed per second"),)),
    ("p95 latency, ms", (("p95_ms", "p95 of the enqueue requests"),)),
    (
        "CPU, cores",
        (("redis_cpu_mean", "Redis, mean"), ("redis_cpu_peak", "Redis, peak"), ("workers_cpu", "workers, summed")),
    ),
)


def svg_plot(summary: ScaleRecord) -> str:
    """The four panels against the count, as an SVG document (text kept as text): each
    count's median with its interval as an error bar, each run a small dot."""
    axis = summary.axis
    counts = count_figures(summary)
    xs = [c.count for c in counts]
    fig, axes = charts.figure(1100, 700, 2, 2)
    for ax, (title, series) in zip(axes.flat, PANELS):
        for key, label in series:
            points = [(c.count, c.figures[key]) for c in counts if c.figures[key].median is not None]
            if not points:
                continue
            x, est = zip(*points)
            medians = [e.median for e in est]
            below = [e.median - (e.low if e.low is not None else e.median) for e in est]
            above = [(e.high if e.high is not None else e.median) - e.median for e in est]
            bars = ax.errorbar(x, medians, yerr=[below, above], marker="o", capsize=4, label=label)
            runs = [(summary.count(row), getattr(row, key)) for row in summary.rows if getattr(row, key) is not None]
            ax.plot(*zip(*runs), ls="none", marker=".", alpha=0.4, color=bars[0].get_color())
        first = counts[0] if counts else None
        if title.startswith("drain") and first and first.figures["drain_rate"].median:
            base = first.figures["drain_rate"].median / first.count
            ax.plot(xs, [base * x for x in xs], ls="--", color="grey", label="linear from the first count")
        if title.startswith("CPU"):
            ax.axhline(1.0, ls=":", color="red", label="one core (Redis's ceiling)")
        ax.set_title(title)
        ax.set_xlabel(f"{axis} (the workers')" if axis == "nodes" else axis)
        ax.set_xticks(xs)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"make scale worker={summary.worker} ({summary.base}): median and 95 % interval of each count's runs",
        fontsize=10,
    )
    fig.tight_layout()
    return charts.svg(fig)


def html_page(summary: ScaleRecord) -> str:
    header, rows = count_rows(summary)
    order = f"<p>{html.escape(order_line(summary))}</p>\n" if summary.order else ""
    return plain_page.page(
        summary.base,
        f"<h1>make scale worker={html.escape(summary.worker)}</h1>\n<p>{html.escape(summary_line(summary))}</p>\n"
        f"<h2>Each count over its runs</h2>\n{plain_page.table(header, rows)}\n<p>{html.escape(LEGEND)}</p>\n"
        f"{svg_plot(summary)}\n<h2>Every run</h2>\n{order}"
        f"{plain_page.table([t for _, t in columns(summary)], run_rows(summary))}\n",
    )
