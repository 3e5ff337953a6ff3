"""A comparison's report page (`make compare`): the self-contained HTML page
(inline CSS, charts as inline SVG from matplotlib, no script, nothing fetched).
Every figure is a median with its 95 % interval and n (labctl/stats.py); the
queues are ranked with their ties. Pure functions, no I/O; the figures themselves
are records/compare_figures.py's, the charts render/compare_charts.py's.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from labctl.records.compare import CompareRecord
from labctl.records.compare_figures import ARTICLE_FIELDS, LAB_FIELDS, RANKED
from labctl.records.run import ServiceLimits
from labctl.render.compare_charts import charts_section, errorbar_chart
from labctl.render.compare_text import (
    CAPACITY_HEADER,
    LEGEND,
    MARK_WIDE,
    capacity_rows,
    heading,
    num,
    published_rows,
    runs_of,
    stat_cell,
)
from labctl.render.plain_page import esc, row, td, th

# -- The style (the article's page and make claims' page share it) ------------------------------
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


def ranking_table(record: CompareRecord, key: str, title: str) -> str:
    marks = record.rounds.not_within()
    body = []
    previous = None
    for e in record.ranking.get(key) or []:
        mark = MARK_WIDE if key == "rps" and e.queue in marks else ""
        cells = [
            f"<td class=rank data-rank-of='{esc(e.queue)}' data-ranking='{key}'>{e.rank}</td>",
            td(e.queue + mark, attrs=f' data-queue="{esc(e.queue)}"'),
            stat_cell(record, e.queue, key),
            td(e.n, True),
            td(", ".join(e.above) or "-"),
        ]
        body.append(row(cells, "tie" if e.rank == previous else ""))
        previous = e.rank
    head = row([th("rank"), th("queue"), th(f"{title} [95 % CI]"), th("n"), th("shown faster")])
    return f"<table id='ranking-{key}'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def ranking_section(record: CompareRecord) -> str:
    marks = record.rounds.not_within()
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
                *(stat_cell(record, q, k) for _, k in fields),
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
    body = [row([td(q), *(td(c, True) for c in cells)]) for q, *cells in published_rows(published)]
    return (
        f'<p>The published experiment at {esc(published.setting)}: <a href="{esc(src.url)}">'
        f"{esc(src.title)}</a> ({esc(src.publisher)}). <b>Another machine</b>, its own library versions "
        f'and code: read it beside the lab\'s, not as the same measurement.</p><table id="published">'
        f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
    )


def capacity_section(record: CompareRecord) -> str:
    if not record.capacity:
        return (
            "<p class='muted'>No <code>make capacity</code> record for these queues in the results directory "
            "(<code>make compare capacity=1</code> runs one first).</p>"
        )
    note = (
        "<p class='muted'>The highest arrival rate each queue's whole path kept in open-model steps: nothing failed, "
        "the schedule kept, the backlog not growing, the p95 wait under max wait (docs/capacity.md). A capacity "
        "measured under other limits than this comparison's says less about it.</p>"
    )
    numeric = ("sustained tasks/s", "bracket", "tasks/s per CPU", "max wait s")
    return note + _table("capacity", CAPACITY_HEADER, capacity_rows(record), numeric)


# -- The other sections -------------------------------------------------------------------------
def _table(table_id: str, header: Sequence[str], rows: Iterable[Iterable[object]], numeric: Container[str] = ()) -> str:
    """A table of escaped cells under `header`; the columns named in `numeric` right-aligned."""
    head = row(th(h) for h in header)
    body = "".join(row(td(c, h in numeric) for h, c in zip(header, cells)) for cells in rows)
    return f"<div class=scroll><table id='{table_id}'><thead>{head}</thead><tbody>{body}</tbody></table></div>"


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
            r.round if r.round is not None else r.rep,
            r.queue,
            r.rep,
            num(r.rps),
            num(r.tasks_per_s),
            num(r.machine_speed) + (" off" if r.run in off else ""),
            _middle(r.chart_rps_middle, r.rps),
            num(r.median_ms),
            num(r.p95_ms),
            ("~" if r.all_done_projected else "") + num(r.all_done_s),
            num(r.completed),
            num(r.lost),
            num(r.duplicates),
            "; ".join(r.warnings),
            r.run,
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
    return note + _table("runs", header, rows, set(header) - {"queue", "warnings", "run"})


def rounds_section(record: CompareRecord) -> str:
    r = record.rounds
    if not r.recorded:
        return "<p class='muted'>This comparison ran before its rounds were recorded: a fixed order.</p>"
    rows = [[i, " ".join(order)] for i, order in enumerate(r.orders, 1)]
    stopped = ", ".join(f"{q}: {why}" for q, why in sorted(r.stopped.items()))
    return (
        f"<p>Seed <code>{esc(r.seed)}</code> (<code>seed={esc(r.seed)}</code> repeats the order). "
        f"Why each queue stopped: {esc(stopped or '-')} (within: its RPS interval within +-"
        f"{esc(num(r.target_pct))} %; max_rounds; budget: the next round would have ended past "
        f"{esc(num((r.budget_s or 0) / 60))} min).</p>" + _table("rounds", ("round", "order"), rows, {"round"})
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
            q,
            num(b.rps_ratio),
            num(b.drain_ratio),
            _pair(b.api_cpu_us_per_request),
            _pair(b.worker_cpu_us_per_task),
            f"{b.api_limits} / {b.worker_limits}",
            b.mode,
            b.run,
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
    return note + _table("bench", header, rows, header[1:5])


def chaos_section(record: CompareRecord) -> str:
    if not record.chaos:
        return "<p class='muted'>No <code>make chaos</code> record for these queues in the results directory.</p>"
    rows = [
        [c.queue, c.fault, num(c.lost), num(c.duplicates), num(c.recovered_s), c.limits, c.run] for c in record.chaos
    ]
    header = ("queue", "fault", "lost", "duplicates", "work resumed after s", "limits", "run")
    return _table("chaos", header, rows, header[2:5])


def setting_section(record: CompareRecord) -> str:
    """The limits the engine applied, the knobs, the versions and the machine."""
    setting = record.setting
    limits = [(s, *_limit_cells(lim)) for s, lim in [("api", setting.limits.api), *setting.limits.workers.items()]]
    knobs = [(service, ", ".join(f"{k}={v}" for k, v in values.items())) for service, values in setting.knobs.items()]
    return (
        "<h3>Limits, as the engine applied them</h3>"
        + _table("limits", ("service", "CPUs", "memory", "replicas", "concurrency"), limits)
        + "<h3>Knobs</h3>"
        + _table("knobs", ("service", "settings"), knobs)
        + "<h3>Versions</h3>"
        + _table("versions", ("package", "version"), setting.versions.items())
        + "<h3>Machine</h3>"
        + _table("machine", ("what", "value"), setting.machine.items())
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
