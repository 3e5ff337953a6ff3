"""A comparison's markdown tables, for an issue or a README (`make compare`,
`make results`): the ranking, the article's figures, the lab's, the published
experiment's and each queue's capacity. Pure functions, no I/O.
"""

from __future__ import annotations

from itertools import chain, zip_longest

from labctl import stats
from labctl.records.compare import CompareRecord
from labctl.records.compare_figures import ARTICLE_FIELDS, LAB_FIELDS, RANKED
from labctl.render.compare_text import (
    CAPACITY_HEADER,
    LEGEND,
    MARK_WIDE,
    capacity_rows,
    figure,
    heading,
    published_rows,
    runs_of,
)
from labctl.render.table import markdown_table


def ranking_rows(record: CompareRecord) -> list[list[str]]:
    """A row per place: the RPS ranking beside the tasks/s ranking."""
    marks = record.rounds.not_within()
    columns = [
        [
            [str(e.rank), e.queue + (MARK_WIDE if key == "rps" and e.queue in marks else ""), stats.text(e.estimate)]
            for e in record.ranking.get(key) or []
        ]
        for _, key in RANKED
    ]
    return [list(chain.from_iterable(place)) for place in zip_longest(*columns, fillvalue=["", "", ""])]


RANKING_HEADER = ("rank", "queue", "RPS [95 % CI] (n)", "rank", "queue", "tasks/s [95 % CI] (n)")


def markdown(record: CompareRecord) -> str:
    """The comparison's tables for an issue or a README: the ranking, the article's figures, the lab's."""
    lines = [
        f"make compare {record.run}: {heading(record)}.",
        "",
        LEGEND,
        "",
        markdown_table(RANKING_HEADER, ranking_rows(record), {"queue"}),
    ]
    if marks := record.rounds.not_within():
        lines += ["", f"{MARK_WIDE} RPS interval wider than the target: " + ", ".join(sorted(marks))]
    article_names = [name for name, _ in ARTICLE_FIELDS]
    article = [
        [q, str(runs_of(record, q)), *(figure(record, q, key) for _, key in ARTICLE_FIELDS)] for q in record.queues
    ]
    lab = [[q, *(figure(record, q, key) for _, key in LAB_FIELDS)] for q in record.queues]
    lines += [
        "",
        "The published experiment's figures (median [95 % CI] over the runs; ~ projected: the queue drained slower "
        "than its API enqueued, its time to run every task projected from the rate it held while watched):",
        "",
        markdown_table(["queue", "n", *article_names], article, {"queue"}),
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
        lines += [
            "",
            f"The published experiment at {published.setting} ({src.publisher}, {src.url}; "
            "another machine, its own versions):",
            "",
            markdown_table(["queue", *article_names], published_rows(published), {"queue"}),
        ]
    if record.capacity:
        lines += ["", "The rate each queue sustains (its latest make capacity):", ""]
        lines.append(markdown_table(CAPACITY_HEADER, capacity_rows(record), {"queue"}))
    return "\n".join(lines)
