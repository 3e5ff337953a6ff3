"""make load, make sweep, make scale, make chaos, make capacity: a load run, alone or several."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from labctl.commands.common import console, handled, help_of, with_options
from labctl.experiments import capacity as capacity_experiment
from labctl.experiments import chaos as chaos_experiment
from labctl.experiments import load as load_experiment
from labctl.experiments import scale as scale_experiment
from labctl.experiments import sweep as sweep_experiment
from labctl.load_run import steps
from labctl.load_run.options import LoadOptions
from labctl.platform.orchestrator import orchestrator

NO_RECORD = "interrupted: the Locust containers were removed; no record written"


def register(app: typer.Typer) -> None:
    app.command("load", help=help_of(steps.__doc__))(load)
    app.command("sweep", help=help_of(sweep_experiment.__doc__))(sweep)
    app.command("scale", help=help_of(scale_experiment.__doc__))(scale)
    app.command("chaos", help=help_of(chaos_experiment.__doc__))(chaos)
    app.command("capacity", help=help_of(capacity_experiment.__doc__))(capacity)


@handled("load", NO_RECORD)
@with_options(LoadOptions)
def load(options: LoadOptions) -> int:
    return load_experiment.load(options)


@handled("sweep", NO_RECORD)
@with_options(LoadOptions)
@with_options(sweep_experiment.SweepOptions, "plan")
def sweep(options: LoadOptions, plan: sweep_experiment.SweepOptions) -> int:
    return sweep_experiment.sweep(options, plan, console())


@handled("scale", NO_RECORD)
@with_options(LoadOptions)
@with_options(scale_experiment.ScaleOptions, "plan")
def scale(options: LoadOptions, plan: scale_experiment.ScaleOptions) -> int:
    return scale_experiment.scale(options, plan, orchestrator(), console())


@handled("chaos", NO_RECORD)
@with_options(
    LoadOptions,
    drain_stall=(
        Annotated[
            float | None,
            typer.Option(
                help="seconds without a settled task before the rest count as lost (default: 3 TASK_TIMEOUT_S)"
            ),
        ],
        None,
    ),
)
@with_options(chaos_experiment.ChaosOptions, "plan")
def chaos(options: LoadOptions, plan: chaos_experiment.ChaosOptions, drain_stall: float | None) -> int:
    return chaos_experiment.chaos(options, plan, drain_stall is not None, console())


@handled("capacity", "interrupted: the steps run so far are in the capacity record written above")
@with_options(LoadOptions)
@with_options(capacity_experiment.CapacityOptions, "given")
def capacity(options: LoadOptions, given: capacity_experiment.CapacityOptions) -> int:
    given = replace(given, workers=options.worker)  # worker= names the queues, the load's runs each one
    return capacity_experiment.capacity(options.but(worker=""), given, orchestrator(), console())
