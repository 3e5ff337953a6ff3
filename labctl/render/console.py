"""The one console of the package, on rich: messages, and one live progress line
(a bar and its text) on a terminal; where the output is no terminal (logs,
tests) the progress line is printed every few seconds instead, as plain text."""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from rich.console import Console as RichConsole
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

BAR_WIDTH = 24
PLAIN_EVERY_S = 5.0


def text_bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """`[######------]`: the bar as plain text, for output that is no terminal."""
    filled = max(0, min(width, round(fraction * width)))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class Console:
    def __init__(self, file: IO[str] | None = None, stderr: bool = False, terminal: bool | None = None):
        self.rich = RichConsole(
            file=file if file is not None else (sys.stderr if stderr else sys.stdout),
            force_terminal=terminal,
            markup=False,
            highlight=False,
            emoji=False,
            soft_wrap=True,
        )
        self.live: Live | None = None
        self.last_plain = 0.0

    @property
    def tty(self) -> bool:
        return self.rich.is_terminal

    def say(self, message: str = "") -> None:
        """A line of its own (above the live progress line, on a terminal)."""
        self.rich.print(message)

    def progress(self, fraction: float | None, text: str, label: str = "", force: bool = False) -> None:
        """The live progress line: `label`, a bar at `fraction` (None: no bar), and `text`."""
        if self.tty:
            grid = Table.grid(padding=(0, 1))
            cells: list[Any] = []
            if label:
                cells.append(Text(label.rstrip()))
            if fraction is not None:
                cells.append(ProgressBar(total=1.0, completed=max(0.0, min(1.0, fraction)), width=BAR_WIDTH))
            cells.append(Text(text))
            grid.add_row(*cells)
            if self.live is None:
                self.live = Live(grid, console=self.rich, auto_refresh=False, transient=False)
                self.live.start()
            self.live.update(grid, refresh=True)
        elif force or time.monotonic() - self.last_plain >= PLAIN_EVERY_S:
            bar = f"{text_bar(fraction)} " if fraction is not None else ""
            self.rich.print(f"{label}{bar}{text}")
            self.last_plain = time.monotonic()

    def end_progress(self) -> None:
        """The live line stays as it last was; what follows goes below it."""
        if self.live is not None:
            self.live.stop()
            self.live = None
