"""The bench's paired drain is a length, not a count: a backlog too short for
the windows it plans is topped up, the same on both sides (labctl/experiments/bench/paired_windows.py)."""

from labctl.experiments.bench.paired_windows import PairedDrain, Side


def drain(bare_left: int, lab_left: int, rate: float, calls: list[int]) -> PairedDrain:
    def top_up(n: int) -> dict[str, int]:
        calls.append(n)
        return {"bare": n, "lab": n - 1}  # what each API really accepted

    sides = [
        Side(name, target=left + 100, start=lambda: None, containers=list)
        for name, left in (("bare", bare_left), ("lab", lab_left))
    ]
    for side in sides:
        side.done, side.rate = 100, rate
    return PairedDrain(
        None, *sides, cpu_seconds=lambda _: 0.0, sides=lambda i: ("bare", "lab"), say=lambda _: None, top_up=top_up
    )


def test_a_short_backlog_is_topped_up_on_both_sides_by_what_the_shorter_lacks():
    calls: list[int] = []
    paired = drain(bare_left=500, lab_left=300, rate=100.0, calls=calls)
    paired.fill(pairs=4, length=1.0)
    # 1.5 x 100 tasks/s x 1 s x (4 + 1.5) windows = 825 tasks; the lab side holds 300.
    assert calls == [525]
    assert paired.topped_up == {"bare": 525, "lab": 524}
    assert (paired.sides["bare"].target, paired.sides["lab"].target) == (100 + 500 + 525, 100 + 300 + 524)
    assert all(paired.lasts(side, 1.0) for side in paired.sides.values())


def test_a_backlog_that_lasts_is_left_alone():
    calls: list[int] = []
    paired = drain(bare_left=5000, lab_left=5000, rate=100.0, calls=calls)
    paired.fill(pairs=4, length=1.0)
    assert calls == [] and paired.topped_up == {}
