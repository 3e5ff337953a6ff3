"""make report's figure: four panels of a run's series over its window, as a PNG
(matplotlib), with the load's start, its end and the last settled task marked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labctl.records.run import RunRecord
from labctl.render import charts


@dataclass
class Series:
    label: str
    xs: list[float]
    ys: list[float]
    style: dict[str, Any] = field(default_factory=dict)  # ls, lw, color


@dataclass
class Panel:
    title: str
    ylabel: str
    series: list[Series]


def title(record: RunRecord) -> str:
    """The figure's title: what ran, how hard, how fast, under which limits."""
    limits = record.limits
    return (
        f"{record.run}: {record.worker or record.scenario} {record.endpoint}, "
        f"{record.users} users, {record.requests} requests, {record.rps} req/s; "
        f"api {limits.api_text}, workers {limits.workers_text}"
    )


def _draw(ax: Any, panel: Panel, marks: tuple[float, float, float]) -> None:
    start, load_end, end = marks
    for s in panel.series:
        ax.plot(s.xs, s.ys, label=s.label, **{k: v for k, v in s.style.items() if k in ("ls", "lw", "color")})
    if not panel.series:
        ax.text(
            0.5,
            0.5,
            "no data in Prometheus for this window",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="grey",
        )
    ax.axvline(0, color="green", lw=0.8)
    ax.axvline(load_end - start, color="red", lw=0.8)
    if end > load_end + 1:
        ax.axvline(end - start, color="purple", lw=0.8, ls="--")
    ax.set_title(panel.title)
    ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
    if panel.series:
        ax.legend(fontsize=7, loc="upper right")


def figure_png(record: RunRecord, panels: list[Panel], marks: tuple[float, float, float]) -> bytes:
    """The four panels, 2 by 2; `marks`: the load's start and end, and the window's end (tasks settled)."""
    fig, axes = charts.figure(1400, 900, 2, 2, sharex=True)
    for ax, panel in zip(axes.flat, panels):
        _draw(ax, panel, marks)
    for ax in axes[1]:
        ax.set_xlabel("seconds since the first request (green: load start, red: load end, purple: tasks settled)")
    fig.suptitle(title(record), fontsize=10)
    fig.tight_layout()
    return charts.png(fig)
