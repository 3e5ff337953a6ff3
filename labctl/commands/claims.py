"""make claims: the queue authors' published benchmarks, run here beside their figures."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import ResultsDir, console, handled, help_of
from labctl.config import RESULTS_DIR
from labctl.experiments.claims import runner


def register(app: typer.Typer) -> None:
    app.command("claims", help=help_of(runner.__doc__))(claims)


def _names(text: str) -> list[str]:
    return [x for x in text.replace(",", " ").split() if x]


@handled("claims", "interrupted: no claims record written")
def claims(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", envvar="CLAIMS_QUICK", help="N scaled by 0.1, one repetition: a smoke test, it decides no claim"
        ),
    ] = False,
    scale: Annotated[float, typer.Option(envvar="CLAIMS_SCALE", help="every benchmark's N multiplied by this")] = 1.0,
    reps: Annotated[
        int, typer.Option(envvar="CLAIMS_REPS", help="repetitions of every configuration (an interval needs 2)")
    ] = runner.REPS,
    only: Annotated[
        str,
        typer.Option(
            help="benchmarks to run (default all): saq_simple, rq_doc, streaq_noop, streaq_sleep, steventen, "
            "blog_io, blog_cpu, dramatiq_fib"
        ),
    ] = "",
    setups: Annotated[str, typer.Option(help="unlimited, limited, or both")] = "unlimited,limited",
    quiet_wait_s: Annotated[
        float,
        typer.Option(
            envvar="CLAIMS_QUIET_WAIT_S",
            help="before each run, wait up to this long for the machine's other work to quiet down",
        ),
    ] = 5.0,
    report: Annotated[
        str, typer.Option(help="a recorded run (claims-<time>): write its report again from its runs; nothing runs")
    ] = "",
    results_dir: ResultsDir = RESULTS_DIR,
) -> int:
    if report:
        return runner.report_again(report, results_dir, console())
    options = runner.ClaimsOptions(
        scale=scale,
        reps=reps,
        quick=quick,
        only=_names(only),
        setups=_names(setups),
        quiet_wait_s=quiet_wait_s,
        results_dir=results_dir,
    )
    return runner.claims(options, console())
