"""Reading `make compare`'s report page as a test does, from the page itself
(or the DOM a browser serialised from it): the summary's cells with their data-*
attributes, and each chart's lines, from the SVG group matplotlib writes for a
line (its id names the chart, queue and rep) with the values it plots in data-*
attributes and the path that draws them. `only_lines_of` makes the copy of the
page that keeps one queue's lines (or none), for a screenshot of its ink.

Pure parsing, so the unit tests read a page rendered from a fixture record the
way tests/compose/test_compare.py reads the real one."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

# A run's line and the median over a queue's runs (render/compare_charts.py's chart).
LINE_GROUP = re.compile(r"""<g id="(?:line|median)-[^"]*"[^>]*\bdata-queue=['"]([^'"]*)['"][^>]*>.*?</g>""", re.S)


def only_lines_of(html: str, queue: str | None) -> str:
    """The page with every chart line taken out but `queue`'s (None: every line)."""
    return LINE_GROUP.sub(lambda m: m.group(0) if queue is not None and m.group(1) == queue else "", html)


class ReportPage(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], dict] = {}
        self.charts: list[str] = []
        self.lines: list[dict] = []
        self._cell: dict | None = None
        self._groups: list[dict | None] = []

    @classmethod
    def read(cls, html: str) -> ReportPage:
        page = cls()
        page.feed(html)
        page.close()
        return page

    def lines_of(self, key: str) -> list[dict]:
        return [line for line in self.lines if line["chart"] == f"chart-{key}"]

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-field" in a:
            self._cell = {**a, "text": ""}
        elif tag == "svg" and a.get("id", "").startswith("chart-"):
            self.charts.append(a["id"])
        elif tag == "g":
            line = None
            if a.get("id", "").startswith("line-") and "data-queue" in a:
                line = {
                    "chart": self.charts[-1] if self.charts else "",
                    "queue": a["data-queue"],
                    "rep": int(a["data-rep"]),
                    "run": a["data-run"],
                    "samples": int(a["data-samples"]),
                    "values": json.loads(a["data-values"]),
                    "vertices": 0,
                    "colour": "",
                }
                self.lines.append(line)
            self._groups.append(line)
        elif tag == "path" and self._groups and self._groups[-1] is not None:
            line = self._groups[-1]
            line["vertices"] += len(re.findall(r"[ML]", a.get("d", "")))
            if stroke := re.search(r"stroke:\s*(#[0-9a-fA-F]{6})", a.get("style", "")):
                line["colour"] = stroke.group(1).lower()

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.handle_starttag(tag, attrs)
        if tag == "g":
            self._groups.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.cells[(self._cell["data-queue"], self._cell["data-field"])] = self._cell
            self._cell = None
        elif tag == "g" and self._groups:
            self._groups.pop()
