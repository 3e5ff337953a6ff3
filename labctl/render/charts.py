"""The one chart stack of the package: matplotlib, drawn off-screen (Agg), saved
as SVG (text kept as text, one vertex per sample) or PNG.

An SVG line can carry what it plots: `svg_with_line_data` writes data-*
attributes (queue, rep, run, the samples) on each line's group, which
matplotlib names by the line's gid, so that a test reads the values a chart
shows from the page itself."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import matplotlib.colors

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# Matplotlib's ten default colours, "#1f77b4" (tab:blue) to "#17becf" (tab:cyan).
TAB10 = tuple(str(c) for c in matplotlib.colors.TABLEAU_COLORS.values())


def figure(width_px: int, height_px: int, rows: int = 1, cols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure of the given size in pixels (at 100 dpi) and its axes."""
    with plt.rc_context({"svg.fonttype": "none", "path.simplify": False}):
        return plt.subplots(rows, cols, figsize=(width_px / 100, height_px / 100), dpi=100, **kwargs)


def svg(fig: Figure) -> str:
    """The figure as an inline <svg> element (no XML prolog), then closed."""
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "path.simplify": False}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def png(fig: Figure, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def svg_with_line_data(text: str, lines: Mapping[str, Mapping[str, object]]) -> str:
    """Each line's group (`<g id="GID">`) given data-* attributes: gid -> {name: value};
    a list value is written as JSON."""

    def attrs(match: re.Match[str]) -> str:
        data = lines.get(match.group(1))
        if data is None:
            return match.group(0)
        extra = "".join(f" data-{k}='{json.dumps(v) if isinstance(v, list | dict) else v}'" for k, v in data.items())
        return f'<g id="{match.group(1)}"{extra}>'

    return re.sub(r'<g id="([^"]+)">', attrs, text)


def plot_xy(ax: Any, samples: Sequence[Sequence[float]], **style: Any) -> Any:
    """One line from [[x, y], ...]; the Line2D."""
    xs = [float(x) for x, _ in samples]
    ys = [float(y) for _, y in samples]
    (line,) = ax.plot(xs, ys, **style)
    return line
