"""make stack-up / make stack-down, and leaving a trial swarm cleanly.

`deploy` builds the lab's images, writes the stack file (stack.py), deploys it
as the stack STACK_NAME (default `lab`) to the Swarm the Docker CLI points at,
waits until every service runs every replica healthy, then starts the port
forwarder: a plain container on the stack's network that publishes on 127.0.0.1
what compose publishes there and the stack does not (Prometheus, Flower, the SAQ
UI), at the same ports. The API and Grafana are published by the stack itself,
in mode host, on the node that runs each (docs/swarm.md).

`leave`: a swarm initialised on a standalone engine and left again leaves the
engine unable to resolve names for new containers on its bridge networks until
it restarts: the engine is restarted (ENGINE_RESTART, systemd's docker unit, or
the offline engine's start-engine beside the checkout) and a fresh container
must resolve another one's name.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path

from labctl.config import ROOT, knobs
from labctl.errors import SwarmError
from labctl.platform import stack as stack_file
from labctl.platform.compose import Compose
from labctl.platform.docker import docker
from labctl.platform.swarm import Swarm, by_node, push, registry_of, swarm_state, wait_converged
from labctl.polling import wait_until

OFFLINE_START_ENGINE = ROOT.parent / "shared" / "offline-docker" / "start-engine"
DOCKERD_PIDFILE = Path("/var/run/docker.pid")
UI_PORTS = (("api", 8000), ("grafana", 3000), ("prometheus", 9090), ("flower", 5555), ("saq-ui", 8082))


def start_forwarder(swarm: Swarm, image: str, forwards: list[tuple[str, int, int]], ip: str = "127.0.0.1") -> None:
    """The port forwarder on `ip` of this node (127.0.0.1: reached from the node itself, or
    through an SSH tunnel): (service, host port, container port) each."""
    docker("rm", "--force", swarm.forwarder, check=False)
    if not forwards:
        return
    publish = [arg for _, host, _ in forwards for arg in ("-p", f"{ip}:{host}:{host}")]
    specs = [f"{host}={service}:{target}" for service, host, target in forwards]
    docker(
        "run", "--detach", "--init", "--restart", "unless-stopped", "--name", swarm.forwarder,
        "--label", f"lab.stack={swarm.stack}", "--network", f"{swarm.stack}_default", *publish,
        image, "python", "-m", "services.port_forward", *specs,
    )  # fmt: skip


def deploy(services: list[str] | None, say: Callable[[str], None]) -> None:
    swarm = Swarm()
    if swarm_state() != "active":
        raise SwarmError("this Docker engine is in no swarm: `docker swarm init` (docs/swarm.md)")
    image = swarm.env.get("LAB_IMAGE") or knobs().lab_image
    say("building the lab's images (docker compose build api locust-master) ...")
    Compose(swarm.env)("build", "api", "locust-master", timeout=1800)
    if registry := registry_of(image):
        say(f"pushing {image} and its -load twin to {registry}, where every node pulls them ...")
        push(image, f"{image}-load")
    rendered = stack_file.render(services, node_roles=swarm.node_roles(), here=swarm.here())
    say(f"stack file: {rendered.path.relative_to(ROOT)}; deploying the stack {swarm.stack} ...")
    deploy_args = ("stack", "deploy", "--prune", "--resolve-image", "never", "--detach=true")
    since = swarm.clock()
    docker(*deploy_args, "-c", str(rendered.path), swarm.stack, timeout=300)
    expected = {name: s["deploy"].get("replicas", 1) for name, s in rendered.stack["services"].items()}
    wait_converged(swarm, expected, say=say, since=since)
    start_forwarder(swarm, image, rendered.forwards, knobs().stack_publish_ip)
    where = swarm.describe()
    say(f"stack {swarm.stack}: {len(expected)} services running on {where['nodes']} node(s)")
    for node, names in sorted(by_node(where["placement"]).items()):
        say(f"  {node}: {' '.join(names)}")
    for service, target in UI_PORTS:
        if service in expected and (addr := swarm.port(service, target)):
            say(f"  {service:<11} http://{addr}/")


def remove(say: Callable[[str], None]) -> None:
    swarm = Swarm()
    docker("rm", "--force", swarm.forwarder, check=False)
    if swarm_state() != "active" or not swarm.deployed():
        say(f"no stack {swarm.stack} deployed")
        return
    docker("stack", "rm", swarm.stack)
    network = f"{swarm.stack}_default"

    def gone() -> bool:
        return not swarm.deployed() and docker("network", "inspect", network, check=False).returncode != 0

    if not wait_until(gone, timeout_s=180, every_s=2):
        raise SwarmError(f"the stack {swarm.stack} was not gone after 180 s: docker stack ps {swarm.stack}")
    say(f"stack {swarm.stack} removed (its volumes are kept: docker volume ls)")


# -- Leaving a trial swarm -------------------------------------------------------------------
def restart_engine() -> str:
    """Restart the Docker engine: ENGINE_RESTART (a shell command), else systemd's docker
    unit, else the offline engine's dockerd (stopped by its pid file) and start-engine."""
    command = knobs().engine_restart
    if command:
        subprocess.run(command, shell=True, check=True, timeout=300)
        how = command
    elif subprocess.run(["systemctl", "is-active", "--quiet", "docker"], capture_output=True).returncode == 0:
        subprocess.run(["systemctl", "restart", "docker"], check=True, timeout=300)
        how = "systemctl restart docker"
    elif OFFLINE_START_ENGINE.exists() and DOCKERD_PIDFILE.exists():
        pid = int(DOCKERD_PIDFILE.read_text().strip())
        os.kill(pid, 15)
        if not wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout_s=120, every_s=0.5):
            raise SwarmError(f"dockerd (pid {pid}) did not stop within 120 s")
        subprocess.run([str(OFFLINE_START_ENGINE)], check=True, capture_output=True, timeout=300)
        how = f"dockerd {pid} stopped, {OFFLINE_START_ENGINE.name} again"
    else:
        raise SwarmError("no way to restart the Docker engine here: set ENGINE_RESTART to the command that does")
    if not wait_until(lambda: docker("info", check=False, timeout=60).returncode == 0, timeout_s=120):
        raise SwarmError("the Docker engine did not answer within 120 s of its restart")
    return how


def resolves_on(network: str, image: str) -> bool:
    """A new container on `network` resolves its own name (the engine's embedded DNS answers there)."""
    name = f"lab-dns-check-{secrets.token_hex(4)}"
    proc = docker("run", "--rm", "--name", name, "--network", network, image, "getent", "hosts", name, check=False)
    return proc.returncode == 0


def bridge_networks() -> list[str]:
    """The user-defined bridge networks (a compose project's among them)."""
    names = docker("network", "ls", "--filter", "driver=bridge", "--format", "{{.Name}}").stdout.split()
    return [n for n in names if n not in ("bridge", "docker_gwbridge")]


def names_resolve(image: str) -> list[str]:
    """The bridge networks where a new container resolves no name: every one that
    exists (the trap hits networks older than the swarm) and a new one."""
    fresh = f"lab-dns-check-{secrets.token_hex(4)}"
    docker("network", "create", fresh)
    try:
        return [n for n in bridge_networks() if not resolves_on(n, image)]
    finally:
        docker("network", "rm", fresh, check=False)


def leave(image: str) -> str:
    """Leave this engine's swarm and restart the engine; what was done. SwarmError when
    a new container resolves no name on some bridge network afterwards."""
    if swarm_state() in ("active", "pending", "error"):
        docker("swarm", "leave", "--force", timeout=120)
    how = restart_engine()
    docker("network", "rm", "docker_gwbridge", check=False)  # made by the swarm; unused once it is left
    if broken := names_resolve(image):
        raise SwarmError(f"after leaving the swarm and restarting the engine ({how}), no name resolves on {broken}")
    return how
