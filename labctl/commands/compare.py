"""make compare: every queue in turn under the same limits and load."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import ResultsDir, console, handled, help_of
from labctl.config import RESULTS_DIR
from labctl.experiments import capacity as capacity_experiment
from labctl.experiments import compare as experiment
from labctl.experiments.compare import agree as agree_experiment
from labctl.load_run.options import DRAIN_TIMEOUT_S, LOCUST_WORKERS, LoadOptions
from labctl.platform.orchestrator import orchestrator
from labctl.queues import QUEUES


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
def compare(
    workers: Annotated[
        str, typer.Option(help=f"queues, space- or comma-separated (default: all: {' '.join(QUEUES)})")
    ] = "",
    duration: Annotated[float, typer.Option(help="seconds of load per run")] = experiment.DEFAULT_DURATION_S,
    requests: Annotated[int | None, typer.Option(help="or exactly this many requests per run")] = None,
    warmup_s: Annotated[
        float, typer.Option(help="the start of each run's load its RPS leaves out, seconds")
    ] = experiment.DEFAULT_WARMUP_S,
    drain_watch: Annotated[
        float,
        typer.Option(help="seconds a run watches its tasks before a one-off worker runs the rest of a slow backlog"),
    ] = experiment.DEFAULT_DRAIN_WATCH_S,
    rounds: Annotated[
        int, typer.Option("--rounds", "--reps", help="rounds every queue runs in (each round in a new random order)")
    ] = experiment.DEFAULT_ROUNDS,
    max_rounds: Annotated[
        int, typer.Option(help="at most this many rounds for a queue whose RPS interval is still wide")
    ] = experiment.DEFAULT_MAX_ROUNDS,
    target_pct: Annotated[
        float, typer.Option(help="a queue's RPS interval within +- this % of its median needs no more rounds")
    ] = experiment.DEFAULT_TARGET_PCT,
    budget_min: Annotated[
        float, typer.Option(help="minutes: no round beyond --rounds starts that would end past this")
    ] = experiment.DEFAULT_BUDGET_MIN,
    seed: Annotated[int | None, typer.Option(help="the rounds' order (default: drawn, and recorded)")] = None,
    warmup_run: Annotated[
        bool, typer.Option("--warmup-run/--no-warmup-run", help="a short, uncounted run of every queue first")
    ] = True,
    quick: Annotated[
        bool, typer.Option(help="a first look: shorter runs, two rounds, intervals as wide as they are")
    ] = False,
    users: Annotated[int, typer.Option(help="Locust users (the article's 100)")] = 100,
    spawn: Annotated[str, typer.Option(help="users started per second (default: make load's)")] = "",
    endpoint: Annotated[str, typer.Option(help="the task shape, one for every queue")] = "io/simple",
    setting: Annotated[
        str,
        typer.Option(help="article: the published experiment's two settings in one go (the compose lab restarted)"),
    ] = "",
    locust_workers: Annotated[
        int, typer.Option(envvar="LOCUST_WORKERS", min=1, help="Locust worker containers")
    ] = LOCUST_WORKERS,
    drain_timeout: Annotated[
        float, typer.Option(envvar="LOAD_DRAIN_TIMEOUT_S", help="seconds a run's backlog may take to empty")
    ] = DRAIN_TIMEOUT_S,
    backlog_wait_s: Annotated[
        float, typer.Option(help="how long to wait for every queue to be empty before a run")
    ] = 600,
    capacity: Annotated[
        bool, typer.Option(help="first a make capacity of the queues (at each setting), its table in the report")
    ] = False,
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    options = experiment.CompareOptions(
        workers=workers,
        duration_s=duration,
        requests=requests,
        warmup_s=warmup_s,
        drain_watch_s=drain_watch,
        rounds=rounds,
        max_rounds=max_rounds,
        target_pct=target_pct,
        budget_min=budget_min,
        seed=seed,
        warmup_run=warmup_run,
        quick=quick,
        users=users,
        spawn=spawn,
        endpoint=endpoint,
        setting=setting,
        locust_workers=locust_workers,
        drain_timeout=drain_timeout,
        backlog_wait_s=backlog_wait_s,
        results_dir=results_dir,
    )
    lab, ui = orchestrator(), console()

    def measure_capacity(queues: list[str]) -> None:
        load = LoadOptions(locust_workers=locust_workers, results_dir=results_dir, endpoint=endpoint)
        capacity_experiment.capacity(load, capacity_experiment.CapacityOptions(workers=" ".join(queues)), lab, ui)

    return experiment.compare(options, lab, ui, measure_capacity if capacity else None)
