"""make results, make report: what the records say."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import ResultsDir, console, handled, help_of
from labctl.config import RESULTS_DIR
from labctl.errors import ParamError
from labctl.views import report as run_report
from labctl.views import results as results_view


def register(app: typer.Typer) -> None:
    app.command("results", help=help_of(results_view.__doc__))(results)
    app.command("report", help=help_of(run_report.__doc__))(report)


@handled("results")
def results(
    full: Annotated[bool, typer.Option("--full", help="every run, comparison and bench, every column")] = False,
    last: Annotated[int, typer.Option(help="runs shown without --full")] = results_view.LATEST_RUNS,
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    return results_view.show_results(results_dir, full, last, console())


@handled("report")
def report(
    run: Annotated[str, typer.Option(help="the run (make results lists them)")] = "",
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    if not run:
        raise ParamError("usage: make report run=NAME (make results lists the runs)")
    return run_report.report(results_dir, run, console())
