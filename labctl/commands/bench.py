"""make bench: the lab's API and workers beside bare ones."""

from __future__ import annotations

import typer

from labctl.commands.common import console, handled, help_of, with_options
from labctl.experiments.bench import runner
from labctl.experiments.bench.options import BenchOptions


def register(app: typer.Typer) -> None:
    app.command("bench", help=help_of(runner.__doc__))(bench)


@handled("bench", "interrupted: no bench record written")
@with_options(BenchOptions)
def bench(options: BenchOptions) -> int:
    return runner.bench(options, console())
