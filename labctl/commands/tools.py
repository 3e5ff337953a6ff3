"""The measurement helper: what a scrape costs."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import console, handled, help_of
from labctl.queues import QUEUES


def register(app: typer.Typer) -> None:
    from labctl.tools import scrape_cost

    app.command("scrape-cost", help=help_of(scrape_cost.__doc__))(scrape_cost_command)


@handled("scrape-cost")
def scrape_cost_command(
    services: Annotated[
        list[str] | None, typer.Argument(help="services (default: the API and every queue's worker)")
    ] = None,
    scrapes: Annotated[int, typer.Option(help="scrapes in a row")] = 100,
    idle_s: Annotated[float, typer.Option(help="seconds the container's idle CPU is read over")] = 5.0,
) -> int:
    from labctl.tools.scrape_cost import scrape_costs

    return scrape_costs(services or ["api", *QUEUES[1:]], scrapes, idle_s, console())
