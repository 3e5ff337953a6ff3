"""labctl/stats.py against figures known from elsewhere: R's t.test on Student's
sleep data (its documented output), and intervals worked out by hand."""

import math

import pytest

from labctl import stats

# Student's sleep data (R's `sleep`): extra hours of sleep under two drugs, ten patients.
GROUP1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
GROUP2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_welch_interval_is_r_t_test_on_the_sleep_data():
    # R: t.test(extra ~ group, data = sleep): t = -1.8608, df = 17.776,
    # 95 percent confidence interval: -3.3654832 0.2054832; mean difference -1.58.
    interval = stats.welch_interval(GROUP1, GROUP2)
    assert interval is not None
    assert interval.mean == pytest.approx(-1.58)
    assert interval.df == pytest.approx(17.776, abs=5e-4)
    assert interval.low == pytest.approx(-3.3654832, abs=1e-6)
    assert interval.high == pytest.approx(0.2054832, abs=1e-6)


def test_mean_interval_is_r_paired_t_test_on_the_sleep_data():
    # R: t.test(extra ~ group, data = sleep, paired = TRUE): t = -4.0621, df = 9,
    # 95 percent confidence interval: -2.4598858 -0.7001142.
    interval = stats.mean_interval([a - b for a, b in zip(GROUP1, GROUP2)])
    assert interval is not None
    assert (interval.low, interval.high, interval.df) == pytest.approx((-2.4598858, -0.7001142, 9), abs=1e-6)


def test_an_estimate_is_the_median_and_the_t_interval_of_the_mean_log():
    # logs 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302653: exp(2 -+ 4.302653 / sqrt(3)).
    est = stats.estimate([math.e, math.e**2, math.e**3])
    half = 4.302653 / math.sqrt(3)
    assert est.median == pytest.approx(math.e**2)
    assert (est.low, est.high) == pytest.approx((math.exp(2 - half), math.exp(2 + half)), rel=1e-6)
    assert est.n == 3 and est.log


def test_a_figure_that_may_be_zero_is_taken_on_its_own_scale_and_never_below_zero():
    est = stats.estimate([0, 0, 3])  # mean 1, sd sqrt(3): 1 -+ 4.302653
    assert not est.log
    assert est.median == 0
    assert (est.low, est.high) == pytest.approx((0.0, 1 + 4.302653), rel=1e-6)
    est = stats.estimate([-1, 0, 3])  # a figure that can be negative keeps its lower bound
    assert est.low == pytest.approx(2 / 3 - 4.302653 * math.sqrt(13 / 3) / math.sqrt(3), rel=1e-6)
    assert stats.text(stats.estimate([0, 0, 0])) == "0 (n=3)"


def test_one_run_has_no_interval_and_none_has_no_figure():
    assert stats.estimate([412.0]) == stats.Estimate(412.0, None, None, 1)
    assert stats.estimate([None, float("nan")]).median is None
    assert stats.text(stats.estimate([412.0])) == "412 (n=1)"
    assert stats.text(stats.NONE) == "-"


def test_the_interval_narrows_as_runs_agree_and_more_come():
    noisy = stats.estimate([90, 110, 100])
    more = stats.estimate([90, 110, 100, 95, 105, 100, 98, 102])
    assert noisy.half_width_pct > more.half_width_pct
    assert not noisy.within(5)
    assert stats.estimate([100, 101, 99, 100, 100, 101]).within(5)


def test_a_ratio_is_welch_on_the_logs():
    a, b = [math.e**x for x in GROUP2], [math.e**x for x in GROUP1]
    r = stats.ratio(a, b)
    # The medians of the exponentiated groups: the means of their two middle values.
    assert r.value == pytest.approx((math.exp(1.6) + math.exp(1.9)) / (math.exp(0.0) + math.exp(0.7)))
    assert (r.low, r.high) == pytest.approx((math.exp(-0.2054832), math.exp(3.3654832)), abs=1e-6)
    assert r.verdict == stats.NO_DIFFERENCE  # R's interval holds 0: p = 0.079


def test_a_difference_is_called_only_when_the_interval_excludes_one():
    fast, slow = [110, 112, 109, 111], [100, 101, 99, 100]
    assert stats.ratio(fast, slow).verdict == stats.FASTER
    assert stats.ratio(slow, fast).verdict == stats.SLOWER
    assert stats.ratio([110, 90, 105], [100, 104, 96]).verdict == stats.NO_DIFFERENCE
    assert stats.ratio([110], [100, 101]).verdict == stats.TOO_FEW
    assert stats.ratio([0, 1], [1, 2]).value is None


def test_a_paired_ratio_is_the_t_interval_of_the_per_pair_log_ratios():
    lab, bare = [95, 190, 285], [100, 200, 300]  # 0.95 every round: no noise in the ratio
    r = stats.paired_ratio(zip(lab, bare))
    assert (r.value, r.low, r.high, r.n_a) == pytest.approx((0.95, 0.95, 0.95, 3))
    r = stats.paired_ratio([(0.9, 1), (1.0, 1), (0.95, 1)])
    assert r.straddles(0.9) and not r.straddles(1.1)


def test_a_ranking_groups_what_the_runs_cannot_tell_apart():
    runs = {
        "a": [200, 202, 198, 201],
        "b": [199, 204, 195, 200],  # a and b: no difference shown
        "c": [150, 151, 149, 150],
        "d": [100, 180, 120],  # too noisy to be told from b or c, but below a? no: a's interval is tight
    }
    ranked = {r.name: r for r in stats.ranking(runs)}
    assert ranked["a"].rank == ranked["b"].rank == 1
    assert ranked["c"].rank == 3 and ranked["c"].above == ("a", "b")  # the best first
    assert {r.name: r.above for r in stats.ranking(runs, lower_is_better=True)}["a"] == ("c",)
    backwards = dict(reversed(list(runs.items())))  # the order given does not decide the order shown
    assert {r.name: r.above for r in stats.ranking(backwards)}["c"] == ("a", "b")
    assert [r.name for r in stats.ranking(runs)][:2] == ["a", "b"]
    lower = {r.name: r.rank for r in stats.ranking(runs, lower_is_better=True)}
    assert lower["c"] == 1 and lower["a"] == lower["b"]


def test_pairs_called_are_the_ordered_differences():
    called = stats.pairs_called({"a": [200, 202, 198], "b": [100, 101, 99], "c": [199, 203, 197]})
    assert called == {
        ("a", "b"): stats.FASTER,
        ("b", "a"): stats.SLOWER,
        ("c", "b"): stats.FASTER,
        ("b", "c"): stats.SLOWER,
    }


def test_a_slopes_interval_holds_its_slope_and_is_exact_on_a_straight_line():
    xs = [float(i) for i in range(15)]
    noisy = stats.slope_interval(xs, [2.0 * x + (3 if i % 2 else 0) for i, x in enumerate(xs)])
    assert noisy is not None and noisy.low < 2.0 < noisy.high and noisy.df == 13
    assert stats.slope_interval(xs, [0.0] * 15) == stats.Interval(0.0, 0.0, 0.0, 13)  # an empty queue
    assert stats.slope_interval([1.0, 2.0], [1.0, 2.0]) is None  # two points: no interval
