"""How sure a figure is, in one place: every experiment's figures (make compare,
bench, claims, scale) are a median with its 95 % confidence interval and n, and
two figures differ only when the interval of their ratio excludes 1.

The model: a run's figure is the true one times a factor of noise (a limited
container gets a share of time, and the machine's speed under it drifts), so the
log of a figure varies about the log of its median. On that scale:

- a figure's interval is Student's t interval of its mean log, which is the
  log of the median of the distribution it is drawn from (`estimate`);
- the ratio of two independent figures is Welch's t interval of the
  difference of their mean logs (`ratio`), with the Welch-Satterthwaite degrees
  of freedom; of paired figures (a round of a bench: the lab's run and the bare
  one's), the t interval of the mean log of their per-pair ratios (`paired_ratio`);
- how fast a series grew (a backlog over a step of make capacity): the t interval
  of its least-squares slope (`slope_interval`);
- figures that may be 0 (errors, lost tasks) are taken as they are, on a linear
  scale: the same t intervals of their mean.

Why not an interval without a model (the median's order statistics, as
benchstat gives): it needs 6 runs before a 95 % interval exists at all, and
half again as many runs as the t interval on logs to narrow as far at the
noise a run carries here (docs/statistics.md). With few runs the t interval
is as wide as it should be (n = 2: the t quantile is 12.7), never narrower
than the runs allow.

The t quantiles are scipy's. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats as _scipy

LEVEL = 0.95
# A difference between two figures is called only when the interval of their ratio excludes 1.
FASTER, SLOWER, NO_DIFFERENCE, TOO_FEW = "faster", "slower", "no difference shown", "too few runs"


def _clean(values: Iterable[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def t_quantile(df: float, level: float = LEVEL) -> float:
    """The two-sided t quantile for `level` with `df` degrees of freedom."""
    return float(_scipy.t.ppf(0.5 + level / 2, df))


@dataclass(frozen=True)
class Interval:
    """A t interval of a mean: its centre, bounds, the degrees of freedom."""

    mean: float
    low: float
    high: float
    df: float


def mean_interval(xs: Sequence[float], level: float = LEVEL) -> Interval | None:
    """Student's t interval of the mean of `xs` (at least two values)."""
    if len(xs) < 2:
        return None
    mean, sd = statistics.fmean(xs), statistics.stdev(xs)
    half = t_quantile(len(xs) - 1, level) * sd / math.sqrt(len(xs))
    return Interval(mean, mean - half, mean + half, len(xs) - 1)


def welch_interval(xs: Sequence[float], ys: Sequence[float], level: float = LEVEL) -> Interval | None:
    """Welch's t interval of mean(xs) - mean(ys) (each at least two values), with the
    Welch-Satterthwaite degrees of freedom. Both samples constant: the difference itself."""
    if len(xs) < 2 or len(ys) < 2:
        return None
    vx, vy = statistics.variance(xs) / len(xs), statistics.variance(ys) / len(ys)
    diff = statistics.fmean(xs) - statistics.fmean(ys)
    if vx + vy == 0:
        return Interval(diff, diff, diff, math.inf)
    df = (vx + vy) ** 2 / (vx**2 / (len(xs) - 1) + vy**2 / (len(ys) - 1))
    half = t_quantile(df, level) * math.sqrt(vx + vy)
    return Interval(diff, diff - half, diff + half, df)


def slope_interval(xs: Sequence[float], ys: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The t interval of the least-squares slope of ys on xs (scipy's linregress; at
    least three points): how fast a series grew, and how sure that is."""
    if len(xs) < 3 or len(set(xs)) < 2:
        return None
    fit = _scipy.linregress(xs, ys)
    # A series on a straight line (a queue that stayed empty) has no spread: its slope is exact.
    half = t_quantile(len(xs) - 2, level) * fit.stderr if math.isfinite(fit.stderr) else 0.0
    return Interval(float(fit.slope), float(fit.slope - half), float(fit.slope + half), len(xs) - 2)


# -- One figure ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """A figure over runs: the median of the runs, its 95 % interval and n. No
    interval for one run; `log` says which scale the interval was taken on."""

    median: float | None
    low: float | None
    high: float | None
    n: int
    log: bool = True

    @property
    def half_width_pct(self) -> float | None:
        """How far the interval reaches from the median, in % of it (the wider side)."""
        if self.median is None or self.low is None or self.high is None or self.median <= 0:
            return None
        return 100 * max(self.high - self.median, self.median - self.low) / self.median

    def within(self, pct: float) -> bool:
        """The interval lies within +-pct % of the median."""
        half = self.half_width_pct
        return half is not None and half <= pct

    def as_json(self) -> dict[str, Any]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


NONE = Estimate(None, None, None, 0)


def estimate(values: Iterable[float | int | None], level: float = LEVEL) -> Estimate:
    """The median of the runs' figures and its interval: on logs when every figure is
    above 0 (the interval of the median of a log-normal), else on the figures themselves."""
    xs = _clean(values)
    if not xs:
        return NONE
    median = statistics.median(xs)
    log = all(x > 0 for x in xs)
    interval = mean_interval([math.log(x) for x in xs] if log else xs, level)
    if interval is None:
        return Estimate(median, None, None, len(xs), log)
    low, high = (math.exp(interval.low), math.exp(interval.high)) if log else (interval.low, interval.high)
    if not log and min(xs) >= 0:
        low = max(low, 0.0)  # counts and shares: never below 0
    # The centre of the interval is the geometric mean; the median the runs gave can
    # lie just outside it only when the runs are very skewed: the interval then reaches it.
    return Estimate(median, min(low, median), max(high, median), len(xs), log)


def from_json(data: Mapping[str, Any] | None) -> Estimate:
    if not data:
        return NONE
    return Estimate(data.get("median"), data.get("low"), data.get("high"), int(data.get("n") or 0))


# -- Two figures ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ratio:
    """a / b: the ratio of the medians, its 95 % interval, and what it shows."""

    value: float | None
    low: float | None
    high: float | None
    n_a: int
    n_b: int

    @property
    def verdict(self) -> str:
        """`faster`: a is higher (the interval lies above 1); `slower`: below;
        `no difference shown`: the interval holds 1; `too few runs`: no interval."""
        if self.low is None or self.high is None:
            return TOO_FEW
        if self.low > 1:
            return FASTER
        if self.high < 1:
            return SLOWER
        return NO_DIFFERENCE

    @property
    def differs(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def straddles(self, threshold: float) -> bool:
        """The interval holds `threshold`: the figure may be on either side of it."""
        return self.low is not None and self.high is not None and self.low <= threshold <= self.high

    def as_json(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "n_a": self.n_a, "n_b": self.n_b}


def ratio(a: Iterable[float | int | None], b: Iterable[float | int | None], level: float = LEVEL) -> Ratio:
    """a / b for independent runs (two queues): the ratio of their medians, and Welch's
    interval of the ratio on logs. Figures of 0 or less have no ratio."""
    xs, ys = _clean(a), _clean(b)
    if not xs or not ys or min(xs) <= 0 or min(ys) <= 0:
        return Ratio(None, None, None, len(xs), len(ys))
    value = statistics.median(xs) / statistics.median(ys)
    interval = welch_interval([math.log(x) for x in xs], [math.log(y) for y in ys], level)
    if interval is None:
        return Ratio(value, None, None, len(xs), len(ys))
    low, high = math.exp(interval.low), math.exp(interval.high)
    return Ratio(value, min(low, value), max(high, value), len(xs), len(ys))


def paired_ratio(pairs: Iterable[tuple[float | None, float | None]], level: float = LEVEL) -> Ratio:
    """a / b for runs in pairs (a bench's round: the lab and the bare app side by side):
    the median of the per-pair ratios and the t interval of their mean log."""
    rs = [a / b for a, b in pairs if a is not None and b is not None and a > 0 and b > 0]
    if not rs:
        return Ratio(None, None, None, 0, 0)
    est = estimate(rs, level)
    return Ratio(est.median, est.low, est.high, len(rs), len(rs))


# -- Many figures: a ranking with its ties -------------------------------------------------
@dataclass(frozen=True)
class Ranked:
    name: str
    rank: int  # 1 + the number of others shown higher (lower, for lower_is_better)
    estimate: Estimate
    above: tuple[str, ...]  # the others shown higher than this one


def ranking(runs: Mapping[str, Iterable[float | int | None]], lower_is_better: bool = False) -> list[Ranked]:
    """Each name's rank: 1 + the number of others whose ratio to it is shown to be better
    (its interval excludes 1), those others listed best first. Names no run tells apart
    share a rank; sorted by rank, then by median."""
    values = {name: _clean(v) for name, v in runs.items()}
    sign, better = (1, SLOWER) if lower_is_better else (-1, FASTER)
    rows = []
    for name, xs in values.items():
        above = [other for other, ys in values.items() if other != name and ratio(ys, xs).verdict == better]
        above.sort(key=lambda other: sign * statistics.median(values[other]))  # the best first
        rows.append(Ranked(name, 1 + len(above), estimate(xs), tuple(above)))
    return sorted(rows, key=lambda r: (r.rank, sign * (r.estimate.median or 0.0), r.name))


def pairs_called(runs: Mapping[str, Iterable[float | int | None]]) -> dict[tuple[str, str], str]:
    """Every ordered pair (a, b) whose ratio a / b is shown above 1: `faster`, and b, a `slower`."""
    values = {name: _clean(v) for name, v in runs.items()}
    verdicts = {(a, b): ratio(xs, ys).verdict for a, xs in values.items() for b, ys in values.items() if a != b}
    return {pair: verdict for pair, verdict in verdicts.items() if verdict in (FASTER, SLOWER)}


# -- As the pages print them ---------------------------------------------------------------
def num(x: float | None) -> str:
    """A figure as the tables print it: three significant digits or so, `-` for none."""
    if x is None:
        return "-"
    x = float(x)
    if abs(x) >= 100 or (x == int(x) and abs(x) >= 10):
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}".rstrip("0").rstrip(".") if x else "0"


def text(est: Estimate, show_n: bool = True) -> str:
    """`412 [398–430] (n=5)`; `412 (n=1)` without an interval, or where every run gave the
    same figure; `-` for no figure."""
    if est.median is None:
        return "-"
    interval = ""
    if est.low is not None and est.high is not None and not num(est.low) == num(est.high) == num(est.median):
        interval = f" [{num(est.low)}–{num(est.high)}]"
    return f"{num(est.median)}{interval}" + (f" (n={est.n})" if show_n else "")


def ratio_text(r: Ratio) -> str:
    """`1.12 [1.04–1.21]`; the ratio alone without an interval."""
    if r.value is None:
        return "-"
    if r.low is None or r.high is None:
        return f"{r.value:.2f}"
    return f"{r.value:.2f} [{r.low:.2f}–{r.high:.2f}]"
