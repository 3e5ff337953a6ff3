"""make claims' report read back, and its every figure and verdict checked
against the runs' own records: what a reader of the page sees must be what the
runs measured, decided by the rules as docs/claims.md states them.

The expected values are worked out here from the runs (the record's `runs`
list), never from the record's summaries (labctl/records/claims.py computes
those, the page shows them): which runs make a figure is chosen here, the
statistics are labctl/stats.py's (the project's one place for them, checked
against R in tests/unit/test_stats.py), and each verdict is decided again by
this module's own reading of the rules (`rule_verdict`, written from the doc's
table, not from claims_rules.py). Checked: each figure cell's median, interval
and n over the configuration's runs that ended ok and the published figure;
each claim's ratio, interval, n, scale and verdict, on the page and in the
markdown twin; each row of the lab path's table. Used by tests/unit/test_claims.py
(committed records of real runs) and tests/claims/test_claims_run.py (a fresh run)."""

from __future__ import annotations

from html.parser import HTMLParser

from labctl import stats
from labctl.records.claims_published import BENCHES, CLAIMS

# The rules' bands as docs/claims.md states them ("The rules").
BAND = 1.5
PARITY = (1 / 1.5, 1.5)
ABSOLUTE = (0.9, 1.1)
MUCH = 2.0
SMOKE = "smoke test: not decided"


class Cells(HTMLParser):
    """Every figure cell (td with data-figure), claim row (tr with data-claim) and lab path row of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[dict[str, str]] = []
        self.claims: list[dict[str, str]] = []
        self.lab: list[dict[str, str]] = []
        self.smoke = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        data = {k.removeprefix("data-"): v or "" for k, v in attrs if k.startswith("data-")}
        if tag == "td" and "figure" in data:
            self.figures.append(data)
        elif tag == "tr" and "claim" in data:
            self.claims.append(data)
        elif tag == "tr" and "shape" in data:
            self.lab.append(data)
        elif ("id", "smoke") in attrs:
            self.smoke = True


def read_page(text: str) -> Cells:
    cells = Cells()
    cells.feed(text)
    return cells


def _runs_of(runs: list[dict], bench: str, setup: str, column: str, queue: str) -> list[dict]:
    return [
        r
        for r in runs
        if r["bench"] == bench
        and r["setup"] == setup
        and r["queue"] == queue
        and (not column or str(r["params"].get("column", "")) == column)
    ]


def _ok_values(runs: list[dict], figure: str) -> list[float]:
    return [float(r["figures"][figure]) for r in runs if r["status"] == "ok" and r["figures"].get(figure) is not None]


def _close(shown: str | None, expected: float | None, where: str) -> None:
    if expected is None:
        assert not shown, f"{where}: the page shows {shown}, the runs give none"
        return
    assert shown, f"{where}: the page shows nothing, the runs give {expected}"
    assert abs(float(shown) - expected) <= 1e-6 * max(1.0, abs(expected)), (where, shown, expected)


# -- The rules, as docs/claims.md states them -----------------------------------------------------------
def rule_verdict(rule: str, published: float | None, value: float | None, low: float | None, high: float | None):
    """A claim's verdict from its ratio's interval, by the doc's table."""
    if value is None:
        return "no data"
    if low is None or high is None:
        return "too few runs"
    if rule in ("magnitude", "parity", "absolute"):
        band = {
            "magnitude": (published / BAND, published * BAND) if published else (0, 0),
            "parity": PARITY,
            "absolute": ABSOLUTE,
        }[rule]
        if band[0] <= low and high <= band[1]:
            return "holds"
        if low <= band[1] and high >= band[0]:
            return "not decided"
        if rule == "magnitude" and published and ((published > 1 and low > 1) or (published < 1 and high < 1)):
            return "direction only"
        return "fails"
    if rule == "slightly":
        if 1 < low and high <= BAND:
            return "holds"
        if low > BAND:
            return "faster than claimed"
        return "fails" if high < 1 else "not decided"
    if rule == "much":
        if low >= MUCH:
            return "holds"
        if high >= MUCH:
            return "not decided"
        return "direction only" if low > 1 else "fails"
    raise AssertionError(f"no rule {rule} in the doc")


def event_verdict(statuses: list[str]) -> str:
    if not statuses:
        return "no data"
    failed = [s for s in statuses if s != "ok"]
    return "holds" if len(failed) == len(statuses) else ("fails" if not failed else "not decided")


def expected_claim(record: dict, claim, setup: str) -> dict:
    """What the report should show for a claim in a setup: its ratio and interval, its verdict, its scale."""
    runs = record["runs"]
    num_runs = _runs_of(runs, claim.bench, setup, claim.column, claim.num)
    out: dict = {"ratio": None}
    if claim.rule == "event":
        out["rule_says"] = event_verdict([r["status"] for r in num_runs])
    else:
        num = _ok_values(num_runs, claim.figure)
        if claim.rule == "absolute":
            published = BENCHES[claim.bench].published[claim.num][claim.figure]
            est = stats.estimate(num)
            per = [None if x is None else x / published for x in (est.median, est.low, est.high)]
            out["ratio"] = (*per, est.n, None)
        else:
            den = _ok_values(_runs_of(runs, claim.bench, setup, claim.column, claim.den), claim.figure)
            r = stats.ratio(num, den)
            out["ratio"] = (r.value, r.low, r.high, r.n_a, r.n_b)
        value, low, high = out["ratio"][:3]
        out["rule_says"] = rule_verdict(claim.rule, claim.published, value, low, high)
    out["verdict"] = SMOKE if record["params"].get("quick") else out["rule_says"]
    out["scale"] = expected_scale(claim, num_runs)
    return out


def expected_scale(claim, num_runs: list[dict]) -> str:
    """N here against N published, and the worker processes where they differ (the doc's wording)."""
    if not num_runs:
        return ""
    n, published_n = min(r["n"] for r in num_runs), BENCHES[claim.bench].n
    params = num_runs[0]["params"]
    here = int(params.get("workers") or params.get("processes") or 1)
    there = int(claim.column[1:]) if claim.column else (BENCHES[claim.bench].workers or 1)
    parts = []
    if n < published_n:
        parts.append(f"N {n:,} here, {published_n:,} published")
    if here != there:
        parts.append(f"{here} worker process{'es' if here > 1 else ''} here, {there} published")
    return "; ".join(parts)


# -- The page and its markdown twin ------------------------------------------------------------------
def check_page(record: dict, page: str, markdown: str | None = None) -> int:
    """Assert every figure, claim and lab path row the page shows against the runs (and each claim's
    verdict in the markdown twin, when given); the number of cells and rows checked."""
    runs = record["runs"]
    cells = read_page(page)
    checked = 0
    configurations = {
        (r["bench"], r["setup"], str(r["params"].get("column", "")), r["queue"])
        for r in runs
        if r["bench"] != "lab_path"
    }
    shown = {(c["bench"], c["setup"], c["column"], c["queue"]) for c in cells.figures}
    assert shown == configurations, f"configurations on the page {shown ^ configurations} differ from the runs'"
    for cell in cells.figures:
        mine = _runs_of(runs, cell["bench"], cell["setup"], cell["column"], cell["queue"])
        est = stats.estimate(_ok_values(mine, cell["figure"]))
        where = f"{cell['bench']} {cell['setup']} {cell['column']} {cell['queue']} {cell['figure']}"
        assert int(cell.get("n") or 0) == est.n, where
        _close(cell.get("median"), est.median, where)
        _close(cell.get("low"), est.low, where)
        _close(cell.get("high"), est.high, where)
        _close(cell.get("published"), _published(cell), where)
        checked += 1

    expected_rows = {
        (c.id, setup) for c in CLAIMS for setup in ("unlimited", "limited") if _runs_of(runs, c.bench, setup, c.column, c.num)
    }  # fmt: skip
    assert {(row["claim"], row["setup"]) for row in cells.claims} == expected_rows
    assert cells.smoke == bool(record["params"].get("quick")), "a quick run's page says it is a smoke test"
    verdict_cells = _markdown_verdicts(markdown) if markdown is not None else {}
    for row in cells.claims:
        [claim] = [c for c in CLAIMS if c.id == row["claim"]]
        want = expected_claim(record, claim, row["setup"])
        where = f"{row['claim']} {row['setup']}"
        if want["ratio"] is not None:
            value, low, high, n_a, n_b = want["ratio"]
            _close(row.get("value"), value, where)
            _close(row.get("low"), low, where)
            _close(row.get("high"), high, where)
            assert int(row.get("n-a") or 0) == n_a, where
            if n_b is not None:
                assert int(row.get("n-b") or 0) == n_b, where
        assert row["rule-says"] == want["rule_says"], (where, row["rule-says"], want["rule_says"])
        assert row["verdict"] == want["verdict"], (where, row["verdict"], want["verdict"])
        assert row["scale"] == want["scale"], (where, row["scale"], want["scale"])
        if markdown is not None:
            text, runs_cell = verdict_cells[(row["claim"], row["setup"])]
            assert text.startswith(want["verdict"]), (where, text, want["verdict"])
            assert (", on runs scaled below the author's" in text) == bool(want["scale"]), (where, text)
            assert runs_cell == (f"scaled: {want['scale']}" if want["scale"] else "as published"), (where, runs_cell)
        checked += 1
    if markdown is not None:
        assert set(verdict_cells) == expected_rows
        assert ("is a smoke test" in markdown) == bool(record["params"].get("quick"))
    checked += check_lab_rows(record, cells)
    return checked


def check_lab_rows(record: dict, cells: Cells) -> int:
    """The lab path's table: per shape and queue, the lab's first -> last over the author's path's figure."""
    runs = record["runs"]
    lab_runs = [r for r in runs if r["bench"] == "lab_path"]
    expected = {(r["params"]["shape"], r["queue"]) for r in lab_runs}
    assert {(row["shape"], row["queue"]) for row in cells.lab} == expected
    for row in cells.lab:
        mine = [r for r in lab_runs if r["params"]["shape"] == row["shape"] and r["queue"] == row["queue"]]
        bare = mine[0]["params"]["bare"]
        lab = _ok_values(mine, "first_last_s")
        base = _ok_values(_runs_of(runs, bare["bench"], "unlimited", bare["column"], row["queue"]), bare["figure"])
        where = f"lab path {row['shape']} {row['queue']}"
        lab_est, base_est, r = stats.estimate(lab), stats.estimate(base), stats.ratio(lab, base)
        assert int(row.get("lab-n") or 0) == lab_est.n and int(row.get("bare-n") or 0) == base_est.n, where
        _close(row.get("lab-median"), lab_est.median, where)
        _close(row.get("bare-median"), base_est.median, where)
        _close(row.get("ratio-value"), r.value, where)
        _close(row.get("ratio-low"), r.low, where)
        _close(row.get("ratio-high"), r.high, where)
    return len(cells.lab)


def _markdown_verdicts(markdown: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(claim, setup) -> (its verdict cell, its runs cell) from the markdown twin's claims table."""
    out = {}
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| claim | what | setup |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        cells = dict(zip(header, (c.strip() for c in line.strip().strip("|").split(" | "))))
        out[(cells["claim"], cells["setup"])] = (cells["verdict"], cells["runs"])
    return out


def _published(cell: dict[str, str]) -> float | None:
    row = BENCHES[cell["bench"]].published.get(cell["queue"], {})
    column, figure = cell["column"], cell["figure"]
    if cell["bench"].startswith("streaq") and figure in ("spawn_done_s", "first_last_s"):
        return row.get(column)
    if cell["bench"] == "streaq_sleep" and figure == "efficiency":
        seconds = row.get(column)
        return round(20000 / (int(column[1:]) * 32) / seconds, 3) if seconds else None
    return row.get(figure)
