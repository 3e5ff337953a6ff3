"""The plain HTML page of make scale and make capacity: a title, tables of text
cells and inline charts, one style, nothing fetched (make compare's and make
claims' pages have their own, richer ones); and the escaped cells every page's
tables are built of."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
)


def esc(x: object) -> str:
    return html.escape("-" if x is None else str(x))


def row(cells: Iterable[str], cls: str = "", attrs: str = "") -> str:
    return (f"<tr class='{cls}'{attrs}>" if cls else f"<tr{attrs}>") + "".join(cells) + "</tr>"


def th(text: str, cls: str = "") -> str:
    return f"<th class='{cls}'>{esc(text)}</th>" if cls else f"<th>{esc(text)}</th>"


def td(text: object, numeric: bool = False, attrs: str = "") -> str:
    return f"<td{' class=n' if numeric else ''}{attrs}>{esc(text)}</td>"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of text cells under `header`, every cell escaped."""
    body = "".join(row(td(c) for c in cells) for cells in rows)
    return f"<table>{row(th(h) for h in header)}{body}</table>"


def page(title: str, body: str) -> str:
    """A whole page around `body` (already HTML), titled `title` (text)."""
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n{body}</body></html>\n"
    )
