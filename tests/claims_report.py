"""make claims' report read back, and its figures checked against the runs'
own records: what a reader of the page sees must be what the runs measured.

The expected values are worked out here from the runs (the record's `runs`
list), by this module's own arithmetic, never from the record's summaries
(labctl/records/claims.py computes those; the page shows them): each figure
cell's mean, min, max and count over the configuration's runs that ended ok,
the published figure from the published tables, and each claim's ratios
repetition by repetition. Used by tests/unit/test_claims.py (a committed
record of a real quick run) and tests/claims/test_claims_run.py (a fresh run)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from labctl.records.claims_published import BENCHES, CLAIMS


class Cells(HTMLParser):
    """Every figure cell (td with data-figure) and claim row (tr with data-claim) of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[dict[str, str]] = []
        self.claims: list[dict[str, str]] = []
        self.lab: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        data = {k.removeprefix("data-"): v or "" for k, v in attrs if k.startswith("data-")}
        if tag == "td" and "figure" in data:
            self.figures.append(data)
        elif tag == "tr" and "claim" in data:
            self.claims.append(data)
        elif tag == "tr" and "shape" in data:
            self.lab.append(data)


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
        and str(r["params"].get("column", "")) == column
    ]


def check_page(record: dict, page: str) -> int:
    """Assert every figure and claim ratio the page shows against the runs; the number of cells checked."""
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
        values = [r["figures"].get(cell["figure"]) for r in mine if r["status"] == "ok"]
        values = [float(v) for v in values if v is not None]
        where = f"{cell['bench']} {cell['setup']} {cell['column']} {cell['queue']} {cell['figure']}"
        if not values:
            assert "mean" not in cell, f"{where}: the page shows a figure no ok run has"
        else:
            assert int(cell["n"]) == len(values), where
            assert abs(float(cell["mean"]) - sum(values) / len(values)) < 1e-3, where
            assert float(cell["min"]) == min(values) and float(cell["max"]) == max(values), where
        published = _published(cell)
        assert (published is None) == ("published" not in cell), where
        if published is not None:
            assert abs(float(cell["published"]) - published) < 1e-3, where
        checked += 1
    for row in cells.claims:
        [claim] = [c for c in CLAIMS if c.id == row["claim"]]
        expected = _ratios(runs, claim, row["setup"])
        shown_ratios = json.loads(row["ratios"])
        assert len(shown_ratios) == len(expected), row["claim"]
        assert all(abs(a - b) < 1e-3 for a, b in zip(shown_ratios, expected)), (row["claim"], shown_ratios, expected)
        checked += 1
    return checked


def _published(cell: dict[str, str]) -> float | None:
    row = BENCHES[cell["bench"]]["published"].get(cell["queue"], {})
    column, figure = cell["column"], cell["figure"]
    if cell["bench"].startswith("streaq") and figure in ("spawn_done_s", "first_last_s"):
        return row.get(column)
    if cell["bench"] == "streaq_sleep" and figure == "efficiency":
        seconds = row.get(column)
        return round(20000 / (int(column[1:]) * 32) / seconds, 3) if seconds else None
    return row.get(figure)


def _ratios(runs: list[dict], claim, setup: str) -> list[float]:
    """The claim's figure, numerator's run over denominator's, for each repetition both ended ok."""
    if claim.rule == "event":
        return []
    if claim.rule == "absolute":
        published = BENCHES[claim.bench]["published"][claim.num][claim.figure]
        mine = _runs_of(runs, claim.bench, setup, claim.column, claim.num)
        return [
            r["figures"][claim.figure] / published
            for r in mine
            if r["status"] == "ok" and r["figures"].get(claim.figure)
        ]
    num = {r["rep"]: r for r in _runs_of(runs, claim.bench, setup, claim.column, claim.num) if r["status"] == "ok"}
    den = {r["rep"]: r for r in _runs_of(runs, claim.bench, setup, claim.column, claim.den) if r["status"] == "ok"}
    out = []
    for rep in sorted(set(num) & set(den)):
        a, b = num[rep]["figures"].get(claim.figure), den[rep]["figures"].get(claim.figure)
        if a and b:
            out.append(a / b)
    return out
