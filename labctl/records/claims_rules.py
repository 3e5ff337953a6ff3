"""The rules that decide make claims' verdicts, one function per rule, named as
docs/claims.md names them ("The rules"). Each reads the 95 % interval of a
ratio (labctl/stats.py: Welch's interval on logs of one queue's runs over
another's, or a figure's own interval over its published value) against a band
on that ratio, and answers the same way:

holds          the interval lies inside the band;
fails          it lies wholly outside;
not decided    it straddles an edge of the band.

`magnitude` and `much` split an interval wholly outside their band in two: it
is `direction only` where it still lies wholly on the claimed side of 1 (the
order the author published holds, the size does not), `fails` where it does
not. `slightly` names an interval wholly above its band `faster than claimed`.
An interval needs two runs on each side: with fewer the answer is `too few runs`.

The bands were fixed before the full run they decide, and are not to be moved
after seeing one: a band moved to fit a run decides nothing. Pure functions."""

from __future__ import annotations

from collections.abc import Iterable

from labctl.stats import Ratio

# Published figures are other machines' (other cores, OS, library versions): a ratio between two
# queues on one job is read as the same claim within this factor of it, either way (on logs).
BAND = 1.5
PARITY = (1 / BAND, BAND)  # "on par": neither is faster by more than the machines' factor
SLIGHTLY = (1.0, BAND)  # "slightly faster": faster, by less than the machines' factor
MUCH = 2.0  # "much faster": at least twice as fast
ABSOLUTE = (0.9, 1.1)  # a sleep-bound figure against its published value: within a tenth

HOLDS = "holds"
FAILS = "fails"
NOT_DECIDED = "not decided"
DIRECTION_ONLY = "direction only"
FASTER_THAN_CLAIMED = "faster than claimed"
TOO_FEW = "too few runs"
NO_DATA = "no data"
# A quick run (N x 0.1, one repetition) checks that every benchmark runs and counts; it decides no claim.
SMOKE = "smoke test: not decided"

INSIDE, OUTSIDE, STRADDLES = "inside", "outside", "straddles"


def place(r: Ratio, low: float, high: float) -> str:
    """Where the interval lies against the band [low, high]: inside it, wholly outside, or across an edge."""
    assert r.low is not None and r.high is not None
    if low <= r.low and r.high <= high:
        return INSIDE
    if r.high < low or r.low > high:
        return OUTSIDE
    return STRADDLES


def _missing(r: Ratio) -> str:
    """The answer where the ratio cannot be read: no figure at all, or no interval."""
    if r.value is None:
        return NO_DATA
    if r.low is None or r.high is None:
        return TOO_FEW
    return ""


def magnitude(r: Ratio, published: float) -> str:
    """A published ratio R: the band is [R / 1.5, 1.5 R]. Wholly outside it, the interval shows the
    published direction (wholly above 1 for R > 1, below for R < 1): `direction only`; else `fails`."""
    if missing := _missing(r):
        return missing
    where = place(r, published / BAND, published * BAND)
    if where == INSIDE:
        return HOLDS
    if where == STRADDLES:
        return NOT_DECIDED
    assert r.low is not None and r.high is not None
    shown = (published > 1 and r.low > 1) or (published < 1 and r.high < 1)
    return DIRECTION_ONLY if shown else FAILS


def parity(r: Ratio) -> str:
    """On par: the band is [1 / 1.5, 1.5] around 1."""
    if missing := _missing(r):
        return missing
    return {INSIDE: HOLDS, OUTSIDE: FAILS, STRADDLES: NOT_DECIDED}[place(r, *PARITY)]


def slightly(r: Ratio) -> str:
    """Slightly faster (a ratio of rates): the band is (1, 1.5], 1 itself left out (faster is claimed).
    Wholly above 1.5: `faster than claimed`; wholly below 1: `fails`; across 1 or 1.5: not decided."""
    if missing := _missing(r):
        return missing
    assert r.low is not None and r.high is not None
    low, high = SLIGHTLY
    if r.low > low and r.high <= high:
        return HOLDS
    if r.low > high:
        return FASTER_THAN_CLAIMED
    if r.high < low:
        return FAILS
    return NOT_DECIDED


def much(r: Ratio) -> str:
    """Much faster (a ratio of rates): the band is [2, inf). Wholly below 2, the interval may still
    lie above 1: `direction only`; else `fails`."""
    if missing := _missing(r):
        return missing
    assert r.low is not None and r.high is not None
    if r.low >= MUCH:
        return HOLDS
    if r.high >= MUCH:
        return NOT_DECIDED
    return DIRECTION_ONLY if r.low > 1 else FAILS


def absolute(r: Ratio) -> str:
    """A figure no machine moves much (a rate bound by its sleeps), here over published: the band is [0.9, 1.1]."""
    if missing := _missing(r):
        return missing
    return {INSIDE: HOLDS, OUTSIDE: FAILS, STRADDLES: NOT_DECIDED}[place(r, *ABSOLUTE)]


def event(statuses: Iterable[str]) -> str:
    """A run the author saw fail: `holds` where every run of it failed here too, `fails` where every
    one finished, `not decided` where some did and some did not. No interval: a run ends or it does not."""
    seen = list(statuses)
    if not seen:
        return NO_DATA
    failed = [s for s in seen if s != "ok"]
    if len(failed) == len(seen):
        return HOLDS
    return FAILS if not failed else NOT_DECIDED


def decide(rule: str, published: float | None, r: Ratio) -> str:
    """The verdict of a claim decided on a ratio (every rule but `event`)."""
    if rule == "magnitude":
        assert published, "a magnitude claim has a published ratio"
        return magnitude(r, published)
    on_ratio = {"parity": parity, "slightly": slightly, "much": much, "absolute": absolute}
    if rule not in on_ratio:
        raise ValueError(f"unknown rule {rule}")
    return on_ratio[rule](r)


RULES = ("magnitude", "parity", "slightly", "much", "absolute", "event")
