"""The published experiment's two settings (`make compare setting=article`): each
setting's comparison beside the article's figures, with each queue's RPS over the
reference queue's, the lab's with its interval beside the article's, as markdown
and as one HTML page that links to each setting's own report. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from labctl import stats
from labctl.records.compare import ArticleRecord, CompareRecord
from labctl.records.compare_figures import ratios_to, run_ratios_to
from labctl.records.published import ARTICLE, Row
from labctl.render.compare_page import CSS
from labctl.render.compare_text import figure, heading, limits_line, num, stat_cell
from labctl.render.plain_page import esc, row, td, th
from labctl.render.table import markdown_table

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
    """An ArticleRow per queue of the setting's comparison."""
    published = part.published.rows if part.published else {}
    lab_ratio = run_ratios_to(part.runs, REFERENCE)
    pub_ratio = ratios_to(published, REFERENCE)
    out = []
    for q in part.queues:
        r, pub = lab_ratio.get(q), pub_ratio.get(q)
        inside = None
        if r is not None and pub is not None and r.low is not None and r.high is not None and q != REFERENCE:
            inside = r.low <= pub <= r.high
        out.append(ArticleRow(q, published.get(q), r, pub, inside))
    return out


def _inside_text(inside: bool | None) -> str:
    return "-" if inside is None else "yes" if inside else "no"


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
                cells.append(stat_cell(part, q, key))
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
