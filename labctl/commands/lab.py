"""make limits, make purge, make locust-ui, make stack-up, make stack-down, and the
swarm's own: what the lab runs on, rather than an experiment on it."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from labctl.commands.common import console, handled, help_of
from labctl.config import knobs
from labctl.platform import cluster as cluster_platform
from labctl.platform import purge as purge_platform
from labctl.platform import stack as stack_file
from labctl.platform import stack_deploy
from labctl.views import limits as limits_view
from labctl.views import locust_ui as locust_ui_view


def register(app: typer.Typer) -> None:
    app.command("limits", help=help_of(limits_view.__doc__))(limits)
    app.command("purge", help=help_of(purge_platform.__doc__))(purge)
    app.command("locust-ui", help=help_of(locust_ui_view.__doc__))(locust_ui)
    app.command("stack-up")(stack_up)
    app.command("stack-down")(stack_down)
    app.command("swarm-leave")(swarm_leave)
    app.command("stack-file", help=help_of(stack_file.__doc__))(write_stack_file)
    app.command("cluster-up", help=help_of(cluster_platform.__doc__))(cluster_up)
    app.command("cluster-down")(cluster_down)
    app.command("cluster-env")(cluster_env)


@handled("limits")
def limits() -> int:
    return limits_view.limits(console())


@handled("purge")
def purge(
    worker: Annotated[str, typer.Option(help="a broker queue (arq, saq, ...) or all")] = "",
) -> int:
    purge_platform.purge(worker, console().say)
    return 0


@handled("locust-ui")
def locust_ui(
    worker: Annotated[str, typer.Option(help="a queue, all, or a,b")] = "",
    endpoint: Annotated[str, typer.Option(help="io/simple (default), ...")] = "",
    run: Annotated[str, typer.Option(help="the ledger's run name (default: generated)")] = "",
) -> int:
    return locust_ui_view.locust_ui(worker, endpoint, run, console())


@handled("stack-up")
def stack_up(
    services: Annotated[str, typer.Option(help="compose services (default: every one outside a profile)")] = "",
) -> int:
    """Deploy the lab as a stack to the Swarm the Docker CLI points at."""
    stack_deploy.deploy(services.split() or None, console().say)
    return 0


@handled("stack-down")
def stack_down() -> int:
    """Remove the stack and its port forwarder (the swarm and the volumes stay)."""
    stack_deploy.remove(console().say)
    return 0


@handled("swarm-leave")
def swarm_leave() -> int:
    """Leave this engine's swarm, restart the engine, check that names resolve."""
    console().say(stack_deploy.leave(knobs().lab_image))
    return 0


@handled("stack-file")
def write_stack_file(
    services: Annotated[str, typer.Option(help="compose services (default: every one outside a profile)")] = "",
    profile: Annotated[list[str] | None, typer.Option(help="compose profiles to include (load, ...)")] = None,
    node_role: Annotated[list[str] | None, typer.Option(help="a lab.role some node carries")] = None,
    out: Annotated[Path, typer.Option(help="the stack file")] = stack_file.BUILD_DIR / "lab.yml",
) -> int:
    rendered = stack_file.render(
        services.split() or None, profiles=tuple(profile or ()), node_roles=set(node_role or ()), out=out
    )
    console().say(str(rendered.path))
    return 0


@handled("cluster-up")
def cluster_up(
    nodes: Annotated[int, typer.Option(min=1, help="Docker engines (containers) to run as the Swarm's nodes")] = 3,
) -> int:
    ui = console()
    cluster = cluster_platform.Cluster()
    cluster.up(nodes, ui.say)
    ui.say(cluster_platform.nodes_table(cluster))
    ui.say('the Docker CLI on the cluster: eval "$(make -s cluster-env)"')
    return 0


@handled("cluster-down")
def cluster_down() -> int:
    """Remove the cluster of make cluster-up: its nodes, the registry, their volumes."""
    cluster_platform.Cluster().down(console().say)
    return 0


@handled("cluster-env")
def cluster_env() -> int:
    """Print the exports that point the Docker CLI and make at the cluster."""
    # `export ...` for a shell: eval "$(make -s cluster-env)"
    env = cluster_platform.Cluster().env_for_the_lab()
    print("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    return 0
