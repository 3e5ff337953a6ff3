"""make bench: the lab's API and workers beside bare ones."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import ResultsDir, console, handled, help_of
from labctl.config import RESULTS_DIR
from labctl.experiments.bench import runner


def register(app: typer.Typer) -> None:
    app.command("bench", help=help_of(runner.__doc__))(bench)


@handled("bench", "interrupted: no bench record written")
def bench(
    worker: Annotated[str, typer.Option(help="a queue, or all")] = "all",
    requests: Annotated[int, typer.Option(help="requests per API and queue")] = 3000,
    users: Annotated[int, typer.Option(help="concurrent connections")] = 50,
    warmup: Annotated[int, typer.Option(help="requests sent first, not measured")] = 200,
    rounds: Annotated[
        int,
        typer.Option(min=1, help="rounds of the bare and the lab API driven at the same time: the RPS ratio's pairs"),
    ] = runner.BenchOptions.rounds,
    drain_s: Annotated[
        float,
        typer.Option(
            help="how long each worker's drain is measured, in windows taken in turns; the lab's queue is emptied regardless"
        ),
    ] = 30,
    drain_window_s: Annotated[
        float, typer.Option(help="the shortest drain window (longer if it would hold under 40 tasks)")
    ] = 1.0,
    backlog_wait_s: Annotated[
        float, typer.Option(help="how long a lab queue's earlier backlog may take to empty before the bench gives up")
    ] = 120,
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    options = runner.BenchOptions(
        worker=worker,
        requests=requests,
        users=users,
        warmup=warmup,
        rounds=rounds,
        drain_s=drain_s,
        drain_window_s=drain_window_s,
        backlog_wait_s=backlog_wait_s,
        results_dir=results_dir,
    )
    return runner.bench(options, console())
