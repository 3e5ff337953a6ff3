"""make compare's rounds (labctl/experiments/compare/rounds.py): every queue in the first
rounds, then only those whose RPS interval is still wide, in a seeded random order, up to
the cap or the time budget."""

from labctl.experiments.compare.rounds import Rounds
from labctl.records.compare import AT_CAP, OUT_OF_TIME, WITHIN

QUEUES = ["a", "b", "c", "d"]


def rounds(**kw) -> Rounds:
    return Rounds(**{"queues": QUEUES, "seed": 7, "rounds": 3, "max_rounds": 5, "target_pct": 5.0,
                     "budget_s": 3600.0, **kw})  # fmt: skip


def drive(plan: Rounds, figures: dict[str, list[float]], run_s: float = 30.0) -> list[list[str]]:
    """Every round the plan asks for, each queue's runs giving its next figure."""
    rps: dict[str, list[float]] = {q: [] for q in QUEUES}
    took: dict[str, list[float]] = {q: [] for q in QUEUES}
    elapsed = 0.0
    while order := plan.next(rps, took, elapsed):
        for q in order:
            rps[q].append(figures[q][len(rps[q]) % len(figures[q])])
            took[q].append(run_s)
            elapsed += run_s
    return plan.orders


def test_the_same_seed_gives_the_same_orders_and_every_round_is_shuffled():
    figures = {q: [100.0, 110.0, 90.0] for q in QUEUES}
    first, again = drive(rounds(), figures), drive(rounds(), figures)
    assert first == again
    assert all(sorted(order) == QUEUES for order in first[:3])  # the first rounds: every queue
    assert len({tuple(order) for order in first}) > 1  # not one fixed order
    assert drive(rounds(seed=8), figures) != first


def test_after_the_first_rounds_only_the_wide_intervals_run_again():
    steady = [100.0, 100.5, 99.5]  # within the target after three runs
    noisy = [100.0, 120.0, 85.0]
    orders = drive(rounds(), {"a": steady, "b": noisy, "c": steady, "d": noisy})
    assert [sorted(o) for o in orders[3:]] == [["b", "d"], ["b", "d"]]  # up to max_rounds = 5
    plan = rounds()
    drive(plan, {"a": steady, "b": noisy, "c": steady, "d": noisy})
    assert plan.stopped == {"a": WITHIN, "c": WITHIN, "b": AT_CAP, "d": AT_CAP}
    assert plan.why_not_within() == {"b": AT_CAP, "d": AT_CAP}


def test_no_round_beyond_the_first_starts_past_the_budget():
    noisy = [100.0, 120.0, 85.0]
    # Four queues, 30 s a run: the first three rounds take 360 s whatever the budget; 30 s more
    # leaves room for one run, given to the widest interval.
    plan = rounds(budget_s=390.0)
    orders = drive(plan, {"a": [100.0, 101.0, 99.0], "b": noisy, "c": [100.0, 140.0, 70.0], "d": noisy})
    assert len(orders) == 4 and orders[3] == ["c"]
    assert plan.stopped["b"] == plan.stopped["d"] == OUT_OF_TIME and plan.stopped["a"] == WITHIN
