"""The lab as a stack STACK_NAME on the Swarm the Docker CLI points at, as a `Lab`
(the counterpart of compose.py's Compose), and the stack's convergence."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from labctl.config import knobs
from labctl.errors import SwarmError
from labctl.platform import docker as cli
from labctl.platform import stack as stack_file
from labctl.platform.compose import Compose
from labctl.platform.docker import docker
from labctl.polling import wait_until

UP_TIMEOUT_S = 420  # healthchecks' start periods are 60 s; a cold node pulls nothing (the images are local)
TASK_WAIT_S = 180
# A service with this many tasks failed or rejected since the wait began, and none
# running, keeps failing (an image no node has, a command that exits): waiting
# out UP_TIMEOUT_S would only hide why. A task that fails its healthcheck at start
# takes minutes to fail this often; a rejected one, seconds.
GIVE_UP_AFTER = 3
# spread() keeps a service off the nodes it must not use with constraints of this form.
HOSTNAME_CONSTRAINT = "node.hostname != "
ENDED = ("failed", "rejected")


def registry_of(image: str) -> str | None:
    """The registry an image reference names (`registry.example:5000/lab:1` ->
    `registry.example:5000`); None for Docker Hub's names and local tags."""
    first, sep, _ = image.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else None


def push(*images: str) -> None:
    """`docker push`: the engine the CLI talks to sends each image to its registry."""
    for image in images:
        docker("push", "--quiet", image, timeout=1800)


def swarm_state() -> str:
    """This engine's swarm state: inactive, active, pending, error, locked ('' without an engine)."""
    proc = docker("info", "--format", "{{.Swarm.LocalNodeState}}", check=False, timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else ""


class Swarm:
    """The stack STACK_NAME on the Swarm the Docker CLI points at, as a load run sees it."""

    def __init__(self, env: dict[str, str] | None = None, stack: str | None = None):
        self.env = dict(os.environ if env is None else env)
        self.stack = stack or self.env.get("STACK_NAME") or knobs().stack_name
        self.forwarder = f"{self.stack}-ports"

    def name(self, service: str) -> str:
        return f"{self.stack}_{service}"

    # -- the cluster ------------------------------------------------------------------------
    def nodes(self) -> list[dict[str, Any]]:
        ids = docker("node", "ls", "-q").stdout.split()
        return json.loads(docker("node", "inspect", *ids).stdout) if ids else []

    def node_roles(self) -> set[str]:
        return {n["Spec"].get("Labels", {}).get("lab.role") for n in self.nodes()} - {None}

    def hostnames(self) -> dict[str, str]:
        """node id -> its hostname (the name `docker node ls` shows)."""
        return {n["ID"]: n["Description"]["Hostname"] for n in self.nodes()}

    def node_states(self) -> dict[str, str]:
        """hostname -> ready, down, ... as the manager sees each node."""
        return {n["Description"]["Hostname"]: n["Status"]["State"] for n in self.nodes()}

    def nodes_with_role(self, role: str) -> list[str]:
        """The hostnames of the nodes labelled lab.role=<role>, sorted."""
        return sorted(
            n["Description"]["Hostname"] for n in self.nodes() if n["Spec"].get("Labels", {}).get("lab.role") == role
        )

    def here(self) -> str:
        """The id of the node the Docker CLI talks to (a manager: it runs `docker stack deploy`)."""
        return docker("info", "--format", "{{.Swarm.NodeID}}").stdout.strip()

    def deployed(self) -> list[str]:
        """The stack's services, by their compose names ([] when none, or no swarm)."""
        proc = docker("stack", "services", "--format", "{{.Name}}", self.stack, check=False, timeout=60)
        prefix = f"{self.stack}_"
        return sorted(n[len(prefix) :] for n in proc.stdout.split() if n.startswith(prefix))

    def tasks(self, service: str) -> list[dict[str, Any]]:
        """Every task of a service Swarm still keeps (running, and the last failed ones);
        a task pruned between the listing and its inspection is left out."""
        ids = docker("service", "ps", "-q", "--no-trunc", self.name(service), check=False, timeout=60).stdout.split()
        return cli.inspect_present(*ids)

    def running(self, service: str) -> list[dict[str, Any]]:
        return [t for t in self.tasks(service) if runs(t)]

    # -- what a load run asks ---------------------------------------------------------------
    def port(self, service: str, port: int) -> str | None:
        """host:port where `service`'s container `port` is reached: the node of a running task
        for what the stack publishes, 127.0.0.1 of the port forwarder for the rest."""
        proc = docker("service", "inspect", self.name(service), check=False, timeout=60)
        if proc.returncode != 0:
            return None
        ports = json.loads(proc.stdout)[0].get("Endpoint", {}).get("Spec", {}).get("Ports") or []
        for p in ports:
            if p.get("TargetPort") == port and p.get("PublishedPort"):
                tasks = self.running(service)
                if not tasks:
                    return None
                node = json.loads(docker("node", "inspect", tasks[0]["NodeID"]).stdout)[0]
                return f"{node['Status']['Addr']}:{p['PublishedPort']}"
        return self.forwarded().get((service, port))

    def forwarded(self) -> dict[tuple[str, int], str]:
        """(service, container port) -> address:port, from the running port forwarder's
        command and the address it publishes on (127.0.0.1 unless STACK_PUBLISH_IP)."""
        fmt = "{{json .Config.Cmd}}\t{{json .HostConfig.PortBindings}}\t{{.State.Running}}"
        proc = docker("inspect", "--format", fmt, self.forwarder, check=False)
        if proc.returncode != 0 or not proc.stdout.strip().endswith("true"):
            return {}
        cmd, bindings, _ = proc.stdout.strip().split("\t")
        return forwards_of(json.loads(cmd), json.loads(bindings) or {})

    def ids(self, service: str, include_stopped: bool = False) -> list[str]:
        """This node's containers of the service, newest first (make load reads the
        Locust master's log and report here: the override places it on this node)."""
        label = f"label=com.docker.swarm.service.name={self.name(service)}"
        return docker("ps", "-q", *(["--all"] if include_stopped else []), "--filter", label).stdout.split()

    def inspect(self, service: str) -> list[dict[str, Any]]:
        """One `docker inspect`-shaped entry per running task (task_containers)."""
        return task_containers(self.name(service), self.tasks(service))

    def remove(self, *services: str) -> None:
        present = set(self.deployed())
        names = [self.name(s) for s in services if s in present]
        if names:
            docker("service", "rm", *names, check=False, timeout=120)
            # Until this node has no container of the services left (a new run reuses their names).
            wait_until(lambda: not any(self.ids(s, include_stopped=True) for s in services), timeout_s=60)

    def start_load(self, services: tuple[str, ...], env: dict[str, str]) -> None:
        """Deploy a run's one-off services (the profile `load`) into the running stack
        with the run's environment, and wait for their containers on this node."""
        if "locust-master" in services:  # as compose's `up --build` does: an edit of lab/ reaches Locust
            Compose(self.env)("build", "locust-master", timeout=900)
            image = self.env.get("LAB_IMAGE") or knobs().lab_image
            if registry_of(image):  # the Locust workers' nodes pull it there
                push(f"{image}-load")
        path = stack_file.render(
            list(services),
            profiles=("load",),
            env={**self.env, **env},
            node_roles=self.node_roles(),
            here=self.here(),
            out=stack_file.BUILD_DIR / "load.yml",
        ).path
        docker("stack", "deploy", "--resolve-image", "never", "--detach=true", "-c", str(path), self.stack, timeout=300)
        local = [s for s in services if s in ("locust-master", "probe")]
        if not wait_until(lambda: all(self.ids(s, include_stopped=True) for s in local), timeout_s=TASK_WAIT_S):
            raise SwarmError(f"{local} did not start within {TASK_WAIT_S} s: docker service ps {self.name(local[0])}")

    def exec(self, service: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        ids = self.ids(service)
        if not ids:
            return subprocess.CompletedProcess(cmd, 1, "", f"{service}: no running container on this node")
        return docker("exec", ids[0], *cmd, check=False, timeout=timeout)

    def reload_prometheus(self) -> bool:
        """The stack's Prometheus config is a Swarm config of this checkout (make stack-up): nothing to reload."""
        return False

    def replicas(self, service: str) -> int:
        return len(self.running(service))

    def scale(self, service: str, replicas: int) -> None:
        """`docker service scale`; waits until exactly `replicas` tasks run, healthy."""
        docker("service", "scale", "--detach=true", f"{self.name(service)}={replicas}", timeout=120)
        wait_converged(self, {service: replicas}, timeout=UP_TIMEOUT_S)

    def placement(self) -> dict[str, list[str]]:
        """service -> the nodes (hostnames) its running tasks run on, one entry per task."""
        proc = docker(
            "stack", "ps", "--filter", "desired-state=running", "--format", "{{.Name}} {{.Node}} {{.CurrentState}}",
            self.stack, check=False, timeout=60,
        )  # fmt: skip
        return placement_of(proc.stdout if proc.returncode == 0 else "", self.stack)

    def clock(self) -> float:
        """The manager's time now: what tasks' CreatedAt is compared with (its clock, not ours)."""
        return unix_time(docker("info", "--format", "{{.SystemTime}}", timeout=60).stdout.strip()) or time.time()

    def _force_update(self, service: str, want: int, *flags: str) -> None:
        """`service update --force` with `flags`: every task replaced; waits until `want`
        new ones run, healthy."""
        since = self.clock()
        docker("service", "update", "--detach=true", "--force", *flags, self.name(service), timeout=120)
        wait_converged(self, {service: want}, timeout=UP_TIMEOUT_S, since=since, replaced=True)

    def rebalance(self, service: str) -> None:
        """Every task of the service replaced (`service update --force`): the scheduler
        spreads the new ones over the nodes it may use, as at a deploy."""
        self._force_update(service, len(self.running(service)))

    def _place(self, service: str, replicas: int, per_node: int, nodes: list[str] | None) -> None:
        """`replicas` new tasks, at most `per_node` a node (0: no cap), on `nodes` alone
        (None: no constraint on a hostname)."""
        spec = json.loads(docker("service", "inspect", self.name(service)).stdout)[0]["Spec"]
        current = ((spec["TaskTemplate"].get("Placement") or {}).get("Constraints")) or []
        ours = [c for c in current if c.startswith(HOSTNAME_CONSTRAINT)]
        others = [] if nodes is None else sorted(set(self.node_states()) - set(nodes))
        excluded = [f"{HOSTNAME_CONSTRAINT}{n}" for n in others]
        changes = [arg for c in ours if c not in excluded for arg in ("--constraint-rm", c)]
        changes += [arg for c in excluded if c not in ours for arg in ("--constraint-add", c)]
        flags = ("--replicas", str(replicas), "--replicas-max-per-node", str(per_node))
        self._force_update(service, replicas, *flags, *changes)

    def spread(self, service: str, nodes: list[str], per_node: int) -> None:
        """The service's tasks on exactly these nodes, `per_node` on each: every other
        node excluded by a constraint on its hostname (the stack's own constraints
        kept), at most `per_node` a node; waits until they all run, healthy."""
        self._place(service, per_node * len(nodes), per_node, nodes)

    def unspread(self, service: str, replicas: int) -> None:
        """spread() undone: no constraint on a hostname, no cap per node, `replicas` tasks."""
        self._place(service, replicas, 0, None)

    def describe(self) -> dict[str, Any]:
        nodes = [n for n in self.nodes() if n["Status"]["State"] == "ready"]
        return {
            "orchestrator": "swarm",
            "stack": self.stack,
            "nodes": len(nodes),
            "node_roles": sorted({n["Spec"].get("Labels", {}).get("lab.role") or "-" for n in nodes}),
            "placement": self.placement(),
        }


def runs(task: dict[str, Any]) -> bool:
    """A task that runs and is meant to (not one shutting down)."""
    return bool(task["Status"]["State"] == "running" and task["DesiredState"] == "running")


def task_containers(name: str, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A service's running tasks as `docker inspect` would show their containers, from
    each task's spec (the node that runs it may be another): limits, environment,
    restarts. Swarm replaces a failed task by a new one in the same slot: those are
    the restarts; it keeps no OOM flag, so a task killed by SIGKILL (exit 137) counts as one."""
    out = []
    for task in filter(runs, tasks):
        failed = [t for t in tasks if t.get("Slot") == task.get("Slot") and t["Status"]["State"] == "failed"]
        limits = task["Spec"].get("Resources", {}).get("Limits", {})
        last_exit = failed[0]["Status"].get("ContainerStatus", {}).get("ExitCode") if failed else None
        out.append(
            {
                "Name": f"{name}.{task.get('Slot') or task['NodeID'][:12]}",
                "HostConfig": {"NanoCpus": limits.get("NanoCPUs", 0), "Memory": limits.get("MemoryBytes", 0)},
                "Config": {"Env": task["Spec"]["ContainerSpec"].get("Env") or []},
                "RestartCount": len(failed),
                "State": {"OOMKilled": last_exit == 137},
            }
        )
    return sorted(out, key=lambda c: c["Name"])


def forwards_of(cmd: list[str], bindings: dict[str, Any]) -> dict[tuple[str, int], str]:
    """The port forwarder's `python -m services.port_forward LISTEN=SERVICE:PORT ...` and
    its port bindings as (service, container port) -> address:port."""
    out = {}
    for spec in cmd[3:]:
        listen, _, target = spec.partition("=")
        host, _, port = target.rpartition(":")
        ip = ((bindings.get(f"{listen}/tcp") or [{}])[0].get("HostIp")) or "127.0.0.1"
        out[(host, int(port))] = f"{ip}:{listen}"
    return out


def by_node(placement: dict[str, list[str]]) -> dict[str, list[str]]:
    """service -> nodes turned around: node -> the services with a task there."""
    out: dict[str, list[str]] = {}
    for service, nodes in placement.items():
        for node in dict.fromkeys(nodes):
            out.setdefault(node, []).append(service)
    return out


def placement_of(text: str, stack: str) -> dict[str, list[str]]:
    """`docker stack ps --format '{{.Name}} {{.Node}} {{.CurrentState}}'` lines as
    service -> the nodes of its running tasks (a task's name is <stack>_<service>.<slot>)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[2] != "Running" or not parts[0].startswith(f"{stack}_"):
            continue
        service = parts[0][len(stack) + 1 :].rsplit(".", 1)[0]
        out.setdefault(service, []).append(parts[1])
    return {service: sorted(nodes) for service, nodes in sorted(out.items())}


def unix_time(text: str | None) -> float:
    """An engine's RFC 3339 time (nanoseconds and all) as a unix time; 0 if unreadable."""
    try:
        return datetime.fromisoformat(text or "").timestamp()
    except ValueError:
        return 0.0


def stamp(task: dict[str, Any]) -> float:
    """When the task's state last changed (its Status.Timestamp)."""
    return unix_time((task.get("Status") or {}).get("Timestamp"))


def created(task: dict[str, Any]) -> float:
    """When the Swarm made the task (a replacement is a new task)."""
    return unix_time(task.get("CreatedAt"))


def service_state(
    tasks: list[dict[str, Any]], want: int, since: float, replaced: bool = False
) -> tuple[str | None, list[str]]:
    """(`running/wanted` while a service is not at its replicas or a task of it is still
    shutting down, else None; the distinct errors of its tasks that failed or were
    rejected since `since`, newest first). `replaced`: only tasks made since `since`
    count as running (an update that replaces every task)."""
    running = [t for t in tasks if runs(t) and (not replaced or created(t) >= since)]
    stopping = [t for t in tasks if t["Status"]["State"] == "running" and t["DesiredState"] != "running"]
    ended = sorted((t for t in tasks if t["Status"]["State"] in ENDED and stamp(t) >= since), key=stamp, reverse=True)
    errors = list(dict.fromkeys(f"{t['Status']['State']}: {t['Status'].get('Err') or '?'}" for t in ended))
    if len(running) == want and not stopping:
        return None, errors
    state = f"{len(running)}/{want}" + (f" ({len(stopping)} stopping)" if stopping else "")
    if ended:
        state += f", {len(ended)} task(s) ended: {errors[0]}"
    if len(ended) >= GIVE_UP_AFTER and not running:
        state += " (keeps failing)"
    return state, errors


def wait_converged(
    swarm: Swarm,
    expected: dict[str, int],
    timeout: float = UP_TIMEOUT_S,
    say: Callable[[str], None] | None = None,
    since: float | None = None,
    replaced: bool = False,
) -> None:
    """Until each service runs exactly its replicas (a task with a healthcheck runs once
    healthy) and no task it is shutting down still runs. A service whose tasks fail or
    are rejected is named with its error as soon as it is seen; one that keeps failing
    (GIVE_UP_AFTER tasks ended since `since`, default now, none running) ends the wait."""
    since = time.time() - 1 if since is None else since
    shown: dict[str, str] = {}
    behind: dict[str, str] = {}

    def listed(states: dict[str, str], sep: str = "; ") -> str:
        return sep.join(f"{s} {n}" for s, n in sorted(states.items()))

    def converged() -> bool:
        nonlocal shown, behind
        behind = {}
        for service, want in expected.items():
            state, _ = service_state(swarm.tasks(service), want, since, replaced)
            if state is not None:
                behind[service] = state
        if behind and say and behind != shown:  # a line when something changed
            say(f"waiting for {len(behind)} service(s): " + listed(behind, ", "))
            shown = behind
        failing = {s: state for s, state in behind.items() if state.endswith("(keeps failing)")}
        if failing:
            raise SwarmError("service(s) that keep failing: " + listed(failing))
        return not behind

    if not wait_until(converged, timeout_s=timeout, every_s=3):
        raise SwarmError(f"not converged after {timeout:.0f} s: " + listed(behind))
