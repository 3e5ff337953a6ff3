"""A comparison's figures and its report (`make compare`, scripts/compare.py):
each run's row from its record, the spread over the repetitions, the markdown
table, and the self-contained HTML page (inline CSS, charts as inline SVG, no
script, nothing fetched). Pure functions, no I/O.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping

from scripts import lab_results as R

SCHEMA = "compare/1"
MiB = 1 << 20
# The published article's table, then what the lab adds.
ARTICLE_FIELDS = (
    ("RPS", "rps"),
    ("median ms", "median_ms"),
    ("p95 ms", "p95_ms"),
    ("all tasks done s", "all_done_s"),
    ("errors %", "errors_pct"),
)
LAB_FIELDS = (
    ("worker CPU ms/task", "cpu_ms_per_task"),
    ("API CPU ms/request", "api_cpu_ms_per_request"),
    ("worker peak MB", "worker_peak_mb"),
    ("API peak MB", "api_peak_mb"),
    ("throttled periods %", "throttled_periods_pct"),
    ("lost", "lost"),
    ("dup", "duplicates"),
)
FIELDS = ARTICLE_FIELDS + LAB_FIELDS
# One colour per queue, the same in every report (lab_results.QUEUES' order).
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
CHARTS = (
    ("throughput", "Throughput: tasks completed per second", "tasks/s"),
    ("backlog", "Backlog: tasks waiting in the queue", "tasks"),
    ("done_pct", "The drain: the run's tasks completed so far", "% of the run's tasks"),
)


# -- A run's row, and the spread over the repetitions ----------------------------------
def _per(amount: float | None, count: int | None, scale: float = 1000.0) -> float | None:
    return round(amount * scale / count, 3) if amount is not None and count else None


def _mb(n) -> float | None:
    return round(n / MiB, 1) if n else None


def run_row(record: Mapping, queue: str, rep: int, cpu_s: Mapping[str, float | None]) -> dict:
    """One load run of a comparison in the report's fields, from its record
    (scripts/lab_results.py) and the CPU seconds its worker and the API used
    between the load's start and the last settled task (`cpu_s`)."""
    tasks = record.get("tasks") or {}
    resources = record.get("resources") or {}
    service = R.service_of(queue)
    return {
        "queue": queue,
        "rep": rep,
        "run": record["run"],
        "rps": record.get("rps"),
        "median_ms": record.get("median_ms"),
        "p95_ms": record.get("p95_ms"),
        "all_done_s": tasks.get("time_to_execute_all_s"),
        "errors_pct": record.get("failures_pct"),
        "requests": record.get("requests"),
        "load_s": record.get("duration_s"),
        "drain_s": tasks.get("drain_s"),
        "enqueued": tasks.get("enqueued"),
        "completed": tasks.get("completed"),
        "lost": tasks.get("lost"),
        "duplicates": tasks.get("duplicates"),
        "settled": bool(tasks.get("settled")),
        "cpu_ms_per_task": _per(cpu_s.get(service), tasks.get("completed")),
        "api_cpu_ms_per_request": _per(cpu_s.get("api"), record.get("requests")),
        "worker_peak_mb": _mb((resources.get(service) or {}).get("peak_memory_bytes")),
        "api_peak_mb": _mb((resources.get("api") or {}).get("peak_memory_bytes")),
        "throttled_periods_pct": (resources.get(service) or {}).get("cpu_throttled_periods_pct"),
        "warnings": list(record.get("warnings") or []),
    }


def stats(values: Iterable) -> dict | None:
    """Mean, min and max of the figures there are (None where a rep has none)."""
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not xs:
        return None
    return {"mean": round(sum(xs) / len(xs), 3), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarise(rows: Iterable[Mapping], queues: Iterable[str]) -> dict[str, dict[str, dict | None]]:
    """Per queue and field, the spread over that queue's runs."""
    rows = list(rows)
    return {
        q: {key: stats(r[key] for r in rows if r["queue"] == q) for _, key in FIELDS}
        for q in queues
        if any(r["queue"] == q for r in rows)
    }


def num(x) -> str:
    """A figure as the tables print it: three significant digits or so, `-` for none."""
    if x is None:
        return "-"
    x = float(x)
    if x == int(x) and abs(x) >= 10:
        return f"{x:.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}".rstrip("0").rstrip(".") if x else "0"


def spread_parts(st: Mapping | None) -> tuple[str, str]:
    """The mean and, when the reps differ, their range: `("140", "(130–150)")`."""
    if not st:
        return "-", ""
    if st["n"] > 1 and num(st["min"]) != num(st["max"]):
        return num(st["mean"]), f"({num(st['min'])}–{num(st['max'])})"
    return num(st["mean"]), ""


def spread(st: Mapping | None) -> str:
    """`mean (min–max)` over the reps; the mean alone when they agree or there is one."""
    return " ".join(part for part in spread_parts(st) if part)


# -- The setting, as one line --------------------------------------------------------------
def limits_line(record: Mapping) -> str:
    limits = record["setting"]["limits"]
    return f"API {R.limit_text(limits.get('api'))}, workers {R.workers_limit_text(limits.get('workers') or {})}"


def heading(record: Mapping) -> str:
    p = record["params"]
    return (
        f"{p['endpoint']}, {p['users']} users, {p['requests']} requests per run, {p['reps']} rep(s) per queue; "
        f"{limits_line(record)}"
    )


# -- Markdown ---------------------------------------------------------------------------------
def markdown(record: Mapping) -> str:
    """The comparison's table for an issue or a README: mean (min–max) over the reps."""
    names = [name for name, _ in FIELDS]
    lines = [
        f"make compare {record['run']}: {heading(record)}. Mean (min–max) over the reps.",
        "",
        "| queue | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for queue, summary in record["summary"].items():
        lines.append(f"| {queue} | " + " | ".join(spread(summary.get(key)) for _, key in FIELDS) + " |")
    if published := record.get("published"):
        src = published["source"]
        lines += [
            "",
            f"The published experiment at {published['setting']} ({src['publisher']}, {src['url']}; "
            "another machine, its own versions):",
            "",
            "| queue | " + " | ".join(name for name, _ in ARTICLE_FIELDS) + " |",
            "|---|" + "---:|" * len(ARTICLE_FIELDS),
        ]
        for queue, row in published["rows"].items():
            lines.append(f"| {queue} | " + " | ".join(num(row.get(key)) for _, key in ARTICLE_FIELDS) + " |")
    return "\n".join(lines)


# -- HTML ---------------------------------------------------------------------------------------
CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 3px 7px; } td.n { text-align: right; } .range { white-space: nowrap; color: #555; } th { background: #f3f3f3; }
th.article { background: #e8f0fb; } .muted { color: #666; } .warn { color: #a40; }
.legend span { display: inline-block; margin-right: 14px; } .sw { display: inline-block; width: 18px; height: 3px;
  vertical-align: middle; margin-right: 4px; }
svg { display: block; margin: 6px 0 2px; } svg text { font: 11px system-ui, sans-serif; fill: #333; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def esc(x) -> str:
    return html.escape("-" if x is None else str(x))


def colour(queue: str) -> str:
    order = list(R.QUEUES)
    return PALETTE[order.index(queue) % len(PALETTE)] if queue in order else "#000"


def _row(cells: Iterable[str]) -> str:
    return "<tr>" + "".join(cells) + "</tr>"


def _th(text: str, cls: str = "") -> str:
    return f"<th class='{cls}'>{esc(text)}</th>" if cls else f"<th>{esc(text)}</th>"


def _td(text, numeric: bool = False, attrs: str = "") -> str:
    return f"<td{' class=n' if numeric else ''}{attrs}>{esc(text)}</td>"


def _stat_cell(queue: str, key: str, st: Mapping | None) -> str:
    """A figure's cell: its text, and the numbers it stands for as data attributes."""
    attrs = f' data-queue="{esc(queue)}" data-field="{key}"'
    if st:
        attrs += "".join(f' data-{k}="{st[k]}"' for k in ("mean", "min", "max", "n"))
    mean, span = spread_parts(st)
    # The range wraps below the mean as a whole, never inside itself.
    text = esc(mean) + (f" <span class=range>{esc(span)}</span>" if span else "")
    return f"<td class=n{attrs}>{text}</td>"


def summary_table(record: Mapping) -> str:
    head = _row(
        [_th("queue"), *(_th(name, "article") for name, _ in ARTICLE_FIELDS), *(_th(name) for name, _ in LAB_FIELDS)]
    )
    body = [
        _row([_td(queue, attrs=f' data-queue="{esc(queue)}"'), *(_stat_cell(queue, k, s.get(k)) for _, k in FIELDS)])
        for queue, s in record["summary"].items()
    ]
    return f'<table id="summary"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def published_section(record: Mapping) -> str:
    published = record.get("published")
    if not published:
        return (
            '<p class="muted" id="published-none">The published experiment (KTS, habr.com) measured 0.2 CPU / 200M '
            "and 0.5 CPU / 500M with 100 users on <code>io/simple</code>; its figures appear here beside the lab's "
            f"when a comparison runs that setting. Not here: {esc(record.get('published_note') or '')}.</p>"
        )
    src = published["source"]
    head = _row([_th("queue"), *(_th(name, "article") for name, _ in ARTICLE_FIELDS)])
    body = [
        _row([_td(q), *(_td(num(row.get(k)), True) for _, k in ARTICLE_FIELDS)]) for q, row in published["rows"].items()
    ]
    return (
        f'<p>The published experiment at {esc(published["setting"])}: <a href="{esc(src["url"])}">'
        f"{esc(src['title'])}</a> ({esc(src['publisher'])}). <b>Another machine</b>, its own library versions "
        f'and code: read it beside the lab\'s, not as the same measurement.</p><table id="published">'
        f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
    )


# -- Charts: inline SVG, every queue on the same axes ---------------------------------------------
W, H = 760, 280
MARGIN = {"left": 58, "right": 14, "top": 14, "bottom": 40}


def nice_step(top: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks up to `top`."""
    raw = max(top, 1e-9) / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _axes(box: tuple[float, float, float, float], xstep: float, ystep: float, ylabel: str) -> list[str]:
    """Grid lines, tick labels and axis titles over the data box (x from, x to, y to, and y from 0)."""
    xmin, xmax, ymax = box[0], box[1], box[2]
    left, right, top, bottom = MARGIN["left"], W - MARGIN["right"], MARGIN["top"], H - MARGIN["bottom"]
    out = [f"<rect x='{left}' y='{top}' width='{right - left}' height='{bottom - top}' fill='none' stroke='#999'/>"]
    for i in range(int(round(ymax / ystep)) + 1):
        y = bottom - (bottom - top) * i * ystep / ymax
        out.append(f"<line x1='{left}' y1='{y:.1f}' x2='{right}' y2='{y:.1f}' stroke='#eee'/>")
        out.append(f"<text x='{left - 5}' y='{y + 4:.1f}' text-anchor='end'>{num(i * ystep)}</text>")
    first = math.ceil(xmin / xstep - 1e-9)
    for i in range(first, int(round(xmax / xstep)) + 1):
        x = left + (right - left) * (i * xstep - xmin) / (xmax - xmin)
        out.append(f"<line x1='{x:.1f}' y1='{top}' x2='{x:.1f}' y2='{bottom}' stroke='#eee'/>")
        out.append(f"<text x='{x:.1f}' y='{bottom + 15}' text-anchor='middle'>{num(i * xstep)}</text>")
    out.append(
        f"<text x='{(left + right) / 2}' y='{H - 6}' text-anchor='middle'>seconds since the run's first request</text>"
    )
    out.append(
        f"<text transform='translate(13,{(top + bottom) / 2}) rotate(-90)' text-anchor='middle'>{esc(ylabel)}</text>"
    )
    return out


def _scale(series: list[Mapping], key: str) -> tuple[tuple[float, float, float, float], float, float]:
    """Shared axes over every queue's and rep's samples: the box (x from, x to, y to, y from 0),
    the x step and the y step. x starts before 0 where the samples do (the seconds before the load)."""
    xs = [t for s in series for t, _ in s.get(key) or []]
    ys = [v for s in series for _, v in s.get(key) or []]
    top_x, top_y = max(xs, default=1) or 1, max(ys, default=1) or 1
    xmin = min(0.0, min(xs, default=0.0))
    xstep, ystep = nice_step(top_x - xmin), nice_step(top_y)
    box = (xmin, xstep * math.ceil(top_x / xstep), ystep * math.ceil(top_y / ystep), 0.0)
    return box, xstep, ystep


def chart(series: list[Mapping], key: str, title: str, ylabel: str) -> str:
    """One chart: a polyline per queue and rep (rep 1 solid, later reps dashed), a point per sample."""
    box, xstep, ystep = _scale(series, key)
    xmin, xmax, ymax = box[0], box[1], box[2]
    left, right, top, bottom = MARGIN["left"], W - MARGIN["right"], MARGIN["top"], H - MARGIN["bottom"]
    parts = _axes(box, xstep, ystep, ylabel)
    for s in series:
        samples = s.get(key) or []
        points = " ".join(
            f"{left + (right - left) * (t - xmin) / (xmax - xmin):.1f},{bottom - (bottom - top) * max(v, 0) / ymax:.1f}"
            for t, v in samples
        )
        dash = "" if s["rep"] == 1 else " stroke-dasharray='6 4'"
        parts.append(
            f"<polyline data-queue='{esc(s['queue'])}' data-rep='{s['rep']}' data-run='{esc(s['run'])}' "
            f"data-samples='{len(samples)}' points='{points}' fill='none' stroke='{colour(s['queue'])}' "
            f"stroke-width='1.6'{dash}/>"
        )
    return (
        f"<h3>{esc(title)}</h3><svg id='chart-{key}' xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' "
        f"viewBox='0 0 {W} {H}' role='img' aria-label='{esc(title)}'>{''.join(parts)}</svg>"
    )


def legend(queues: Iterable[str], reps: int) -> str:
    items = "".join(f"<span><i class='sw' style='background:{colour(q)}'></i>{esc(q)}</span>" for q in queues)
    dashed = "rep 1 solid, later reps dashed" if reps > 1 else ""
    return f"<p class='legend'>{items}<span class='muted'>{dashed}</span></p>"


def charts_section(record: Mapping) -> str:
    series = record.get("series") or []
    if not series:
        return "<p class='warn'>No series: Prometheus had none for these runs.</p>"
    step = record.get("series_step_s")
    head = (
        "<p class='muted'>From Prometheus (query_range over each run, a sample every "
        f"{esc(step)} s; the rates over 10 s windows). The x axis starts at each run's first request.</p>"
    )
    body = "".join(chart(series, key, title, ylabel) for key, title, ylabel in CHARTS)
    return head + legend(record["summary"], record["params"]["reps"]) + body


# -- The other sections -------------------------------------------------------------------------
def _table(table_id: str, header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = _row(_th(h) for h in header)
    return f"<table id='{table_id}'><thead>{head}</thead><tbody>{''.join(_row(r) for r in rows)}</tbody></table>"


def runs_section(record: Mapping) -> str:
    """Every run of the comparison, in the order it ran."""
    keys = ("rps", "median_ms", "p95_ms", "all_done_s", "errors_pct", "cpu_ms_per_task", "completed", "lost")
    rows = [
        [
            _td(r["rep"], True),
            _td(r["queue"]),
            *(_td(num(r.get(k)), True) for k in keys),
            _td("; ".join(r.get("warnings") or [])),
            _td(r["run"]),
        ]
        for r in record["runs"]
    ]
    header = ("rep", "queue", "RPS", "median ms", "p95 ms", "all tasks done s", "errors %", "CPU ms/task")
    return _table("runs", (*header, "completed", "lost", "warnings", "run"), rows)


def _pair(values) -> str:
    bare, lab = values or (None, None)
    return f"{num(bare)} / {num(lab)}"


def cost_section(record: Mapping) -> str:
    """The lab's own cost beside the comparison: each queue's latest `make bench`, lab ÷ bare."""
    bench = record.get("bench") or {}
    if not bench:
        return "<p class='muted'>No <code>make bench</code> record in the results directory: run one to see what the lab costs.</p>"
    rows = [
        [
            _td(q),
            _td(num(b.get("rps_ratio")), True),
            _td(num(b.get("drain_ratio")), True),
            _td(_pair(b.get("api_cpu_us_per_request")), True),
            _td(_pair(b.get("worker_cpu_us_per_task")), True),
            _td(f"{b.get('api_limits')} / {b.get('worker_limits')}"),
            _td(b.get("mode")),
            _td(b.get("run")),
        ]
        for q, b in bench.items()
    ]
    header = (
        "queue",
        "RPS lab/bare",
        "drain lab/bare",
        "API CPU µs/request bare / lab",
        "worker CPU µs/task bare / lab",
        "bench limits API / worker",
        "mode",
        "bench",
    )
    note = (
        "<p class='muted'>The lab's API and worker against a bare app and worker that make only the library's plain "
        "call (<code>make bench</code>, docs/bench.md); the budget is 0.9. A bench under other limits than this "
        "comparison's says less about it.</p>"
    )
    return note + _table("bench", header, rows)


def chaos_section(record: Mapping) -> str:
    chaos = record.get("chaos") or []
    if not chaos:
        return "<p class='muted'>No <code>make chaos</code> record for these queues in the results directory.</p>"
    rows = [
        [
            _td(c["queue"]),
            _td(c["fault"]),
            _td(num(c.get("lost")), True),
            _td(num(c.get("duplicates")), True),
            _td(num(c.get("recovered_s")), True),
            _td(c.get("limits")),
            _td(c["run"]),
        ]
        for c in chaos
    ]
    return _table("chaos", ("queue", "fault", "lost", "duplicates", "work resumed after s", "limits", "run"), rows)


def setting_section(record: Mapping) -> str:
    """The limits the engine applied, the knobs, the versions and the machine."""
    setting = record["setting"]
    limits = setting["limits"]
    rows = [[_td("api"), *(_td(x) for x in _limit_cells(limits.get("api")))]]
    rows += [[_td(q), *(_td(x) for x in _limit_cells(lim))] for q, lim in (limits.get("workers") or {}).items()]
    knobs = [
        [_td(service), _td(", ".join(f"{k}={v}" for k, v in values.items()))]
        for service, values in setting["knobs"].items()
    ]
    versions = [[_td(name), _td(version)] for name, version in setting["versions"].items()]
    machine = [[_td(k), _td(v)] for k, v in setting["machine"].items()]
    return (
        "<h3>Limits, as the engine applied them</h3>"
        + _table("limits", ("service", "CPUs", "memory", "replicas", "concurrency"), rows)
        + "<h3>Knobs</h3>"
        + _table("knobs", ("service", "settings"), knobs)
        + "<h3>Versions</h3>"
        + _table("versions", ("package", "version"), versions)
        + "<h3>Machine</h3>"
        + _table("machine", ("what", "value"), machine)
    )


def _limit_cells(lim: Mapping | None) -> tuple:
    lim = lim or {}
    return (lim.get("cpus"), lim.get("memory"), lim.get("replicas"), lim.get("concurrency", "-"))


def page(record: Mapping) -> str:
    """The whole report as one HTML document that needs nothing but itself."""
    notes = "".join(f"<li>{esc(n)}</li>" for n in record.get("notes") or [])
    p = record["params"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>make compare {esc(record["run"])}</title>
<style>{CSS}</style></head><body>
<h1>The queues side by side: {esc(record["run"])}</h1>
<p>{esc(heading(record))}. Ran {esc(record["time"])} for {esc(num(record.get("wall_s")))} s, the queues in turn,
each rep of every queue before the next rep (<code>{esc(record.get("command"))}</code>); every run waited for an
empty backlog and for all its tasks. Figures: mean (min–max) over the reps.</p>
<h2>The published experiment's table, and what the lab adds</h2>
{summary_table(record)}
<p class="muted">RPS, median and p95 from Locust ({esc(p["users"])} users); all tasks done: first enqueue to last
completion (the ledger); CPU per task: the worker's CPU seconds from the load's start to the last settled task,
over the tasks completed (for <code>background</code> the API's, which serves the requests too); peaks and
throttling over the same window (Prometheus). Throttled periods: of the CPU scheduler's 100 ms periods in which
the worker ran, the share in which it used up its CPU limit and was held back until the next one (0-100 %).</p>
{published_section(record)}
<h2>Over time</h2>
{charts_section(record)}
<h2>What the lab costs</h2>
{cost_section(record)}
<h2>Faults (make chaos)</h2>
{chaos_section(record)}
<h2>Every run</h2>
{runs_section(record)}
<h2>The setting</h2>
{setting_section(record)}
{f"<h2>Notes</h2><ul id='notes'>{notes}</ul>" if notes else ""}
</body></html>
"""
