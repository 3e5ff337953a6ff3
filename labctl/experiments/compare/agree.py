"""`make compare-agree a=compare-<time> b=compare-<time>`: two comparisons of the same
queues side by side, as a check that the lab gives the same answer twice: each queue's
median RPS in both and how far apart they are, the rankings, and every ordered pair of
queues one calls different (the interval of their ratio excludes 1) that the other calls
the other way round. The two disagree on a queue only where its medians are more than
`within_pct` % apart and the interval of their ratio (second / first, Welch's on logs)
excludes 1: a gap the runs' own spread cannot explain; a gap inside the spread asks for
more rounds, not for another answer. Exit 0 when no queue disagrees and no pair is called
both ways; 1 otherwise."""

from __future__ import annotations

from pathlib import Path

from labctl.errors import EXIT_FAILED, EXIT_OK, LabError
from labctl.records.compare import CompareRecord
from labctl.records.compare_agreement import agreement
from labctl.records.store import Store
from labctl.render import agreement_table
from labctl.render.console import Console

WITHIN_PCT = 10.0


def comparison(store: Store, name: str) -> CompareRecord:
    found = [c for c in store.comparisons() if c.run == name]
    if not found:
        raise LabError(f"no comparison {name} in {store.directory}/ (make results full=1 lists them)")
    return found[0]


def agree(directory: Path, a: str, b: str, ui: Console, within_pct: float = WITHIN_PCT) -> int:
    store = Store(directory)
    first, second = comparison(store, a), comparison(store, b)
    result = agreement(first, second, within_pct)
    ui.say(agreement_table.agreement_markdown(first, second, result, within_pct))
    return EXIT_OK if result.agreed else EXIT_FAILED
