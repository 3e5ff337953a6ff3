"""make cluster-up / cluster-down: a cluster of Docker engines on this machine, the
test bed of the lab's Swarm stack (cluster/docker-compose.yml, docs/swarm.md).

`Cluster.up(n)` starts the registry and node-1..node-n (each a Docker engine in a
container, with its own CPU and memory limit) on this machine's engine, makes a
Swarm of the nodes (node-1 the manager, the others workers), labels each with
its role (`layout`) and puts into the registry every image a node would pull
from a public registry: the Docker Hub ones are found there by the nodes as a
mirror; the Dockerfile's bases are pulled on the manager, where the lab's
images are built (tagged with their own name when they come from another
registry than Docker Hub). Then `make stack-up`, the Docker CLI
pointed at node-1 (`Cluster.env`), builds the lab's images there, pushes them to
the registry and deploys the stack: what it does on a cluster of real machines.

`Cluster.down()` removes the compose project with its volumes: the nodes (their
swarm, images and containers with them) and the registry. Nothing is left on this
machine's engine but the images the nodes and the registry run.

`Cluster.kill(node)` / `Cluster.start(node)`: a node's container killed (its engine
and everything it runs, its network, at once) and started again, for make chaos
fault=kill-node.

This machine's engine is the one of the environment, except when DOCKER_HOST
points at the cluster's own manager (`eval "$(make -s cluster-env)"`): that one is
set aside, so cluster-down works from a shell pointed at the cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from typing import Any

import httpx

from labctl.config import ROOT, knobs
from labctl.errors import DockerError, ParamError, SwarmError
from labctl.platform import docker
from labctl.platform import stack as stack_file
from labctl.platform.swarm import registry_of
from labctl.polling import wait_until

COMPOSE_FILE = ROOT / "cluster" / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
# The registry's name on the cluster's network: the nodes pull from it as that.
REGISTRY = "registry:5000"
# The roles of the first nodes, in order (docs/swarm.md): Redis, the API, Locust's
# workers; every further node runs the queues' workers. CLUSTER_ROLES says otherwise.
FIRST_ROLES = ("broker", "lab", "load")
NODE_UP_S = 120
SWARM_READY_S = 120


def layout(n: int, roles: str = "") -> dict[str, str | None]:
    """node -> its lab.role: a single node carries none (everything runs there);
    from two nodes on, FIRST_ROLES and then `worker` (until a node carries
    `worker`, the queues' workers go where the API goes); or `roles`, node-1's
    first ("-": none), `worker` for the nodes it leaves out."""
    if n < 1:
        raise ParamError(f"nodes={n}: one or more")
    given = roles.split()
    unknown = sorted(set(given) - {*stack_file.ROLES, "-"} | ({"here"} & set(given)))
    if unknown:
        raise ParamError(f"CLUSTER_ROLES={roles!r}: {unknown} is no node role ({', '.join(stack_file.ROLES[:-1])}, -)")
    if given:
        named = [*given, *["worker"] * n][:n]
        return {f"node-{i}": None if role == "-" else role for i, role in enumerate(named, 1)}
    if n == 1:
        return {"node-1": None}
    return {f"node-{i}": FIRST_ROLES[i - 1] if i <= len(FIRST_ROLES) else "worker" for i in range(1, n + 1)}


def manager_url(env: dict[str, str] | None = None) -> str:
    port = (env or {}).get("CLUSTER_DOCKER_PORT") or knobs().cluster_docker_port
    return f"tcp://127.0.0.1:{port}"


def host_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a docker command for this machine's engine: a DOCKER_HOST
    that points at the cluster's manager set aside, the cluster's knobs filled in."""
    out = dict(os.environ if env is None else env)
    if out.get("DOCKER_HOST") == manager_url(out):
        del out["DOCKER_HOST"]
    given = {k.upper(): v for k, v in knobs() if k.startswith("cluster_")}  # the knobs CLUSTER_*, defaults and all
    return {**out, **{k: v for k, v in given.items() if not out.get(k)}}


def public_images(config: dict[str, Any], dockerfile_text: str) -> tuple[list[str], list[str]]:
    """The images the nodes need from public registries: (what the compose services
    run, every profile, but the lab's own, which make stack-up builds; the bases the
    Dockerfile builds from, its ARG ..._IMAGE defaults)."""
    lab = config["services"]["api"]["image"]
    images = {s["image"] for s in config["services"].values() if s.get("image") and not s.get("build")}
    bases = set(re.findall(r"(?m)^ARG \w+_IMAGE=(\S+)", dockerfile_text))
    return sorted(images - {lab, f"{lab}-load"} - bases), sorted(bases)


def registry_path(image: str) -> tuple[str, bool]:
    """(its path in the cluster's registry, whether the nodes find it there as a
    Docker Hub mirror): Docker Hub's names as Docker Hub spells them (`redis:7` is
    `library/redis:7`), another registry's whole (pulled and tagged by hand)."""
    if registry_of(image):
        return image, False
    return (image if "/" in image else f"library/{image}"), True


class Cluster:
    """The compose project of cluster/docker-compose.yml on this machine's engine."""

    def __init__(self, env: dict[str, str] | None = None):
        self.env = host_env(env)

    # -- the docker CLI, three ways --------------------------------------------------------
    def compose(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        cmd = [*docker.compose_command(self.env), "-f", str(COMPOSE_FILE), "-p", self.env["CLUSTER_PROJECT"], *args]
        return docker.run(cmd, env=self.env, check=check, timeout=timeout)

    def host(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A docker command on this machine's engine."""
        return docker.run(["docker", *args], env=self.env, check=check, timeout=timeout)

    def on(self, node: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A docker command on a node's own engine (inside its container)."""
        container = self.container(node)
        if not container:
            raise SwarmError(f"{node} is not running: make cluster-up")
        return self.host("exec", container, "docker", *args, check=check, timeout=timeout)

    def manager(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A docker command on the manager, node-1 (the Swarm's side of the cluster)."""
        env = {**self.env, "DOCKER_HOST": manager_url(self.env)}
        return docker.run(["docker", *args], env=env, check=check, timeout=timeout)

    # -- what runs -------------------------------------------------------------------------
    def declared(self) -> list[str]:
        """The nodes cluster/docker-compose.yml defines, node-1 first."""
        names = self.compose("config", "--services", timeout=60).stdout.split()
        return sorted((n for n in names if n.startswith("node-")), key=lambda n: int(n.split("-")[1]))

    def container(self, node: str) -> str | None:
        """The container of a node (or the registry), running or not; None if it has none."""
        ids = self.compose("ps", "--all", "-q", node, check=False, timeout=60).stdout.split()
        return ids[0] if ids else None

    def nodes(self) -> list[str]:
        """The nodes whose container exists, running or not, node-1 first."""
        return [n for n in self.declared() if self.container(n)]

    def ip(self, node: str) -> str:
        container = self.container(node)
        if not container:
            raise SwarmError(f"{node} is not running: make cluster-up")
        fmt = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
        ips = self.host("inspect", "--format", fmt, container).stdout.split()
        if not ips:
            raise SwarmError(f"{node} has no address on the cluster's network")
        return ips[0]

    def env_for_the_lab(self) -> dict[str, str]:
        """What make stack-up, make load, ... need to drive the lab on the cluster:
        the Docker CLI pointed at the manager, the lab's image in the cluster's
        registry, the port forwarder published on the manager's address here."""
        image = knobs().lab_image
        image = image if image.startswith(f"{REGISTRY}/") else f"{REGISTRY}/{image.rsplit('/', 1)[-1]}"
        return {"DOCKER_HOST": manager_url(self.env), "LAB_IMAGE": image, "STACK_PUBLISH_IP": self.ip("node-1")}

    # -- up ----------------------------------------------------------------------------------
    def up(self, n: int, say: Callable[[str], None]) -> None:
        declared = self.declared()
        if n > len(declared):
            raise ParamError(
                f"nodes={n}: {COMPOSE_FILE.relative_to(ROOT)} defines {len(declared)} (add node-{n} there)"
            )
        roles = layout(n, self.env["CLUSTER_ROLES"])
        wanted = list(roles)
        say(f"starting the registry and {', '.join(wanted)} ({self.env['CLUSTER_NODE_CPUS']} CPU, "
            f"{self.env['CLUSTER_NODE_MEM']} each) ...")  # fmt: skip
        self.compose("up", "--detach", "--wait", "registry", *wanted, timeout=NODE_UP_S + 60)
        self.form_swarm(wanted, say)
        self.remove_nodes([node for node in self.nodes() if node not in wanted], say)
        self.label(roles, say)
        self.seed_registry(say)

    def form_swarm(self, nodes: list[str], say: Callable[[str], None]) -> None:
        """node-1 the manager (its address on the cluster's network advertised), the others workers."""
        manager, address = nodes[0], self.ip(nodes[0])
        if self.swarm_state(manager) != "active":
            self.on(manager, "swarm", "init", "--advertise-addr", address)
        token = self.on(manager, "swarm", "join-token", "-q", "worker").stdout.strip()
        for node in nodes[1:]:
            if self.swarm_state(node) != "active":
                self.on(node, "swarm", "join", "--token", token, f"{address}:2377", timeout=120)
        # A node whose volume was lost joined again as a new node of the same name: the old one goes.
        listed = self.node_list()
        ready = {n["Description"]["Hostname"] for n in listed if n["Status"]["State"] == "ready"}
        for stale in [n for n in listed if n["Status"]["State"] != "ready" and n["Description"]["Hostname"] in ready]:
            self.manager("node", "rm", "--force", stale["ID"], check=False)

        def all_ready() -> bool:
            states = {n["Description"]["Hostname"]: n["Status"]["State"] for n in self.node_list()}
            return all(states.get(node) == "ready" for node in nodes)

        if not wait_until(all_ready, timeout_s=SWARM_READY_S, every_s=2):
            raise SwarmError(f"the nodes were not all ready after {SWARM_READY_S} s: docker node ls")
        say(f"swarm: {nodes[0]} the manager at {address}, {len(nodes) - 1} worker(s)")

    def swarm_state(self, node: str) -> str:
        return self.on(node, "info", "--format", "{{.Swarm.LocalNodeState}}").stdout.strip()

    def node_list(self) -> list[dict[str, Any]]:
        ids = self.manager("node", "ls", "-q").stdout.split()
        return docker.present(self.manager("node", "inspect", *ids, check=False)) if ids else []

    def remove_nodes(self, nodes: list[str], say: Callable[[str], None]) -> None:
        """Nodes beyond the count asked for: out of the swarm (their tasks go elsewhere), then removed."""
        for node in nodes:
            self.manager("node", "rm", "--force", node, check=False)
            self.compose("rm", "--stop", "--force", "--volumes", node, timeout=120)
            say(f"{node} removed")

    def label(self, roles: dict[str, str | None], say: Callable[[str], None]) -> None:
        labelled = {n["Description"]["Hostname"]: n["Spec"].get("Labels", {}) for n in self.node_list()}
        for node, role in roles.items():
            if role:
                self.manager("node", "update", "--label-add", f"lab.role={role}", node)
            elif "lab.role" in labelled.get(node, {}):
                self.manager("node", "update", "--label-rm", "lab.role", node)
        say("roles: " + ", ".join(f"{node} {role or '-'}" for node, role in roles.items()))

    def seed_registry(self, say: Callable[[str], None]) -> None:
        """Every public image the lab needs, from this machine's engine into the registry."""
        registry = f"127.0.0.1:{self.env['CLUSTER_REGISTRY_PORT']}"
        if not wait_until(lambda: self._registry_answers(registry), timeout_s=60):
            raise SwarmError(f"the cluster's registry does not answer at http://{registry}/v2/")
        config = stack_file.compose_config(self.env, profiles=("*",))
        images, bases = public_images(config, DOCKERFILE.read_text())
        missing = []
        for image in [*images, *bases]:
            if self.host("image", "inspect", image, check=False).returncode != 0:
                missing.append(image)
                continue
            path, mirrored = registry_path(image)
            self.host("tag", image, f"{registry}/{path}")
            try:
                self.host("push", "--quiet", f"{registry}/{path}", timeout=1800)
            finally:
                self.host("image", "rm", f"{registry}/{path}", check=False)  # the tag only
            if image in bases:
                # The manager builds the lab's image from it. The engine's builder (BuildKit)
                # asks a registry mirror over HTTPS only: the image is pulled by the engine
                # itself beforehand, and one of another registry is tagged with its own name.
                self.on("node-1", "pull", "--quiet", image if mirrored else f"{REGISTRY}/{path}", timeout=1800)
                if not mirrored:
                    self.on("node-1", "tag", f"{REGISTRY}/{path}", image)
            say(f"registry: {image}" + (" (pulled on node-1, which builds from it)" if image in bases else ""))
        if missing:
            say(f"not on this engine, so in no registry the nodes reach: {', '.join(missing)} "
                "(a service using one cannot start on the cluster)")  # fmt: skip

    def _registry_answers(self, registry: str) -> bool:
        try:
            return httpx.get(f"http://{registry}/v2/", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    # -- a node's death -------------------------------------------------------------------------
    def kill(self, node: str) -> None:
        """Its engine and everything it runs, its network, at once (SIGKILL to the container)."""
        container = self.container(node)
        if not container:
            raise ParamError(f"node={node}: no such node of the cluster ({', '.join(self.nodes())})")
        self.host("kill", container)

    def start(self, node: str) -> None:
        """The node's container started again; until its engine answers."""
        self.host("start", self.container(node) or node)
        if not wait_until(lambda: self.on(node, "info", check=False).returncode == 0, timeout_s=NODE_UP_S):
            raise SwarmError(f"{node}'s engine did not answer within {NODE_UP_S} s of its start")

    # -- down ---------------------------------------------------------------------------------
    def down(self, say: Callable[[str], None]) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout=600)
        project = self.env["CLUSTER_PROJECT"]
        left = self.host("ps", "--all", "-q", "--filter", f"label=com.docker.compose.project={project}").stdout
        if left.strip():
            raise DockerError(f"containers of the cluster left after compose down: {left.split()}")
        say("cluster removed: its nodes, their swarm, the registry and their volumes")


def nodes_table(cluster: Cluster) -> str:
    """`docker node ls` of the cluster's manager."""
    return cluster.manager("node", "ls", check=False).stdout.rstrip()
