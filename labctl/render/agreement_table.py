"""Two comparisons side by side (`make compare-agree`): each queue's median RPS in
both, how far apart, the shift with its interval, its rank in each, and the pairs
called both ways, as markdown. A pure function, no I/O.
"""

from __future__ import annotations

from labctl import stats
from labctl.records.compare import CompareRecord
from labctl.records.compare_agreement import Agreement
from labctl.render.compare_text import num
from labctl.render.table import markdown_table


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
