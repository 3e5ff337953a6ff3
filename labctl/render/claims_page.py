"""make claims' report: a markdown twin and one self-contained HTML page (inline
CSS, no script, nothing fetched), in the comparison report's style. Pure
functions; every figure comes from records/claims.py (`rows`, `verdicts`,
`lab_rows`), computed from the runs: a median with its 95 % interval and n
(labctl/stats.py). Each figure's cell carries what it stands for as data-*
attributes (benchmark, setup, column, queue, figure, median/low/high/n,
published), each claim's row its ratio, interval, scale and verdict, each lab
path row its figures and ratio, so a test reads the page back and checks it
against the runs (tests/claims_report.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from labctl.records import claims_rules as rules
from labctl.records.claims import ClaimsRecord, ConfigRow, LabRow, Verdict, is_quick, lab_rows, rows, verdicts
from labctl.records.claims_published import BENCHES, Bench
from labctl.render.compare_page import CSS
from labctl.render.plain_page import esc, row, td, th
from labctl.render.table import markdown_table
from labctl.stats import Ratio, num, text


def _label(config: ConfigRow) -> str:
    column, workers = config.column, config.params.workers
    if not (column.startswith("w") and column[1:].isdigit()):
        return f"{config.queue} {column}".strip()
    if workers != int(column[1:]):
        return f"{config.queue} ({column[1:]} published, {workers} here)"
    return f"{config.queue} ({workers})"


def ratio_text(v: Verdict) -> str:
    """A claim's figure here: `4.62 [4.41–4.84] (n=3/3)` (a figure over its published value: `(n=3)`);
    for an event, what each run did."""
    if v.claim.rule == "event":
        return "; ".join(v.seen) or "-"
    r = v.ratio
    if r is None or r.value is None:
        return "-"
    counts = f"n={r.n_a}" + (f"/{r.n_b}" if v.claim.rule != "absolute" else "")
    return f"{lab_ratio_text(r)} ({counts})"


def scale_text(v: Verdict) -> str:
    return f"scaled: {v.scale}" if v.scale else "as published"


def verdict_text(v: Verdict) -> str:
    """The verdict as the tables print it: the rule's answer first (a quick run's: the smoke test's), then
    whether the runs it rests on are smaller than the author's (by how much: the runs' column), then
    what the ratio rests on."""
    out = v.verdict
    if v.scale:
        out += ", on runs scaled below the author's"
    if v.cause:
        out += f"; {v.cause}"
    return out


def smoke_line(record: ClaimsRecord) -> str:
    """What a quick run's verdicts are: none of the claims'."""
    if not is_quick(record):
        return ""
    return (
        "A quick run (N x 0.1, one repetition) is a smoke test: every benchmark ran and every job was counted, "
        "but its verdicts are not the claims' verdicts (one run has no interval, and its N is a tenth of the "
        "full run's). The claims are decided by `make claims` at its defaults."
    )


def rules_lines() -> list[str]:
    """The rules as the report states them (claims_rules.py, docs/claims.md)."""
    lo, hi = rules.PARITY
    return [
        "Each claim is decided on the 95 % interval of its ratio (Welch on logs over every ok run of each "
        "side; an absolute figure's own interval over its published value): holds where the interval lies "
        "inside the rule's band, fails where it lies wholly outside, not decided where it straddles an edge.",
        f"magnitude (a published ratio R): [R/{rules.BAND:g}, {rules.BAND:g}R]; wholly outside but on the "
        "published side of 1: direction only.",
        f'parity ("on par"): [{lo:.2f}, {hi:g}].',
        f'slightly ("slightly faster", rates): ({rules.SLIGHTLY[0]:g}, {rules.SLIGHTLY[1]:g}]; wholly above: '
        "faster than claimed.",
        f'much ("much faster", rates): at least {rules.MUCH:g}; wholly below it but above 1: direction only.',
        f"absolute (a sleep-bound rate, here over published): [{rules.ABSOLUTE[0]:g}, {rules.ABSOLUTE[1]:g}].",
        "event (a run the author saw fail): holds where every run of it failed here, fails where every run finished.",
        "Fewer than two ok runs on a side: too few runs.",
    ]


# -- Markdown ------------------------------------------------------------------------------------
def verdicts_markdown(record: ClaimsRecord) -> str:
    body = [
        [
            v.id,
            v.claim.text,
            v.setup,
            num(v.claim.published),
            ratio_text(v),
            v.claim.rule,
            scale_text(v),
            verdict_text(v),
        ]  # fmt: skip
        for v in verdicts(record)
    ]
    header = ["claim", "what", "setup", "published", "here: median [95 % interval] (n)", "rule", "runs", "verdict"]
    table = markdown_table(header, body, set(header) - {"published"}) if body else "No claim's benchmark ran."
    smoke = smoke_line(record)
    return f"{smoke}\n\n{table}" if smoke else table


def benches_run(record: ClaimsRecord) -> Iterator[tuple[str, Bench, list[ConfigRow]]]:
    """Each benchmark that ran, with its configurations' rows; the lab's path has its own section."""
    all_rows = rows(record)
    for bench, meta in BENCHES.items():
        bench_rows = [r for r in all_rows if r.bench == bench]
        if bench_rows and bench != "lab_path":
            yield bench, meta, bench_rows


def figures_markdown(record: ClaimsRecord) -> str:
    out = []
    for _, meta, bench_rows in benches_run(record):
        figures = meta.figures
        body = []
        for r in bench_rows:
            cells = [f"{num(r.figures[f].published)} / {text(r.figures[f].lab)}" for f in figures]
            failed = "; ".join(r.failed) or "-"
            body.append([_label(r), r.setup, r.n, r.reps, *cells, r.lost, r.duplicates, failed])
        header = ["queue", "setup", "N", "reps", *(f"{f} published / here" for f in figures), "lost", "dup", "failed"]
        out += [f"### {meta.title}", "", markdown_table(header, body, {"queue", "setup", "failed"}), ""]
    return "\n".join(out)


def lab_ratio_text(r: Ratio) -> str:
    if r.value is None:
        return "-"
    interval = f" [{num(r.low)}–{num(r.high)}]" if r.low is not None and r.high is not None else ""
    return f"{num(r.value)}{interval}"


LAB_TEXT = ("job shape", "queue", "bare from")  # the lab path table's columns of text, the rest figures


def lab_cells(r: LabRow) -> list[object]:
    return [r.shape, r.queue, r.n, text(r.lab), text(r.bare), r.bare_from, lab_ratio_text(r.ratio)]


def lab_markdown(record: ClaimsRecord) -> str:
    body = [lab_cells(r) for r in lab_rows(record)]
    header = ["job shape", "queue", "N", "lab: first → last s", "bare s", "bare from", "lab / bare"]
    return markdown_table(header, body, LAB_TEXT) if body else "Not run."


def markdown(record: ClaimsRecord) -> str:
    s = record.setting
    lines = [
        f"# make claims {record.run}",
        "",
        f"`{record.command}`: {num(record.wall_s)} s. Figures: the median over the repetitions, its 95 % "
        "interval and n (labctl/stats.py); published figures are another machine's, so read the ratios.",
        "",
        "## The claims",
        "",
        verdicts_markdown(record),
        "",
        *(f"- {line}" for line in rules_lines()),
        "",
        "## Every figure, published / here",
        "",
        figures_markdown(record),
        "## The same jobs through the lab's own path",
        "",
        lab_markdown(record),
        "",
        "## The setting",
        "",
        markdown_table(["what", "value"], [[k, v] for k, v in s.machine.items()], {"what", "value"}),
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in s.versions.items()),
        "",
    ]
    if record.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in record.notes), ""]
    return "\n".join(lines)


# -- HTML ------------------------------------------------------------------------------------------
def _figure_cell(config: ConfigRow, figure: str) -> str:
    fig = config.figures[figure]
    attrs = (
        f' data-bench="{esc(config.bench)}" data-setup="{esc(config.setup)}" data-column="{esc(config.column)}"'
        f' data-queue="{esc(config.queue)}" data-figure="{esc(figure)}"'
    )
    if fig.published is not None:
        attrs += f' data-published="{fig.published}"'
    attrs += _data_attrs(fig.lab.as_json(), ("median", "low", "high", "n"))
    shown = f"{num(fig.published)} / {text(fig.lab)}"
    return f"<td class='n fig'{attrs}>{esc(shown)}</td>"


def _data_attrs(values: Mapping[str, Any] | None, keys: Iterable[str], prefix: str = "") -> str:
    """`data-<prefix><key>="<value>"` for each key that has a value."""
    values = values or {}
    return "".join(f' data-{prefix}{k.replace("_", "-")}="{esc(values[k])}"' for k in keys if values.get(k) is not None)


def figures_section(record: ClaimsRecord) -> str:
    out = []
    for bench, meta, bench_rows in benches_run(record):
        src = meta.source
        figures = meta.figures
        head = row(
            [th(h) for h in ("queue", "setup", "path", "N", "reps")]
            + [th(f"{f}: published / here") for f in figures]
            + [th(h) for h in ("lost", "dup", "failed runs")]
        )
        body = [
            row(
                [
                    td(_label(r)),
                    td(r.setup),
                    td(r.path),
                    td(r.n, True),
                    td(r.reps, True),
                    *(_figure_cell(r, f) for f in figures),
                    td(r.lost, True),
                    td(r.duplicates, True),
                    td("; ".join(r.failed) or "-", attrs=" class=warn" if r.failed else ""),
                ]
            )
            for r in bench_rows
        ]
        quirks = "".join(f"<li>{esc(q)}</li>" for q in meta.quirks)
        out.append(
            f"<h3 id='bench-{bench}'>{esc(meta.title)}</h3>"
            f"<p class='muted'>{esc(src.repo)} @{esc(src.commit)} ({esc(', '.join(src.files))}; "
            f"{esc(src.licence)}); published with {esc(src.versions)}. {esc(meta.setup)}.</p>"
            f"<table class='figures' data-bench='{esc(bench)}'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
            f"<ul class='quirks'>{quirks}</ul>"
        )
    return "".join(out)


def verdicts_section(record: ClaimsRecord) -> str:
    columns = ("claim", "what", "setup", "figure", "published", "here: median [95 % interval] (n)", "rule", "runs")
    head = row(th(h) for h in (*columns, "verdict", "what it rests on"))
    body = []
    for v in verdicts(record):
        c = v.claim
        attrs = (
            f' data-claim="{esc(v.id)}" data-setup="{esc(v.setup)}" data-rule="{esc(c.rule)}"'
            f' data-verdict="{esc(v.verdict)}" data-rule-says="{esc(v.rule_says)}"'
            f' data-scale="{esc(v.scale)}"'
            + _data_attrs(v.ratio.as_json() if v.ratio else None, ("value", "low", "high", "n_a", "n_b"))
        )
        cls = "ok" if v.verdict == rules.HOLDS else "warn"
        cells = [
            td(v.id),
            td(c.text),
            td(v.setup),
            td(f"{c.figure} {c.num}/{c.den}" + (f" ({c.column})" if c.column else "")),
            td(num(c.published), True),
            td(ratio_text(v), True),
            td(c.rule),
            td(scale_text(v), attrs=" class=warn" if v.scale else ""),
            f"<td class={cls}>{esc(verdict_text(v))}</td>",
            f"<td class=muted>{esc(c.note)}</td>",
        ]
        body.append(row(cells, attrs=attrs))
    return f"<table id='verdicts'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def lab_section(record: ClaimsRecord) -> str:
    found = lab_rows(record)
    if not found:
        return "<p class='muted'>Not run here (<code>--only</code> left it out).</p>"
    header = ("job shape", "queue", "N", "lab: first → last task s", "bare s", "bare from", "lab / bare")
    head = row(th(h) for h in header)
    body = []
    for r in found:
        attrs = (
            f' data-shape="{esc(r.shape)}" data-queue="{esc(r.queue)}"'
            + _data_attrs(r.lab.as_json(), ("median", "low", "high", "n"), "lab-")
            + _data_attrs(r.bare.as_json(), ("median", "low", "high", "n"), "bare-")
            + _data_attrs(r.ratio.as_json(), ("value", "low", "high"), "ratio-")
        )
        cells = [td(c, h not in LAB_TEXT) for h, c in zip(header, lab_cells(r))]
        body.append(row(cells, attrs=attrs))
    return (
        "<p>The same jobs through the lab's API, adapters and ledger (the lab's io/simple task: an INCRBY and the "
        "ledger's settle per task), set against the author's path here: lab / bare above 1 is the lab's cost "
        "on that job. The lab's figure is read from its ledger, polled every 10 ms. The lab's path runs once: "
        "its ratio has an interval only where both sides have two runs or more.</p>"
        f"<table id='lab-path'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
    )


def sources_section(record: ClaimsRecord) -> str:
    out = []
    for path, src in record.sources.items():
        change = f"<pre>{esc(src.diff)}</pre>" if src.diff else "<p class='muted'>unchanged</p>"
        blob = f", blob {esc(src.blob)}" if src.blob else ""
        out.append(
            f"<h4>{esc(path)}</h4><p class='muted'>{esc(src.repo)} @{esc(src.commit)}: "
            f"{esc(src.origin)}{blob}; {esc(src.licence)}</p>{change}"
        )
    return "".join(out)


def runs_section(record: ClaimsRecord) -> str:
    head = row(
        th(h)
        for h in ("bench", "queue", "setup", "rep", "N", "status", "figures", "lost", "dup", "others busy", "load")
    )
    body = [
        row(
            [
                td(r.bench),
                td(r.queue + (f" {r.params.column}" if r.params.column else "")),
                td(r.setup),
                td(r.rep, True),
                td(r.n, True),
                td(r.status, attrs=" class=warn" if r.status != "ok" else ""),
                td(", ".join(f"{k} {num(v)}" for k, v in r.figures.items() if v is not None)),
                td(r.accounting.lost, True),
                td(r.accounting.duplicates, True),
                td(f"{r.busy_before:.0%}" if r.busy_before is not None else "-", True),
                td(" ".join(f"{x:.2f}" for x in r.loadavg)),
            ]
        )
        for r in record.runs
    ]
    return f"<table id='runs'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def setting_section(record: ClaimsRecord) -> str:
    s = record.setting
    table: Callable[[str, Mapping[str, object]], str] = lambda tid, data: (  # noqa: E731
        f"<table id='{tid}'><tbody>" + "".join(row([td(k), td(v)]) for k, v in data.items()) + "</tbody></table>"
    )
    return (
        f"<p>Image {esc(s.image)}; limited runs: {esc(s.limits)} per worker container.</p>"
        "<h3>Machine</h3>"
        + table("machine", s.machine)
        + "<h3>Versions</h3>"
        + table("versions", s.versions)
        + "<h3>Redis</h3>"
        + table("redis", s.redis)
    )


def page(record: ClaimsRecord) -> str:
    notes = "".join(f"<li>{esc(n)}</li>" for n in record.notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>make claims {esc(record.run)}</title>
<style>{CSS} td.ok {{ color: #060; }} pre {{ background: #f7f7f7; padding: 6px; font-size: 12px; overflow-x: auto; }}
ul.quirks {{ color: #444; font-size: 13px; }}</style></head><body>
<h1>The queue authors' benchmarks, run here: {esc(record.run)}</h1>
<p><code>{esc(record.command)}</code> ran {esc(record.time)} for {esc(num(record.wall_s))} s. Each benchmark as
its author runs it, scaled where two cores cannot hold it; first with no CPU limit, as the authors ran, then
with each worker container at the lab's limits. Published figures are another machine's: the ratios between
queues are what should carry. Figures: the median over the repetitions, its 95 % interval and n.</p>
{f"<p id='smoke' class=warn>{esc(smoke_line(record))}</p>" if is_quick(record) else ""}
<h2>The claims</h2>
{verdicts_section(record)}
<ul id='rules' class="muted">{"".join(f"<li>{esc(line)}</li>" for line in rules_lines())}</ul>
<h2>Every figure: published / here</h2>
{figures_section(record)}
<h2>The same jobs through the lab's own path</h2>
{lab_section(record)}
<h2>Every run</h2>
{runs_section(record)}
<h2>The authors' files and every change made to them</h2>
{sources_section(record)}
<h2>The setting</h2>
{setting_section(record)}
{f"<h2>Notes</h2><ul id='notes'>{notes}</ul>" if notes else ""}
</body></html>
"""
