"""The lab as a stack STACK_NAME on the Swarm the Docker CLI points at, as a `Lab`
(the counterpart of compose.py's Compose), and the stack's convergence."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable

from labctl.config import setting
from labctl.errors import SwarmError
from labctl.platform import docker as cli
from labctl.platform import stack as stack_file
from labctl.platform.compose import Compose
from labctl.polling import wait_until

UP_TIMEOUT_S = 420  # healthchecks' start periods are 60 s; a cold node pulls nothing (the images are local)
TASK_WAIT_S = 180


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return cli.docker(*args, check=check, timeout=timeout)


def swarm_state() -> str:
    """This engine's swarm state: inactive, active, pending, error, locked ('' without an engine)."""
    proc = docker("info", "--format", "{{.Swarm.LocalNodeState}}", check=False, timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else ""


class Swarm:
    """The stack STACK_NAME on the Swarm the Docker CLI points at, as a load run sees it."""

    def __init__(self, env: dict[str, str] | None = None, stack: str | None = None):
        self.env = dict(os.environ if env is None else env)
        self.stack = stack or self.env.get("STACK_NAME") or setting("STACK_NAME", "lab")
        self.forwarder = f"{self.stack}-ports"

    def name(self, service: str) -> str:
        return f"{self.stack}_{service}"

    # -- the cluster ------------------------------------------------------------------------
    def nodes(self) -> list[dict]:
        ids = docker("node", "ls", "-q").stdout.split()
        return json.loads(docker("node", "inspect", *ids).stdout) if ids else []

    def node_roles(self) -> set[str]:
        return {n["Spec"].get("Labels", {}).get("lab.role") for n in self.nodes()} - {None}

    def here(self) -> str:
        """The id of the node the Docker CLI talks to (a manager: it runs `docker stack deploy`)."""
        return docker("info", "--format", "{{.Swarm.NodeID}}").stdout.strip()

    def deployed(self) -> list[str]:
        """The stack's services, by their compose names ([] when none, or no swarm)."""
        proc = docker("stack", "services", "--format", "{{.Name}}", self.stack, check=False, timeout=60)
        prefix = f"{self.stack}_"
        return sorted(n[len(prefix) :] for n in proc.stdout.split() if n.startswith(prefix))

    def tasks(self, service: str) -> list[dict]:
        """Every task of a service Swarm still keeps (running, and the last failed ones)."""
        ids = docker("service", "ps", "-q", "--no-trunc", self.name(service), check=False, timeout=60).stdout.split()
        return json.loads(docker("inspect", *ids, timeout=60).stdout) if ids else []

    def running(self, service: str) -> list[dict]:
        return [t for t in self.tasks(service) if t["Status"]["State"] == "running" and t["DesiredState"] == "running"]

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
        """(service, container port) -> 127.0.0.1:port, from the running port forwarder's command."""
        proc = docker("inspect", "--format", "{{json .Config.Cmd}} {{.State.Running}}", self.forwarder, check=False)
        if proc.returncode != 0 or not proc.stdout.strip().endswith("true"):
            return {}
        out = {}
        for spec in json.loads(proc.stdout.rsplit(" ", 1)[0])[3:]:  # python -m services.port_forward SPEC...
            listen, _, target = spec.partition("=")
            host, _, port = target.rpartition(":")
            out[(host, int(port))] = f"127.0.0.1:{listen}"
        return out

    def ids(self, service: str, include_stopped: bool = False) -> list[str]:
        """This node's containers of the service, newest first (make load reads the
        Locust master's log and report here: the override places it on this node)."""
        label = f"label=com.docker.swarm.service.name={self.name(service)}"
        return docker("ps", "-q", *(["--all"] if include_stopped else []), "--filter", label).stdout.split()

    def inspect(self, service: str) -> list[dict]:
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

    def exec(self, service: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
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

    def describe(self) -> dict:
        nodes = [n for n in self.nodes() if n["Status"]["State"] == "ready"]
        return {
            "orchestrator": "swarm",
            "stack": self.stack,
            "nodes": len(nodes),
            "node_roles": sorted({n["Spec"].get("Labels", {}).get("lab.role") or "-" for n in nodes}),
        }


def task_containers(name: str, tasks: list[dict]) -> list[dict]:
    """A service's running tasks as `docker inspect` would show their containers, from
    each task's spec (the node that runs it may be another): limits, environment,
    restarts. Swarm replaces a failed task by a new one in the same slot: those are
    the restarts; it keeps no OOM flag, so a task killed by SIGKILL (exit 137) counts as one."""
    out = []
    for task in tasks:
        if task["Status"]["State"] != "running" or task["DesiredState"] != "running":
            continue
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


def _behind(swarm: Swarm, expected: dict[str, int]) -> dict[str, str]:
    """The services not yet at their replicas, or with a task still shutting down: service -> `running/wanted`."""
    behind = {}
    for service, want in expected.items():
        tasks = swarm.tasks(service)
        running = [t for t in tasks if t["Status"]["State"] == "running" and t["DesiredState"] == "running"]
        stopping = [t for t in tasks if t["Status"]["State"] == "running" and t["DesiredState"] != "running"]
        if len(running) != want or stopping:
            behind[service] = f"{len(running)}/{want}" + (f" ({len(stopping)} stopping)" if stopping else "")
    return behind


def wait_converged(
    swarm: Swarm, expected: dict[str, int], timeout: float = UP_TIMEOUT_S, say: Callable[[str], None] | None = None
) -> None:
    """Until each service runs exactly its replicas (a task with a healthcheck runs once
    healthy) and no task it is shutting down still runs."""
    shown: dict[str, str] = {}
    behind: dict[str, str] = {}

    def converged() -> bool:
        nonlocal shown, behind
        behind = _behind(swarm, expected)
        if behind and say and behind != shown:  # a line when something changed
            say(f"waiting for {len(behind)} service(s): " + ", ".join(f"{s} {n}" for s, n in sorted(behind.items())))
            shown = behind
        return not behind

    if not wait_until(converged, timeout_s=timeout, every_s=3):
        errors = {s: _task_errors(swarm, s) for s in behind}
        raise SwarmError(f"not converged after {timeout:.0f} s: {behind}; task errors: {errors}")


def _task_errors(swarm: Swarm, service: str) -> list[str]:
    return sorted({t["Status"].get("Err") for t in swarm.tasks(service) if t["Status"].get("Err")})[-3:]
