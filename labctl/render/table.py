"""The one markdown table of the package: `| a | b |` rows under a header whose
separator right-aligns the numeric columns (GitHub's `---:`).

A small function rather than a library: tabulate's "github" format pads every
cell to its column's width, which would change every table the lab has printed
and the docs quote, and the compose tests find rows by their exact text."""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], text: Container[str] = ()) -> str:
    """Rows under `header`; every column is numeric (right-aligned) but those named in `text`."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if name in text else "---:" for name in header) + "|",
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
