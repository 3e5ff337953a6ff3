"""make claims: the queue authors' published benchmarks, run here beside their figures."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import console, handled, help_of, with_options
from labctl.experiments.claims import runner


def register(app: typer.Typer) -> None:
    app.command("claims", help=help_of(runner.__doc__))(claims)


@handled("claims", "interrupted: no claims record written")
@with_options(runner.ClaimsOptions)
def claims(
    options: runner.ClaimsOptions,
    report: Annotated[
        str, typer.Option(help="a recorded run (claims-<time>): write its report again from its runs; nothing runs")
    ] = "",
) -> int:
    if report:
        return runner.report_again(report, options.results_dir, console())
    return runner.claims(options, console())
