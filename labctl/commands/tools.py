"""The measurement helpers: what a scrape costs, how fast each queue empties a backlog on the host."""

from __future__ import annotations

from typing import Annotated

import typer

from labctl.commands.common import console, handled, help_of
from labctl.queues import QUEUES


def register(app: typer.Typer) -> None:
    from labctl.tools import host_drain_rate, scrape_cost

    app.command("scrape-cost", help=help_of(scrape_cost.__doc__))(scrape_cost_command)
    app.command("host-drain-rate", help=help_of(host_drain_rate.__doc__))(host_drain_rate_command)


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


@handled("host-drain-rate")
def host_drain_rate_command(
    count: Annotated[int, typer.Option(help="tasks queued before the worker starts")] = 2000,
    queues: Annotated[str, typer.Option(help="broker queues (default: every one)")] = "",
    set_: Annotated[list[str] | None, typer.Option("--set", help="extra worker settings, KNOB=VALUE")] = None,
) -> int:
    from labctl.tools.host_drain_rate import host_drain_rates

    return host_drain_rates(queues.split() or list(QUEUES[1:]), count, set_ or [], console())
