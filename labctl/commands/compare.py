"""make compare: every queue in turn under the same limits and load."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import ResultsDir, console, handled, help_of
from labctl.config import RESULTS_DIR
from labctl.experiments import compare as experiment
from labctl.platform.select import orchestrator
from labctl.queues import QUEUES


def register(app: typer.Typer) -> None:
    app.command("compare", help=help_of(experiment.__doc__))(compare)


@handled("compare", "interrupted: no comparison written (the runs done so far have their records)")
def compare(
    workers: Annotated[
        str, typer.Option(help=f"queues, space- or comma-separated (default: all: {' '.join(QUEUES)})")
    ] = "",
    requests: Annotated[int, typer.Option(help="requests per run")] = experiment.DEFAULT_REQUESTS,
    reps: Annotated[int, typer.Option(help="runs per queue")] = experiment.DEFAULT_REPS,
    users: Annotated[int, typer.Option(help="Locust users (the article's 100)")] = 100,
    spawn: Annotated[str, typer.Option(help="users started per second (default: make load's)")] = "",
    endpoint: Annotated[str, typer.Option(help="the task shape, one for every queue")] = "io/simple",
    locust_workers: Annotated[int, typer.Option(envvar="LOCUST_WORKERS", min=1, help="Locust worker containers")] = 2,
    drain_timeout: Annotated[
        float, typer.Option(envvar="LOAD_DRAIN_TIMEOUT_S", help="seconds a run may wait for its tasks")
    ] = 1200,
    backlog_wait_s: Annotated[
        float, typer.Option(help="how long to wait for every queue to be empty before a run")
    ] = 600,
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    options = experiment.CompareOptions(
        workers=workers,
        requests=requests,
        reps=reps,
        users=users,
        spawn=spawn,
        endpoint=endpoint,
        locust_workers=locust_workers,
        drain_timeout=drain_timeout,
        backlog_wait_s=backlog_wait_s,
        results_dir=results_dir,
    )
    return experiment.compare(options, orchestrator(), console())
