"""make scale's table and page: a row per replica count, and the four panels
against the replica count (matplotlib, inline SVG: no network needed)."""

from __future__ import annotations

import html
from typing import Any

from labctl.records.scale import ScaleRecord
from labctl.render import charts
from labctl.render.table import markdown_table

# (key, column title) of the table, in order.
COLUMNS = (
    ("replicas", "replicas"),
    ("rps", "API req/s"),
    ("p95_ms", "p95 ms"),
    ("drain_rate", "drain rate tasks/s"),
    ("all_done_s", "all tasks done s"),
    ("redis_cpu_mean", "Redis CPU mean"),
    ("redis_cpu_peak", "Redis CPU peak"),
    ("workers_cpu", "workers' CPU"),
    ("busy_replicas", "replicas that ran tasks"),
    ("enqueued", "enqueued"),
    ("completed", "completed"),
    ("duplicates", "dup"),
    ("lost", "lost"),
    ("run", "run"),
)


def _data(summary: ScaleRecord | dict) -> dict:
    return summary.as_json() if isinstance(summary, ScaleRecord) else summary


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def columns(summary: dict) -> tuple[tuple[str, str], ...]:
    """The table's columns: over nodes, the node count first."""
    return (("nodes", "nodes"), *COLUMNS) if summary.get("axis") == "nodes" else COLUMNS


def markdown(summary: ScaleRecord | dict) -> str:
    summary = _data(summary)
    cols = columns(summary)
    rows = [[cell(row.get(key)) for key, _ in cols] for row in summary["rows"]]
    lines = [
        f"# make scale worker={summary['worker']}: {summary['base']}",
        "",
        f"{summary_line(summary)}",
        "",
        markdown_table([title for _, title in cols], rows, {"run"}),
    ]
    axis = summary.get("axis") or "replicas"
    notes = [f"- {row[axis]} {axis[:-1]}(s): {w}" for row in summary["rows"] for w in row.get("warnings", [])]
    if axis == "nodes":
        notes += [f"- {row['nodes']} node(s): {', '.join(row.get('node_names') or [])}" for row in summary["rows"]]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def summary_line(summary: dict) -> str:
    platform, p = summary["platform"], summary["params"]
    where = (
        f"Swarm stack {platform.get('stack')}, {platform.get('nodes')} node(s)"
        if platform.get("orchestrator") == "swarm"
        else f"compose project {platform.get('project')}"
    )
    length = f"{p['requests']} requests" if p.get("requests") else f"{p.get('duration_s'):g} s of load"
    spread = (
        f"; the workers spread over 1 node or more, {summary.get('per_node')} replica(s) a node"
        if summary.get("axis") == "nodes"
        else ""
    )
    return (
        f"{length} of {p['endpoint']} from {p['users']} users per count, on the {where}{spread}; "
        f"worker limits {summary.get('worker_limits') or '-'}, API {summary.get('api_limits') or '-'}."
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


def svg_plot(summary: dict) -> str:
    """The four panels against the replica count, as an SVG document (text kept as text)."""
    rows = summary["rows"]
    axis = summary.get("axis") or "replicas"
    xs = [r[axis] for r in rows]
    fig, axes = charts.figure(1100, 700, 2, 2)
    for ax, (title, series) in zip(axes.flat, PANELS):
        for key, label in series:
            points = [(x, r.get(key)) for x, r in zip(xs, rows) if r.get(key) is not None]
            if points:
                ax.plot(*zip(*points), marker="o", label=label)
        if title.startswith("drain") and rows and rows[0].get("drain_rate"):
            base = rows[0]["drain_rate"] / rows[0][axis]
            ax.plot(xs, [base * x for x in xs], ls="--", color="grey", label="linear from the first count")
        if title.startswith("CPU"):
            ax.axhline(1.0, ls=":", color="red", label="one core (Redis's ceiling)")
        ax.set_title(title)
        ax.set_xlabel(f"{axis} (the workers')" if axis == "nodes" else axis)
        ax.set_xticks(xs)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"make scale worker={summary['worker']} ({summary['base']})", fontsize=10)
    fig.tight_layout()
    return charts.svg(fig)


def html_page(summary: ScaleRecord | dict) -> str:
    summary = _data(summary)
    cols = columns(summary)
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(row.get(key)))}</td>" for key, _ in cols) + "</tr>"
        for row in summary["rows"]
    )
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(summary['base'])}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>\n"
        f"<h1>make scale worker={html.escape(summary['worker'])}</h1>\n<p>{html.escape(summary_line(summary))}</p>\n"
        f"<table><tr>{head}</tr>{body}</table>\n{svg_plot(summary)}\n</body></html>\n"
    )
