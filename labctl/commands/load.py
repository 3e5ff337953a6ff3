"""make load, make sweep, make scale, make chaos, make capacity: a load run, alone or several."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import console, handled, help_of, with_load_options
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
@with_load_options()
def load(options: LoadOptions) -> int:
    return load_experiment.load(options)


@handled("sweep", NO_RECORD)
@with_load_options()
def sweep(
    options: LoadOptions,
    cpus: Annotated[str, typer.Option(help='worker CPU limits, e.g. "0.2 0.5 1"')] = "",
    mems: Annotated[str, typer.Option(help='worker memory limits, e.g. "200M 500M"')] = "",
    services: Annotated[str, typer.Option(help="the services started (default: every one outside a profile)")] = "",
) -> int:
    return sweep_experiment.sweep(options, cpus.split(), mems.split(), services.split(), console())


@handled("scale", NO_RECORD)
@with_load_options()
def scale(
    options: LoadOptions,
    replicas: Annotated[str, typer.Option(help='replica counts, e.g. "1 2 4 8"')] = "1 2 4 8",
    nodes: Annotated[str, typer.Option(help='or node counts to spread the workers over, e.g. "1 2 3" (a Swarm)')] = "",
    per_node: Annotated[int, typer.Option(min=1, help="with nodes: the workers' replicas on each node")] = 1,
    reps: Annotated[
        int, typer.Option(min=1, help="runs of each count, the counts in a random order in each")
    ] = scale_experiment.DEFAULT_REPS,
    seed: Annotated[int | None, typer.Option(help="the seed of that order (default: drawn, and recorded)")] = None,
) -> int:
    return scale_experiment.scale(options, replicas, orchestrator(), console(), nodes, per_node, reps, seed)


@handled("chaos", NO_RECORD)
@with_load_options(
    drain_stall=(
        Annotated[
            float | None,
            typer.Option(
                help="seconds without a settled task before the rest count as lost (default: 3 TASK_TIMEOUT_S)"
            ),
        ],
        None,
    )
)
def chaos(
    options: LoadOptions,
    fault: Annotated[str, typer.Option(help=f"one of {', '.join(chaos_experiment.FAULTS)}")],
    drain_stall: float | None,
    at: Annotated[float, typer.Option(help="seconds into the load when the fault starts")] = 3,
    hold: Annotated[
        float | None, typer.Option(help="seconds the fault lasts before it is undone (5; kill-node 60)")
    ] = None,
    node: Annotated[str, typer.Option(help="kill-node: the node (default: one that runs the queue's workers)")] = "",
) -> int:
    hold_s = chaos_experiment.default_hold(fault) if hold is None else hold
    plan = chaos_experiment.ChaosOptions(fault=fault, at=at, hold=hold_s, node=node)
    return chaos_experiment.chaos(options, plan, drain_stall is not None, console())


@handled("capacity", "interrupted: the steps run so far are in the capacity record written above")
@with_load_options()
def capacity(
    options: LoadOptions,
    max_wait: Annotated[str, typer.Option(help="the p95 wait (enqueue to start) a sustained rate keeps under")] = (
        capacity_experiment.MAX_WAIT
    ),
    step: Annotated[str, typer.Option(help="each step's load: 30s, 1m")] = capacity_experiment.STEP,
    start: Annotated[float, typer.Option(help="the first rate tried, tasks/s")] = capacity_experiment.START_RATE,
    precision: Annotated[
        float, typer.Option(help="bisect until the bracket is this many % of its lower rate")
    ] = capacity_experiment.PRECISION_PCT,
    max_rate: Annotated[float | None, typer.Option(help="the highest rate tried (default: what Locust sends)")] = None,
    reps: Annotated[int, typer.Option(help="searches of each queue, the queues in a random order in each")] = 1,
    check: Annotated[bool, typer.Option(help="then run 0.8x and 1.3x of each rate found")] = False,
    check_s: Annotated[str, typer.Option(help="how long each check runs")] = capacity_experiment.CHECK,
    seed: Annotated[int | None, typer.Option(help="the seed of the queues' order (default: drawn, recorded)")] = None,
    target_pct: Annotated[
        float | None, typer.Option(help="then search again each queue whose interval is wider than +-this %")
    ] = None,
    max_reps: Annotated[
        int, typer.Option(help="target_pct=: at most this many searches of a queue")
    ] = capacity_experiment.MAX_REPS,
) -> int:
    given = capacity_experiment.CapacityOptions(
        workers=options.worker,
        max_wait=max_wait,
        step=step,
        start=start,
        precision=precision,
        max_rate=max_rate,
        reps=reps,
        check=check,
        check_s=check_s,
        seed=seed,
        target_pct=target_pct,
        max_reps=max_reps,
    )
    return capacity_experiment.capacity(options.but(worker=""), given, orchestrator(), console())
