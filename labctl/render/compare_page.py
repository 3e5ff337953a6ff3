"""A comparison's markdown table and its report page (`make compare`): the
self-contained HTML page (inline CSS, charts as inline SVG from matplotlib, no
script, nothing fetched). Pure functions, no I/O; the figures themselves are
records/compare.py's.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

from labctl.platform.containers import limit_text, workers_limit_text
from labctl.queues import QUEUES
from labctl.records.compare import ARTICLE_FIELDS, FIELDS, LAB_FIELDS, ArticleRecord, CompareRecord, ratios_to
from labctl.records.published import SOURCE as PUBLISHED_SOURCE
from labctl.render import charts
from labctl.render.table import markdown_table

# One colour per queue, the same in every report (labctl.queues.QUEUES' order).
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
    ("requests", "Requests per second, as Locust sent them", "req/s"),
    ("throughput", "Throughput: tasks completed per second", "tasks/s"),
    ("backlog", "Backlog: tasks waiting in the queue", "tasks"),
    ("done_pct", "The drain: the run's tasks completed so far", "% of the run's tasks"),
)


def _data(record: CompareRecord | Mapping) -> Mapping:
    return record.as_json() if isinstance(record, CompareRecord) else record


# -- Figures as the tables print them --------------------------------------------------------
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
    """`mean (min–max)` over the reps; the mean alone when they agree or there is one;
    `~mean (min–max) projected` for a time projected from a drain rate (records/compare.py)."""
    text = " ".join(part for part in spread_parts(st) if part)
    return f"~{text} projected" if st and st.get("projected") else text


# The spreads the table ends with: the RPS's, and the machine's speed beside it, which
# says whether reps that differ ran on a machine that differed (docs/compare.md).
SPREADS = (("RPS spread %", "rps"), ("machine speed spread %", "machine_speed"))


def spread_pct(st: Mapping | None) -> str:
    """The reps' spread: (max - min) / median, in %."""
    return "-" if not st or st.get("spread_pct") is None else f"{st['spread_pct']:g}"


# -- The setting, as one line --------------------------------------------------------------
def limits_line(record: Mapping) -> str:
    limits = record["setting"]["limits"]
    return f"API {limit_text(limits.get('api'))}, workers {workers_limit_text(limits.get('workers') or {})}"


def run_length(p: Mapping) -> str:
    if p.get("duration_s"):
        return f"{p['duration_s']:g} s of load per run (RPS over all but its first {p.get('warmup_s', 0):g} s)"
    return f"{p['requests']} requests per run"


def heading(record: Mapping) -> str:
    p = record["params"]
    return f"{p['endpoint']}, {p['users']} users, {run_length(p)}, {p['reps']} rep(s) per queue; {limits_line(record)}"


# -- Markdown ---------------------------------------------------------------------------------
def markdown(record: CompareRecord | Mapping) -> str:
    """The comparison's table for an issue or a README: mean (min–max) over the reps."""
    record = _data(record)
    rows = [
        [queue, *(spread(summary.get(key)) for _, key in FIELDS), *(spread_pct(summary.get(k)) for _, k in SPREADS)]
        for queue, summary in record["summary"].items()
    ]
    lines = [
        f"make compare {record['run']}: {heading(record)}. Mean (min–max) over the reps; "
        "RPS spread: (max - min) / median over the reps; ~ projected: the queue drained slower than its API "
        "enqueued, so its time to run every task is projected from the rate it held while watched; machine "
        "speed: units of a fixed piece of Python the machine ran a second over the same part of each run.",
        "",
        markdown_table(["queue", *(name for name, _ in FIELDS), *(name for name, _ in SPREADS)], rows, {"queue"}),
    ]
    if published := record.get("published"):
        src = published["source"]
        article = [
            [queue, *(num(row.get(key)) for _, key in ARTICLE_FIELDS)] for queue, row in published["rows"].items()
        ]
        lines += [
            "",
            f"The published experiment at {published['setting']} ({src['publisher']}, {src['url']}; "
            "another machine, its own versions):",
            "",
            markdown_table(["queue", *(name for name, _ in ARTICLE_FIELDS)], article, {"queue"}),
        ]
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
    order = list(QUEUES)
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
    if st and st.get("projected"):
        attrs += ' data-projected="1"'
        text = f"~{text} <span class=range>projected</span>"
    return f"<td class=n{attrs}>{text}</td>"


def summary_table(record: Mapping) -> str:
    head = _row(
        [
            _th("queue"),
            *(_th(name, "article") for name, _ in ARTICLE_FIELDS),
            *(_th(name) for name, _ in LAB_FIELDS),
            *(_th(name) for name, _ in SPREADS),
        ]
    )
    body = [
        _row(
            [
                _td(queue, attrs=f' data-queue="{esc(queue)}"'),
                *(_stat_cell(queue, k, s.get(k)) for _, k in FIELDS),
                *(
                    _td(spread_pct(s.get(k)), True, f' data-queue="{esc(queue)}" data-field="{k}_spread_pct"')
                    for _, k in SPREADS
                ),
            ]
        )
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


# -- Charts: matplotlib, inline SVG, every queue on the same axes --------------------------------
W, H = 760, 280


def line_id(key: str, queue: str, rep: int) -> str:
    """The gid of a queue's line for one rep on one chart: the SVG group a test finds it by."""
    return f"line-{key}-{queue}-r{rep}"


def chart(series: list[Mapping], key: str, title: str, ylabel: str) -> str:
    """One chart: a line per queue and rep (rep 1 solid, later reps dashed), a vertex per
    sample; each line's group carries its queue, rep, run and samples as data-* attributes."""
    fig, ax = charts.figure(W, H)
    data: dict[str, dict[str, object]] = {}
    for s in series:
        samples = s.get(key) or []
        gid = line_id(key, s["queue"], s["rep"])
        drawn = [[t, max(v, 0)] for t, v in samples]  # the y axis starts at 0, as every series does
        line = charts.plot_xy(ax, drawn, color=colour(s["queue"]), lw=1.6, ls="-" if s["rep"] == 1 else (0, (6, 4)))
        line.set_gid(gid)
        data[gid] = {"queue": s["queue"], "rep": s["rep"], "run": s["run"], "samples": len(samples), "values": samples}
    ax.set_xlabel("seconds since the run's first request")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    svg = charts.svg_with_line_data(charts.svg(fig), data)
    svg = svg.replace("<svg ", f"<svg id='chart-{key}' role='img' aria-label='{esc(title)}' ", 1)
    return f"<h3>{esc(title)}</h3>{svg}"


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


def _middle(value, table) -> str:
    """A chart's mean over the middle of a run, and its ratio to the table's figure."""
    if value is None:
        return "-"
    return f"{num(value)} ({value / table:.2f})" if table else num(value)


def runs_section(record: Mapping) -> str:
    """Every run of the comparison, in the order it ran, with its charts over the middle of its load."""
    rows = [
        [
            _td(r["rep"], True),
            _td(r["queue"]),
            _td(num(r.get("rps")), True),
            _td(num(r.get("rps_whole_load")), True),
            _td(num(r.get("machine_speed")), True),
            _td(_middle(r.get("chart_rps_middle"), r.get("rps")), True),
            _td(_middle(r.get("chart_throughput_middle"), r.get("rps")), True),
            _td(num(r.get("median_ms")), True),
            _td(num(r.get("p95_ms")), True),
            _td(("~" if r.get("all_done_projected") else "") + num(r.get("all_done_s")), True),
            _td(num(r.get("drain_rate_per_s")), True),
            _td(num(r.get("errors_pct")), True),
            _td(num(r.get("cpu_ms_per_task")), True),
            _td(num(r.get("completed")), True),
            _td(num(r.get("lost")), True),
            _td(num(r.get("duplicates")), True),
            _td("; ".join(r.get("warnings") or [])),
            _td(r["run"]),
        ]
        for r in record["runs"]
    ]
    header = (
        "rep",
        "queue",
        "RPS",
        "RPS, whole load",
        "machine speed",
        "requests chart, middle (÷ RPS)",
        "throughput chart, middle (÷ RPS)",
        "median ms",
        "p95 ms",
        "all tasks done s",
        "drain while watched, tasks/s",
        "errors %",
        "CPU ms/task",
        "completed",
        "lost",
        "dup",
        "warnings",
        "run",
    )
    note = (
        "<p class='muted'>RPS: over the steady part of the load (after its warm-up), from the API's enqueue counter; "
        "RPS, whole load: Locust's, first request to last. Machine speed: units of the probe's fixed work the "
        "machine ran a second over the same part of the load as the RPS. The charts' means over the middle of the load (from "
        "when their 10 s window lies past the warm-up to the load's end) beside the table's RPS: the requests "
        "chart should read it; the throughput chart reads it only for a queue that keeps up. ~: projected from "
        "the rate its tasks settled at while watched; the rest of such a backlog was run by a one-off worker, and "
        "the counts are the ledger's whole.</p>"
    )
    return note + _table("runs", header, rows)


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


def page(record: CompareRecord | Mapping) -> str:
    """The whole report as one HTML document that needs nothing but itself."""
    record = _data(record)
    notes = "".join(f"<li>{esc(n)}</li>" for n in record.get("notes") or [])
    p = record["params"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>make compare {esc(record["run"])}</title>
<style>{CSS}</style></head><body>
<h1>The queues side by side: {esc(record["run"])}</h1>
<p>{esc(heading(record))}. Ran {esc(record["time"])} for {esc(num(record.get("wall_s")))} s, the queues in turn,
each rep of every queue before the next rep (<code>{esc(record.get("command"))}</code>); every run began on empty
queues and watched its tasks for at most {esc(num(p.get("drain_watch_s")))} s, a queue that drained slower having
the rest run by a one-off worker of its own. Figures: mean (min–max) over the reps.</p>
<h2>The published experiment's table, and what the lab adds</h2>
{summary_table(record)}
<p class="muted">RPS: requests per second over the steady part of each run's load (the API's enqueue counter as
Prometheus scraped it, one task a request); median and p95 from Locust over the whole load ({esc(p["users"])} users); all tasks done:
first enqueue to last completion (the ledger), or ~projected where the queue drained slower than its API
enqueued: from the rate its tasks settled at while watched; RPS spread: (max - min) / median over the reps;
machine speed: units of a fixed piece of Python the machine ran a second over the same part of each run as its
RPS, and its spread beside the RPS's: a limited container's rate follows the speed of the cores under it; CPU per task: the worker's CPU seconds from the load's start to the last settled task,
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


# -- The published experiment's two settings (make compare setting=article) ---------------------
REFERENCE = "faststream"  # the article's queue without a concurrency setting: the ratios' denominator


def _article_rows(part: Mapping) -> list[tuple[str, dict, dict | None]]:
    """(queue, the lab's summary, the article's row) for each queue of a setting."""
    rows = (part.get("published") or {}).get("rows") or {}
    return [(q, s, rows.get(q)) for q, s in part["summary"].items()]


def _setting_of(part: Mapping) -> str:
    return (part.get("published") or {}).get("setting") or limits_line(part)


def article_markdown(record: ArticleRecord | Mapping) -> str:
    """Both settings' tables, the lab's beside the article's, and the ratios between queues."""
    record = record.as_json() if isinstance(record, ArticleRecord) else record
    lines = [
        f"make compare setting=article {record['run']}: the published experiment's settings, the lab's figures "
        "(mean over the reps) beside the article's (another machine, its own versions); ratios: each queue's "
        f"RPS over {REFERENCE}'s, the article's and the lab's.",
    ]
    for part in record["parts"]:
        lab_ratio = ratios_to(part["summary"], REFERENCE)
        pub_ratio = ratios_to((part.get("published") or {}).get("rows") or {}, REFERENCE)
        rows = [
            [
                q,
                num((s.get("rps") or {}).get("mean")),
                num((pub or {}).get("rps")),
                num((s.get("median_ms") or {}).get("mean")),
                num((pub or {}).get("median_ms")),
                num((s.get("p95_ms") or {}).get("mean")),
                num((pub or {}).get("p95_ms")),
                spread(s.get("all_done_s")),
                num(lab_ratio.get(q)),
                num(pub_ratio.get(q)),
            ]
            for q, s, pub in _article_rows(part)
        ]
        header = ["queue", "RPS lab", "RPS article", "median ms lab", "median ms article", "p95 ms lab"]
        header += ["p95 ms article", "all tasks done s lab", f"RPS ÷ {REFERENCE} lab", f"RPS ÷ {REFERENCE} article"]
        lines += ["", f"{_setting_of(part)} ({part['run']}):", "", markdown_table(header, rows, {"queue"})]
    return "\n".join(lines)


def article_page(record: ArticleRecord | Mapping) -> str:
    """One page for both settings: each setting's table beside the article's, with the ratios, and a
    link to each setting's own report (its charts and every run)."""
    record = record.as_json() if isinstance(record, ArticleRecord) else record
    sections = []
    for part in record["parts"]:
        lab_ratio = ratios_to(part["summary"], REFERENCE)
        pub_ratio = ratios_to((part.get("published") or {}).get("rows") or {}, REFERENCE)
        head = _row(
            [
                _th("queue"),
                *(
                    _th(f"{name} {who}", "article" if who == "article" else "")
                    for name in ("RPS", "median ms", "p95 ms")
                    for who in ("lab", "article")
                ),
                _th("all tasks done s lab"),
                _th(f"RPS ÷ {REFERENCE} lab"),
                _th(f"RPS ÷ {REFERENCE} article", "article"),
            ]
        )
        body = []
        for q, s, pub in _article_rows(part):
            cells = [_td(q, attrs=f' data-queue="{esc(q)}"')]
            for key in ("rps", "median_ms", "p95_ms"):
                cells.append(_stat_cell(q, key, s.get(key)))
                cells.append(_td(num((pub or {}).get(key)), True, f' data-queue="{esc(q)}" data-article="{key}"'))
            cells.append(_stat_cell(q, "all_done_s", s.get("all_done_s")))
            cells.append(_td(num(lab_ratio.get(q)), True, f' data-queue="{esc(q)}" data-ratio="lab"'))
            cells.append(_td(num(pub_ratio.get(q)), True, f' data-queue="{esc(q)}" data-ratio="article"'))
            body.append(_row(cells))
        link = esc(f"{part['run']}.html")
        sections.append(
            f"<h2>{esc(_setting_of(part))}</h2><p>{esc(heading(part))}. Its own report, with its charts and every "
            f"run: <a href='{link}'>{link}</a>.</p><table class='article-setting' data-setting='{esc(_setting_of(part))}'>"
            f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
        )
    src = PUBLISHED_SOURCE
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>make compare setting=article {esc(record["run"])}</title>
<style>{CSS}</style></head><body>
<h1>The published experiment's settings, the lab beside the article: {esc(record["run"])}</h1>
<p>Ran {esc(record["time"])} for {esc(num(record.get("wall_s")))} s (<code>{esc(record.get("command"))}</code>). The
article: <a href="{esc(src["url"])}">{esc(src["title"])}</a> ({esc(src["publisher"])}), ARQ, SAQ and Celery at
concurrency 1, 100 users on the enqueue route, 50,000 iterations a run, <b>another machine</b> with its own
versions: its absolute figures are not the lab's to match; the ratios between queues are what should carry.
The lab's figures: mean (min–max) over the reps.</p>
{"".join(sections)}
</body></html>
"""
