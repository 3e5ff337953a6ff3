"""make compare: every queue in turn under the same limits and load."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import ResultsDir, console, handled, help_of, with_options
from labctl.config import RESULTS_DIR
from labctl.experiments import capacity as capacity_experiment
from labctl.experiments import compare as experiment
from labctl.experiments.compare import agree as agree_experiment
from labctl.load_run.options import LoadOptions
from labctl.platform.orchestrator import orchestrator


def register(app: typer.Typer) -> None:
    app.command("compare", help=help_of(experiment.__doc__))(compare)
    app.command("compare-agree", help=help_of(agree_experiment.__doc__))(compare_agree)


@handled("compare-agree")
def compare_agree(
    a: Annotated[str, typer.Option(help="a comparison (compare-<time>)")],
    b: Annotated[str, typer.Option(help="another, of the same queues")],
    within_pct: Annotated[
        float, typer.Option(help="how far apart two medians may be by a shift their runs show")
    ] = agree_experiment.WITHIN_PCT,
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    return agree_experiment.agree(results_dir, a, b, console(), within_pct)


@handled("compare", "interrupted: no comparison written (the runs done so far have their records)")
@with_options(experiment.CompareOptions)
def compare(
    options: experiment.CompareOptions,
    capacity: Annotated[
        bool, typer.Option(help="first a make capacity of the queues (at each setting), its table in the report")
    ] = False,
) -> int:
    lab, ui = orchestrator(), console()

    def measure_capacity(queues: list[str]) -> None:
        load = LoadOptions(
            locust_workers=options.locust_workers, results_dir=options.results_dir, endpoint=options.endpoint
        )
        capacity_experiment.capacity(load, capacity_experiment.CapacityOptions(workers=" ".join(queues)), lab, ui)

    return experiment.compare(options, lab, ui, measure_capacity if capacity else None)
