"""make bench's ratios against the budget (labctl/records/bench.py): the median
of the pairs' ratios (a round's two drives, a drain's two windows side by side),
its interval and n, each rounded down; `unsure` where the interval holds the
budget; derived again from the pairs' figures whenever a record is read, and an
older record without them read as having no interval. Pure functions."""

import math
import statistics

from labctl import stats
from labctl.records import bench as B
from labctl.records.store import Store
from labctl.render import bench_table


def row(bare_rounds, lab_rounds, bare_windows=None, lab_windows=None, queue="huey") -> B.BenchRow:
    """A queue's row as make bench writes it: each round's RPS, each window's tasks and CPU."""

    def side(rounds):
        return {"rps": round(statistics.fmean(rounds), 1), "rps_rounds": rounds} if rounds else {"rps": 100.0}

    def drain(windows):
        tasks, seconds = sum(n for n, _ in windows), len(windows) * 1.0
        return {
            "windows": [{"tasks": n, "s": 1.0, "cpu_s": cpu} for n, cpu in windows],
            "rate": round(tasks / seconds, 1),
            "rate_rounds": [float(n) for n, _ in windows],
            "cpu_us_per_task": round(sum(c for _, c in windows) / tasks * 1e6),
        }

    out = {"queue": queue, "worker_limits": {"cpus": 0.2}, "bare": side(bare_rounds), "lab": side(lab_rounds)}
    if bare_windows and lab_windows:
        out["bare_drain"], out["lab_drain"] = drain(bare_windows), drain(lab_windows)
    return B.BenchRow.model_validate(out)


def record(*rows) -> B.BenchRecord:
    return B.BenchRecord.model_validate(
        {"schema": B.SCHEMA, "run": "bench-t", "mode": "await", "api_limits": {"cpus": 0.2}, "rows": list(rows)}
    )


BARE = [500.0, 520.0, 480.0, 510.0, 495.0, 505.0, 515.0, 490.0]
CLEAR = [470.0, 489.0, 446.0, 484.0, 460.0, 475.0, 489.0, 461.0]  # 0.929 to 0.95
ACROSS = [440.0, 520.0, 420.0, 475.0, 470.0, 440.0, 500.0, 450.0]  # 0.88 to 1.00


def test_a_ratio_is_the_median_of_its_pairs_with_the_interval_stats_gives_rounded_down():
    clear = row(BARE, CLEAR)
    r = B.rps_ratio(clear.bare, clear.lab)
    pairs = stats.paired_ratio(zip(CLEAR, BARE))
    assert r.n == 8 and r.has_interval and not r.unsure and r.meets
    assert r.value == math.floor(statistics.median(lab / bare for lab, bare in zip(CLEAR, BARE)) * 100) / 100
    assert pairs.low is not None and pairs.high is not None
    assert (r.low, r.high) == (math.floor(pairs.low * 100) / 100, math.floor(pairs.high * 100) / 100)
    assert B.BUDGET_RATIO < pairs.low  # the whole interval within the budget


def test_an_interval_that_holds_the_budget_is_unsure_whichever_side_its_median_is():
    across_row, below_row = row(BARE, ACROSS), row(BARE, [x * 0.96 for x in ACROSS])
    across = B.rps_ratio(across_row.bare, across_row.lab)
    assert across.low is not None and across.high is not None
    assert across.unsure and across.low < B.BUDGET_RATIO <= across.high and across.meets
    below = B.rps_ratio(below_row.bare, below_row.lab)
    assert below.unsure and not below.meets
    cells = {
        cells[0]: cells[5]
        for cells in bench_table.rows_cells(
            record(
                row(BARE, CLEAR, queue="rq"),
                row(BARE, ACROSS, queue="huey"),
                row(BARE, [x * 0.96 for x in ACROSS], queue="saq"),
            )
        )
    }
    assert cells["rq"] == "0.94 [0.93–0.94] (n=8)"  # 0.9405 [0.9335–0.9462]
    assert cells["huey"].endswith(" (n=8) unsure") and "✗" not in cells["huey"]
    assert cells["saq"].startswith(f"{below.value:.2f} ✗ [") and cells["saq"].endswith(" (n=8) unsure")
    # The short table of make results says the same, and the legend says what unsure means.
    short = bench_table.short_table(record(row(BARE, ACROSS)))
    assert "(n=8) unsure" in short.splitlines()[2] and "unsure: the interval holds 0.9" in short


def test_the_drain_is_judged_window_pair_by_window_pair():
    bare = [(100, 0.2), (104, 0.2), (98, 0.2), (101, 0.2), (99, 0.2), (103, 0.2)]
    lab = [(95, 0.2), (96, 0.2), (93, 0.2), (97, 0.2), (94, 0.2), (95, 0.2)]
    r = B.row_ratios(row(BARE, CLEAR, bare, lab))
    assert set(r) == {"rps", "drain", "drain_cpu"}
    expected = stats.paired_ratio((lab_n, bare_n) for (bare_n, _), (lab_n, _) in zip(bare, lab))
    assert r["drain"].n == 6 and r["drain"].value == math.floor(expected.value * 100) / 100  # type: ignore[operator]
    # The CPU a task, bare ÷ lab: each side spent 0.2 s a window, the lab on fewer tasks.
    assert r["drain_cpu"].value == r["drain"].value and r["drain_cpu"].n == 6


def test_a_record_derives_its_intervals_again_from_the_pairs_it_keeps(tmp_path):
    bare = [(100, 0.2), (104, 0.2), (98, 0.2), (101, 0.2)]
    lab = [(95, 0.2), (80, 0.2), (93, 0.2), (99, 0.2)]
    written = row(BARE, ACROSS, bare, lab)
    # As make bench writes it: each row with its ratios as judged then.
    written.judged = {name: ratio.as_json() for name, ratio in B.row_ratios(written).items()}
    Store(tmp_path).save(record(written))
    [again] = Store(tmp_path).benches()
    [r] = again.rows
    judged = again.as_json()["rows"][0]["judged"]
    assert {name: ratio.as_json() for name, ratio in B.row_ratios(r).items()} == judged
    assert judged["rps"]["unsure"] and judged["drain"]["n"] == 4
    [short] = B.ratios(again)
    # make compare reads these: the existing keys, their figures the judged medians.
    assert (short.rps_ratio, short.drain_ratio) == (judged["rps"]["value"], judged["drain"]["value"])
    assert short.rps_ratio_interval == judged["rps"] and short.drain_ratio_interval == judged["drain"]


def test_an_older_record_reads_and_renders_without_an_interval():
    # No rounds recorded: the whole figures' ratio, rounded down, no interval.
    older = B.BenchRow.model_validate({"queue": "rq", "bare": {"rps": 1000.0}, "lab": {"rps": 899.0}})
    r = B.rps_ratio(older.bare, older.lab)
    assert (r.value, r.low, r.high, r.n, r.unsure, r.meets) == (0.89, None, None, 0, False, False)
    # One round: its own ratio, and still no interval.
    one = row([500.0], [470.0], queue="saq")
    assert B.rps_ratio(one.bare, one.lab) == B.BudgetRatio(0.94, None, None, 1, False)
    lines = bench_table.rows_cells(record(older, one))
    assert [cells[5] for cells in lines] == ["0.89 ✗ (no interval)", "0.94 (no interval)"]
    [short] = B.ratios(record(older))
    assert short.rps_ratio == 0.89 and short.drain_ratio is None
    assert short.rps_ratio_interval["n"] == 0 and short.rps_ratio_interval["low"] is None
