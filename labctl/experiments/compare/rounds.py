"""The rounds of a comparison: which queues run in each, and in what order.

Every queue runs in each of the first `rounds` rounds; after those, a round holds
only the queues whose RPS interval (labctl/stats.py) is still wider than
+-target_pct % of their median, until none is, `max_rounds` is reached, or the
next round would end past the time budget (a round is then cut to the widest
intervals that fit). Within a round the queues run in an order drawn from one
seeded generator: the seed and every round's order go in the record, and
`seed=N` repeats them. A fixed order would put the same queue first after every
wait and every drain, and give the machine's slow drifts to the same queues."""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labctl import stats
from labctl.records.compare import AT_CAP, OUT_OF_TIME, WITHIN


@dataclass
class Rounds:
    queues: list[str]
    seed: int
    rounds: int
    max_rounds: int
    target_pct: float
    budget_s: float
    orders: list[list[str]] = field(default_factory=list)
    stopped: dict[str, str] = field(default_factory=dict)  # queue -> WITHIN, AT_CAP or OUT_OF_TIME

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def next(
        self, rps: Mapping[str, Sequence[float]], run_s: Mapping[str, Sequence[float]], elapsed_s: float
    ) -> list[str]:
        """The next round's queues in their order, given each queue's RPS so far, the seconds
        its runs took and the comparison's time so far; [] when the comparison is done."""
        number = len(self.orders) + 1
        if number <= self.rounds:
            order = list(self.queues)
        else:
            order = self._in_budget(self._wide(rps, number), rps, run_s, elapsed_s)
        if order:
            self._rng.shuffle(order)
            self.orders.append(order)
        return order

    def _wide(self, rps: Mapping[str, Sequence[float]], number: int) -> list[str]:
        wide = []
        for queue in self.queues:
            if queue in self.stopped:
                continue
            if stats.estimate(rps.get(queue, ())).within(self.target_pct):
                self.stopped[queue] = WITHIN
            elif number > self.max_rounds:
                self.stopped[queue] = AT_CAP
            else:
                wide.append(queue)
        return wide

    def _in_budget(
        self,
        wide: list[str],
        rps: Mapping[str, Sequence[float]],
        run_s: Mapping[str, Sequence[float]],
        elapsed_s: float,
    ) -> list[str]:
        """The widest intervals first, as many as fit before the budget ends."""

        def width(queue: str) -> float:
            return stats.estimate(rps.get(queue, ())).half_width_pct or float("inf")

        left = self.budget_s - elapsed_s
        fits = []
        for queue in sorted(wide, key=width, reverse=True):
            cost = statistics.fmean(run_s[queue]) if run_s.get(queue) else 0.0
            if cost <= left:
                fits.append(queue)
                left -= cost
            else:
                self.stopped[queue] = OUT_OF_TIME
        return fits

    def why_not_within(self) -> dict[str, str]:
        """The queues whose interval did not reach +-target_pct %, and why they stopped."""
        return {q: why for q, why in self.stopped.items() if why != WITHIN}

    def as_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "rounds": self.rounds,
            "max_rounds": self.max_rounds,
            "target_pct": self.target_pct,
            "budget_s": self.budget_s,
            "orders": self.orders,
            "stopped": self.stopped,
        }
