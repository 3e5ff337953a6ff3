"""Two comparisons of the same queues side by side (`make compare-agree`): each
queue's median in both, the shift between them with its interval, and the pairs
one calls different that the other calls the other way round."""

from __future__ import annotations

from dataclasses import dataclass

from labctl import stats
from labctl.records.compare import CompareRecord
from labctl.records.compare_figures import values_by_queue


@dataclass(frozen=True)
class Agreement:
    """Two comparisons of the same queues side by side (agreement())."""

    medians: dict[str, tuple[float | None, float | None]]  # queue -> its median in each
    diff_pct: dict[str, float]  # how far apart the two medians are
    shifts: dict[str, stats.Ratio]  # second / first, with its interval
    far: list[str]  # more than within_pct % apart
    disagreeing: list[str]  # of those, by a shift the runs show
    called: tuple[int, int]  # pairs each calls different
    flipped: list[str]  # pairs one calls different that the other calls the other way round

    @property
    def largest_diff_pct(self) -> float | None:
        return max(self.diff_pct.values(), default=None)

    @property
    def agreed(self) -> bool:
        return bool(self.medians) and not self.flipped and not self.disagreeing


def agreement(a: CompareRecord, b: CompareRecord, within_pct: float, key: str = "rps") -> Agreement:
    """Two comparisons of the same queues set side by side: each queue's median in both,
    how far apart they are, the ratio second / first with its interval (a shift between
    the two shown only where it excludes 1), the largest difference, the queues more than
    `within_pct` % apart (`far`) and those of them apart by a shift the runs show
    (`disagreeing`), and the ordered pairs one calls different (stats.pairs_called) that
    the other calls the other way round."""
    medians = {q: (a.figure(q, key).median, b.figure(q, key).median) for q in a.queues if q in b.queues}
    diffs = {q: abs(x / y - 1) * 100 for q, (x, y) in medians.items() if x and y}
    runs_a, runs_b = values_by_queue(a.runs, key), values_by_queue(b.runs, key)
    shifts = {q: stats.ratio(runs_b.get(q, []), runs_a.get(q, [])) for q in medians}
    far = [q for q, pct in diffs.items() if pct > within_pct]
    called_a = stats.pairs_called(runs_a)
    called_b = stats.pairs_called(runs_b)
    flipped = sorted(
        f"{x} {verdict} than {y}" for (x, y), verdict in called_a.items() if called_b.get((x, y)) not in (None, verdict)
    )
    return Agreement(
        medians=medians,
        diff_pct=diffs,
        shifts=shifts,
        far=far,
        disagreeing=[q for q in far if shifts[q].differs],
        called=(len(called_a) // 2, len(called_b) // 2),
        flipped=flipped,
    )
