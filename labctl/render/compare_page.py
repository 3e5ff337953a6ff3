"""A comparison's markdown tables and its report page (`make compare`): the
self-contained HTML page (inline CSS, charts as inline SVG from matplotlib, no
script, nothing fetched). Every figure is a median with its 95 % interval and n
(labctl/stats.py); the queues are ranked with their ties. Pure functions, no
I/O; the figures themselves are records/compare.py's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from labctl import stats
from labctl.queues import QUEUES
from labctl.records.compare import (
    ARTICLE_FIELDS,
    LAB_FIELDS,
    RANKED,
    Agreement,
    ArticleRecord,
    CompareParams,
    CompareRecord,
    ratios_to,
    run_ratios_to,
)
from labctl.records.published import ARTICLE, Row
from labctl.records.run import ServiceLimits
from labctl.render import charts
from labctl.render.capacity_page import bracket_text
from labctl.render.plain_page import esc, row, td, th
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
num = stats.num
MARK_WIDE = "†"  # a queue whose RPS interval did not get within the comparison's target


# -- Figures as the tables print them --------------------------------------------------------
def figure(record: CompareRecord, queue: str, key: str, show_n: bool = False) -> str:
    """`412 [398–430]`, `~` before a projected time; `-` for none."""
    est = record.figure(queue, key)
    text = stats.text(est, show_n)
    return f"~{text} projected" if record.projected(queue, key) and est.median is not None else text


def wide(record: CompareRecord) -> dict[str, str]:
    """The queues whose RPS interval is wider than the target, and why they stopped."""
    return record.rounds.not_within()


def runs_of(record: CompareRecord, queue: str) -> int:
    return sum(1 for r in record.runs if r.queue == queue)


# -- The setting, as one line --------------------------------------------------------------
def limits_line(record: CompareRecord) -> str:
    limits = record.setting.limits
    return f"API {limits.api_text}, workers {limits.workers_text}"


def run_length(p: CompareParams) -> str:
    if p.duration_s:
        return f"{p.duration_s:g} s of load per run (RPS over all but its first {p.warmup_s or 0:g} s)"
    return f"{p.requests} requests per run"


def rounds_line(record: CompareRecord) -> str:
    r = record.rounds
    if not r.recorded:
        return f"{record.params.reps or '?'} rep(s) per queue, in a fixed order"
    counts = sorted({runs_of(record, q) for q in record.queues})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return (
        f"{len(r.orders)} round(s) in a random order (seed {r.seed}), {n} runs per queue: "
        f"at least {r.rounds}, then more for a queue whose RPS interval was wider than "
        f"+-{r.target_pct:g} % (at most {r.max_rounds})"
    )


def heading(record: CompareRecord) -> str:
    p = record.params
    quick = "; quick: a first look, its intervals as wide as its few runs make them" if p.quick else ""
    return f"{p.endpoint}, {p.users} users, {run_length(p)}; {rounds_line(record)}; {limits_line(record)}{quick}"


# -- Markdown ---------------------------------------------------------------------------------
def ranking_rows(record: CompareRecord) -> list[list[str]]:
    """A row per place: the RPS ranking beside the tasks/s ranking."""
    by = {key: record.ranking.get(key) or [] for _, key in RANKED}
    marks = wide(record)
    rows = []
    for i in range(max((len(v) for v in by.values()), default=0)):
        row: list[str] = []
        for _, key in RANKED:
            entries = by[key]
            if i < len(entries):
                e = entries[i]
                mark = MARK_WIDE if key == "rps" and e.queue in marks else ""
                row += [str(e.rank), f"{e.queue}{mark}", stats.text(e.estimate)]
            else:
                row += ["", "", ""]
        rows.append(row)
    return rows


RANKING_HEADER = ("rank", "queue", "RPS [95 % CI] (n)", "rank", "queue", "tasks/s [95 % CI] (n)")
LEGEND = (
    "Each figure: the median of the queue's runs [its 95 % confidence interval] (n runs). "
    "Rank: 1 + the number of queues shown faster, where shown means the 95 % interval of the ratio of "
    "the two queues' figures lies wholly above 1; queues that share a rank were not told apart. "
    "tasks/s: the run's tasks over the time from its first enqueue to its last completion."
)


def markdown(record: CompareRecord) -> str:
    """The comparison's tables for an issue or a README: the ranking, the article's figures, the lab's."""
    lines = [
        f"make compare {record.run}: {heading(record)}.",
        "",
        LEGEND,
        "",
        markdown_table(RANKING_HEADER, ranking_rows(record), {"queue"}),
    ]
    if marks := wide(record):
        lines += ["", f"{MARK_WIDE} RPS interval wider than the target: " + ", ".join(sorted(marks))]
    article = [
        [q, str(runs_of(record, q)), *(figure(record, q, key) for _, key in ARTICLE_FIELDS)] for q in record.queues
    ]
    lab = [[q, *(figure(record, q, key) for _, key in LAB_FIELDS)] for q in record.queues]
    lines += [
        "",
        "The published experiment's figures (median [95 % CI] over the runs; ~ projected: the queue drained slower "
        "than its API enqueued, its time to run every task projected from the rate it held while watched):",
        "",
        markdown_table(["queue", "n", *(name for name, _ in ARTICLE_FIELDS)], article, {"queue"}),
        "",
        "What the lab adds:",
        "",
        markdown_table(["queue", *(name for name, _ in LAB_FIELDS)], lab, {"queue"}),
    ]
    if record.off_speed:
        lines += [
            "",
            "Runs on a machine more than 5 % off the comparison's median speed: " + ", ".join(record.off_speed),
        ]
    if published := record.published:
        src = published.source
        rows = [
            [queue, *(num(getattr(pub, key)) for _, key in ARTICLE_FIELDS)] for queue, pub in published.rows.items()
        ]
        lines += [
            "",
            f"The published experiment at {published.setting} ({src.publisher}, {src.url}; "
            "another machine, its own versions):",
            "",
            markdown_table(["queue", *(name for name, _ in ARTICLE_FIELDS)], rows, {"queue"}),
        ]
    if record.capacity:
        lines += ["", "The rate each queue sustains (its latest make capacity):", ""]
        lines.append(markdown_table(CAPACITY_HEADER, capacity_rows(record), {"queue"}))
    return "\n".join(lines)


CAPACITY_HEADER = (
    "queue",
    "sustained tasks/s",
    "bracket",
    "limited by",
    "tasks/s per CPU",
    "max wait s",
    "limits",
    "record",
)


def capacity_rows(record: CompareRecord) -> list[list[str]]:
    """Each queue's latest make capacity: the rate sustained [95 % CI] (n), the search's bracket, what limited it."""
    rows = []
    for q, c in record.capacity.items():
        rows.append(
            [
                q,
                stats.text(stats.from_json(c.sustained_rate)),
                bracket_text(c.bracket),
                c.limited_by or "-",
                num(c.tasks_per_cpu),
                num(c.max_wait_s),
                c.limits,
                c.record,
            ]
        )
    return rows


def capacity_section(record: CompareRecord) -> str:
    if not record.capacity:
        return (
            "<p class='muted'>No <code>make capacity</code> record for these queues in the results directory "
            "(<code>make compare capacity=1</code> runs one first).</p>"
        )
    rows = [[td(c, i in (1, 2, 4, 5)) for i, c in enumerate(cells)] for cells in capacity_rows(record)]
    note = (
        "<p class='muted'>The highest arrival rate each queue's whole path kept in open-model steps: nothing failed, "
        "the schedule kept, the backlog not growing, the p95 wait under max wait (docs/capacity.md). A capacity "
        "measured under other limits than this comparison's says less about it.</p>"
    )
    return note + _table("capacity", CAPACITY_HEADER, rows)


# -- HTML ---------------------------------------------------------------------------------------
CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 3px 7px; } td.n { text-align: right; } th { background: #f3f3f3; }
.ci { display: block; white-space: nowrap; color: #666; font-size: 12px; }
th.article { background: #e8f0fb; } .muted { color: #666; } .warn { color: #a40; }
td.rank { text-align: center; font-weight: 600; } tr.tie td.rank { color: #888; }
.legend span { display: inline-block; margin-right: 14px; } .sw { display: inline-block; width: 18px; height: 3px;
  vertical-align: middle; margin-right: 4px; }
.scroll { overflow-x: auto; }
svg { display: block; margin: 6px 0 2px; max-width: 100%; height: auto; } svg text { font: 11px system-ui, sans-serif; fill: #333; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def colour(queue: str) -> str:
    order = list(QUEUES)
    return PALETTE[order.index(queue) % len(PALETTE)] if queue in order else "#000"


def _stat_cell(record: CompareRecord, queue: str, key: str) -> str:
    """A figure's cell: the median, its interval below it, and the numbers as data attributes."""
    est = record.figure(queue, key)
    attrs = f' data-queue="{esc(queue)}" data-field="{key}"'
    attrs += "".join(f' data-{k}="{v}"' for k, v in est.as_json().items() if v is not None)
    text = esc(num(est.median))
    if est.low is not None and est.high is not None:
        text += f"<span class=ci>[{esc(num(est.low))}–{esc(num(est.high))}]</span>"
    if record.projected(queue, key) and est.median is not None:
        attrs += ' data-projected="1"'
        text = f"~{text}<span class=ci>projected</span>"
    return f"<td class=n{attrs}>{text}</td>"


def ranking_table(record: CompareRecord, key: str, title: str) -> str:
    marks = wide(record)
    body = []
    previous = None
    for e in record.ranking.get(key) or []:
        mark = MARK_WIDE if key == "rps" and e.queue in marks else ""
        cells = [
            f"<td class=rank data-rank-of='{esc(e.queue)}' data-ranking='{key}'>{e.rank}</td>",
            td(e.queue + mark, attrs=f' data-queue="{esc(e.queue)}"'),
            _stat_cell(record, e.queue, key),
            td(e.n, True),
            td(", ".join(e.above) or "-"),
        ]
        body.append(row(cells, "tie" if e.rank == previous else ""))
        previous = e.rank
    head = row([th("rank"), th("queue"), th(f"{title} [95 % CI]"), th("n"), th("shown faster")])
    return f"<table id='ranking-{key}'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def ranking_section(record: CompareRecord) -> str:
    marks = wide(record)
    note = ""
    if marks:
        note = (
            f"<p class='warn' id='wide'>{MARK_WIDE} RPS interval still wider than +-"
            f"{record.rounds.target_pct:g} % of the median when the comparison stopped: "
            + esc(", ".join(f"{q} ({why})" for q, why in sorted(marks.items())))
            + ". Its rank is as sure as its interval; more rounds (<code>max_rounds=</code>, "
            "<code>budget_min=</code>) narrow it.</p>"
        )
    return (
        f"<p class='muted'>{esc(LEGEND)}</p>{note}"
        + "".join(f"<h3>By {esc(title)}</h3>{ranking_table(record, key, title)}" for title, key in RANKED)
        + errorbar_chart(record)
    )


def figures_table(record: CompareRecord, fields: Sequence[tuple[str, str]], table_id: str, cls: str = "") -> str:
    head = row([th("queue"), th("n"), *(th(name, cls) for name, _ in fields)])
    body = [
        row(
            [
                td(q, attrs=f' data-queue="{esc(q)}"'),
                td(runs_of(record, q), True),
                *(_stat_cell(record, q, k) for _, k in fields),
            ]
        )
        for q in record.queues
    ]
    return f'<div class=scroll><table id="{table_id}"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></div>'


def published_section(record: CompareRecord) -> str:
    published = record.published
    if not published:
        return (
            '<p class="muted" id="published-none">The published experiment (KTS, habr.com) measured 0.2 CPU / 200M '
            "and 0.5 CPU / 500M with 100 users on <code>io/simple</code>; its figures appear here beside the lab's "
            f"when a comparison runs that setting. Not here: {esc(record.published_note or '')}.</p>"
        )
    src = published.source
    head = row([th("queue"), *(th(name, "article") for name, _ in ARTICLE_FIELDS)])
    body = [
        row([td(q), *(td(num(getattr(pub, k)), True) for _, k in ARTICLE_FIELDS)]) for q, pub in published.rows.items()
    ]
    return (
        f'<p>The published experiment at {esc(published.setting)}: <a href="{esc(src.url)}">'
        f"{esc(src.title)}</a> ({esc(src.publisher)}). <b>Another machine</b>, its own library versions "
        f'and code: read it beside the lab\'s, not as the same measurement.</p><table id="published">'
        f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
    )


# -- Charts: matplotlib, inline SVG ----------------------------------------------------------------
PANEL_W, PANEL_H, PANELS_PER_ROW = 190, 150, 5


def line_id(key: str, queue: str, rep: int) -> str:
    """The gid of one run's line on one chart: the SVG group a test finds it by."""
    return f"line-{key}-{queue}-r{rep}"


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
    for i, ax in enumerate(axes.flat):
        if i >= len(queues):
            ax.set_visible(False)
            continue
        queue = queues[i]
        runs = [s for s in record.series if s.queue == queue]
        for s in runs:
            samples: list[list[float]] = getattr(s, key)
            gid = line_id(key, queue, s.rep)
            drawn = [[t, max(v, 0)] for t, v in samples]  # the y axis starts at 0, as every series does
            top = max([top, *(v for _, v in drawn)])
            line = charts.plot_xy(ax, drawn, color=colour(queue), lw=0.7, alpha=0.35)
            line.set_gid(gid)
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


# -- The other sections -------------------------------------------------------------------------
def _table(table_id: str, header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = row(th(h) for h in header)
    return (
        f"<div class=scroll><table id='{table_id}'><thead>{head}</thead>"
        f"<tbody>{''.join(row(r) for r in rows)}</tbody></table></div>"
    )


def _middle(value: float | None, table: float | None) -> str:
    """A chart's mean over the middle of a run, and its ratio to the table's figure."""
    if value is None:
        return "-"
    return f"{num(value)} ({value / table:.2f})" if table else num(value)


def runs_section(record: CompareRecord) -> str:
    """Every run of the comparison, in the order it ran, with its charts over the middle of its load."""
    off = set(record.off_speed)
    rows = [
        [
            td(r.round if r.round is not None else r.rep, True),
            td(r.queue),
            td(r.rep, True),
            td(num(r.rps), True),
            td(num(r.tasks_per_s), True),
            td(num(r.machine_speed) + (" off" if r.run in off else ""), True),
            td(_middle(r.chart_rps_middle, r.rps), True),
            td(num(r.median_ms), True),
            td(num(r.p95_ms), True),
            td(("~" if r.all_done_projected else "") + num(r.all_done_s), True),
            td(num(r.completed), True),
            td(num(r.lost), True),
            td(num(r.duplicates), True),
            td("; ".join(r.warnings)),
            td(r.run),
        ]
        for r in record.runs
    ]
    header = (
        "round",
        "queue",
        "its run",
        "RPS",
        "tasks/s",
        "machine speed",
        "requests chart, middle (÷ RPS)",
        "median ms",
        "p95 ms",
        "all tasks done s",
        "completed",
        "lost",
        "dup",
        "warnings",
        "run",
    )
    note = (
        "<p class='muted'>RPS: over the steady part of the load (after its warm-up), from the API's enqueue counter "
        "as Prometheus scraped it. Machine speed: units of the probe's fixed work the machine ran a second over the "
        "same part of the load; <b>off</b>: more than 5 % from the median of every run's, a run on a slower or "
        "faster machine than the others. The requests chart's mean over the middle of the load beside the RPS. "
        "~: projected from the rate its tasks settled at while watched; the rest of such a backlog was run by a "
        "one-off worker, and the counts are the ledger's whole.</p>"
    )
    return note + _table("runs", header, rows)


def rounds_section(record: CompareRecord) -> str:
    r = record.rounds
    if not r.recorded:
        return "<p class='muted'>This comparison ran before its rounds were recorded: a fixed order.</p>"
    rows = [[td(i, True), td(" ".join(order))] for i, order in enumerate(r.orders, 1)]
    stopped = ", ".join(f"{q}: {why}" for q, why in sorted(r.stopped.items()))
    return (
        f"<p>Seed <code>{esc(r.seed)}</code> (<code>seed={esc(r.seed)}</code> repeats the order). "
        f"Why each queue stopped: {esc(stopped or '-')} (within: its RPS interval within +-"
        f"{esc(num(r.target_pct))} %; max_rounds; budget: the next round would have ended past "
        f"{esc(num((r.budget_s or 0) / 60))} min).</p>" + _table("rounds", ("round", "order"), rows)
    )


def _pair(values: Sequence[float | None] | None) -> str:
    bare, lab = values or (None, None)
    return f"{num(bare)} / {num(lab)}"


def cost_section(record: CompareRecord) -> str:
    """The lab's own cost beside the comparison: each queue's latest `make bench`, lab ÷ bare."""
    bench = record.bench
    if not bench:
        return "<p class='muted'>No <code>make bench</code> record in the results directory: run one to see what the lab costs.</p>"
    rows = [
        [
            td(q),
            td(num(b.rps_ratio), True),
            td(num(b.drain_ratio), True),
            td(_pair(b.api_cpu_us_per_request), True),
            td(_pair(b.worker_cpu_us_per_task), True),
            td(f"{b.api_limits} / {b.worker_limits}"),
            td(b.mode),
            td(b.run),
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


def chaos_section(record: CompareRecord) -> str:
    if not record.chaos:
        return "<p class='muted'>No <code>make chaos</code> record for these queues in the results directory.</p>"
    rows = [
        [
            td(c.queue),
            td(c.fault),
            td(num(c.lost), True),
            td(num(c.duplicates), True),
            td(num(c.recovered_s), True),
            td(c.limits),
            td(c.run),
        ]
        for c in record.chaos
    ]
    return _table("chaos", ("queue", "fault", "lost", "duplicates", "work resumed after s", "limits", "run"), rows)


def setting_section(record: CompareRecord) -> str:
    """The limits the engine applied, the knobs, the versions and the machine."""
    setting = record.setting
    limits = setting.limits
    rows = [[td("api"), *(td(x) for x in _limit_cells(limits.api))]]
    rows += [[td(q), *(td(x) for x in _limit_cells(lim))] for q, lim in limits.workers.items()]
    knobs = [
        [td(service), td(", ".join(f"{k}={v}" for k, v in values.items()))] for service, values in setting.knobs.items()
    ]
    versions = [[td(name), td(version)] for name, version in setting.versions.items()]
    machine = [[td(k), td(v)] for k, v in setting.machine.items()]
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


def _limit_cells(lim: ServiceLimits | None) -> tuple[object, ...]:
    lim = lim or ServiceLimits()
    return (lim.cpus, lim.memory, lim.replicas, lim.concurrency)


def page(record: CompareRecord) -> str:
    """The whole report as one HTML document that needs nothing but itself."""
    notes = "".join(f"<li>{esc(n)}</li>" for n in record.notes)
    p = record.params
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>make compare {esc(record.run)}</title>
<style>{CSS}</style></head><body>
<h1>The queues side by side: {esc(record.run)}</h1>
<p>{esc(heading(record))}. Ran {esc(record.time)} for {esc(num(record.wall_s))} s
(<code>{esc(record.command)}</code>); every run began on empty queues and watched its tasks for at most
{esc(num(p.drain_watch_s))} s, a queue that drained slower having the rest run by a one-off worker of its own.</p>
<h2>Which queue is faster</h2>
{ranking_section(record)}
<h2>The published experiment's figures</h2>
{figures_table(record, ARTICLE_FIELDS, "summary", "article")}
<p class="muted">Median [95 % CI] over each queue's runs. RPS: requests per second over the steady part of each
run's load (the API's enqueue counter as Prometheus scraped it, one task a request); median and p95 from Locust over
the whole load ({esc(p.users)} users); all tasks done: first enqueue to last completion (the ledger), or
~projected where the queue drained slower than its API enqueued, from the rate its tasks settled at while watched.</p>
{published_section(record)}
<h2>What the lab adds</h2>
{figures_table(record, LAB_FIELDS, "lab-figures")}
<p class="muted">CPU per task: the worker's CPU seconds from the load's start to the last settled task, over the
tasks completed (for <code>background</code> the API's, which serves the requests too); peaks and throttling over
the same window (Prometheus). Throttled periods: of the CPU scheduler's 100 ms periods in which the worker ran, the
share in which it used up its CPU limit. Machine speed: units of a fixed piece of Python the machine ran a second
over the same part of each run as its RPS: a limited container's rate follows the speed of the cores under it.</p>
<h2>Over time</h2>
{charts_section(record)}
<h2>The rate each queue keeps up with (make capacity)</h2>
{capacity_section(record)}
<h2>What the lab costs</h2>
{cost_section(record)}
<h2>Faults (make chaos)</h2>
{chaos_section(record)}
<h2>The rounds</h2>
{rounds_section(record)}
<h2>Every run</h2>
{runs_section(record)}
<h2>The setting</h2>
{setting_section(record)}
{f"<h2>Notes</h2><ul id='notes'>{notes}</ul>" if notes else ""}
</body></html>
"""


# -- Two comparisons side by side (make compare-agree) ------------------------------------------
def agreement_markdown(a: CompareRecord, b: CompareRecord, result: Agreement, within_pct: float) -> str:
    """Each queue's median RPS in both, their difference, the shift second / first with its
    interval, its rank in each, and the pairs called both ways."""
    rank_a = {e.queue: e.rank for e in a.ranking.get("rps") or []}
    rank_b = {e.queue: e.rank for e in b.ranking.get("rps") or []}
    rows = [
        [
            q,
            stats.text(a.figure(q, "rps")),
            stats.text(b.figure(q, "rps")),
            f"{result.diff_pct[q]:.1f}" if q in result.diff_pct else "-",
            f"{stats.ratio_text(result.shifts[q])} {result.shifts[q].verdict}",
            f"{rank_a.get(q, '-')} / {rank_b.get(q, '-')}",
        ]
        for q in result.medians
    ]
    largest = result.largest_diff_pct
    called_a, called_b = result.called
    lines = [
        f"{a.run} beside {b.run}: median RPS [95 % CI] (n) in each, how far apart the medians are, the "
        "second's over the first's with its 95 % interval, and each queue's rank in each.",
        "",
        markdown_table(["queue", a.run, b.run, "apart %", "second / first", "rank"], rows, {"queue"}),
        "",
        f"Largest difference between the medians: {num(largest)} %. More than {within_pct:g} % apart: "
        f"{', '.join(result.far) or 'none'}; of those, by a shift the runs show (its interval excludes 1): "
        f"{', '.join(result.disagreeing) or 'none'}.",
        f"Pairs of queues called different: {called_a} in {a.run}, {called_b} in {b.run}; called the other way "
        f"round by the other: {', '.join(result.flipped) or 'none'}.",
    ]
    return "\n".join(lines)


# -- The published experiment's two settings (make compare setting=article) ---------------------
REFERENCE = "faststream"  # the article's queue without a concurrency setting: the ratios' denominator


def _setting_of(part: CompareRecord) -> str:
    return part.published.setting if part.published else limits_line(part)


@dataclass(frozen=True)
class ArticleRow:
    """A queue at one of the article's settings: the article's figures, its RPS over
    REFERENCE's in the lab (with its interval) and in the article, and whether the
    article's ratio lies inside the lab's interval (None: no ratio to set against)."""

    queue: str
    published: Row | None
    ratio: stats.Ratio | None
    pub_ratio: float | None
    inside: bool | None

    def article(self, key: str) -> float | None:
        """The article's figure for an ARTICLE_FIELDS key; None where it has no row."""
        return getattr(self.published, key) if self.published else None


def article_rows(part: CompareRecord) -> list[ArticleRow]:
    """Per queue: the lab's figures, the article's, and each RPS over FastStream's (the
    lab's with its interval), and whether the article's ratio lies inside the lab's interval."""
    published_rows = part.published.rows if part.published else {}
    lab_ratio = run_ratios_to(part.runs, REFERENCE)
    pub_ratio = ratios_to(published_rows, REFERENCE)
    out = []
    for q in part.queues:
        r, pub = lab_ratio.get(q), pub_ratio.get(q)
        inside = None
        if r is not None and pub is not None and r.low is not None and r.high is not None and q != REFERENCE:
            inside = r.low <= pub <= r.high
        out.append(ArticleRow(q, published_rows.get(q), r, pub, inside))
    return out


def _inside_text(inside: bool | None) -> str:
    return {True: "yes", False: "no"}.get(inside, "-") if inside is not None else "-"


def article_markdown(record: ArticleRecord) -> str:
    """Both settings' tables, the lab's beside the article's, and the ratios between queues."""
    lines = [
        f"make compare setting=article {record.run}: the published experiment's settings, the lab's figures "
        "(median [95 % CI] over the runs) beside the article's (another machine, its own versions); ratios: each "
        f"queue's RPS over {REFERENCE}'s, the lab's with its interval beside the article's, and whether the "
        "article's lies inside the lab's interval.",
    ]
    for part in record.parts:
        rows = [
            [
                a.queue,
                figure(part, a.queue, "rps", show_n=True),
                num(a.article("rps")),
                figure(part, a.queue, "median_ms"),
                num(a.article("median_ms")),
                figure(part, a.queue, "p95_ms"),
                num(a.article("p95_ms")),
                stats.ratio_text(a.ratio) if a.ratio else "-",
                num(a.pub_ratio),
                _inside_text(a.inside),
            ]
            for a in article_rows(part)
        ]
        header = ["queue", "RPS lab", "RPS article", "median ms lab", "median ms article", "p95 ms lab"]
        header += ["p95 ms article", f"RPS ÷ {REFERENCE} lab", f"RPS ÷ {REFERENCE} article", "article's inside"]
        lines += ["", f"{_setting_of(part)} ({part.run}):", "", markdown_table(header, rows, {"queue"})]
    return "\n".join(lines)


def article_page(record: ArticleRecord) -> str:
    """One page for both settings: each setting's table beside the article's, with the ratios, and a
    link to each setting's own report (its charts and every run)."""
    sections = []
    for part in record.parts:
        head = row(
            [
                th("queue"),
                *(
                    th(f"{name} {who}", "article" if who == "article" else "")
                    for name in ("RPS", "median ms", "p95 ms")
                    for who in ("lab", "article")
                ),
                th(f"RPS ÷ {REFERENCE} lab [95 % CI]"),
                th(f"RPS ÷ {REFERENCE} article", "article"),
                th("article's inside the lab's interval"),
            ]
        )
        body = []
        for a in article_rows(part):
            q = a.queue
            cells = [td(q, attrs=f' data-queue="{esc(q)}"')]
            for key in ("rps", "median_ms", "p95_ms"):
                cells.append(_stat_cell(part, q, key))
                cells.append(td(num(a.article(key)), True, f' data-queue="{esc(q)}" data-article="{key}"'))
            ratio = a.ratio
            ratio_attrs = f' data-queue="{esc(q)}" data-ratio="lab"'
            if ratio is not None:
                ratio_attrs += "".join(f' data-{k}="{v}"' for k, v in ratio.as_json().items() if v is not None)
            cells.append(td(stats.ratio_text(ratio) if ratio else "-", True, ratio_attrs))
            cells.append(td(num(a.pub_ratio), True, f' data-queue="{esc(q)}" data-ratio="article"'))
            cells.append(td(_inside_text(a.inside), attrs=f' data-queue="{esc(q)}" data-inside="1"'))
            body.append(row(cells))
        link = esc(f"{part.run}.html")
        sections.append(
            f"<h2>{esc(_setting_of(part))}</h2><p>{esc(heading(part))}. Its own report, with its ranking, charts and "
            f"every run: <a href='{link}'>{link}</a>.</p><div class=scroll><table class='article-setting' "
            f"data-setting='{esc(_setting_of(part))}'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div>"
        )
    src = ARTICLE.source
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>make compare setting=article {esc(record.run)}</title>
<style>{CSS}</style></head><body>
<h1>The published experiment's settings, the lab beside the article: {esc(record.run)}</h1>
<p>Ran {esc(record.time)} for {esc(num(record.wall_s))} s (<code>{esc(record.command)}</code>). The
article: <a href="{esc(src.url)}">{esc(src.title)}</a> ({esc(src.publisher)}), ARQ, SAQ and Celery at
concurrency 1, 100 users on the enqueue route, 50,000 iterations a run, <b>another machine</b> with its own
versions: its absolute figures are not the lab's to match; the ratios between queues are what should carry, so each
queue's RPS over FastStream's is given with its 95 % interval, and whether the article's ratio lies inside it.
The lab's figures: median [95 % CI] over the runs.</p>
{"".join(sections)}
</body></html>
"""
