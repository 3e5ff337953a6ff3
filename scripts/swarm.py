"""The lab on a Docker Swarm: `make stack-up` / `make stack-down`, the stack's
side of what a load run asks of the lab (Swarm, the counterpart of
scripts/compose.py's Compose), and a single-node trial swarm left cleanly.

    uv run python -m scripts.swarm up [--services "api redis ..."]   # make stack-up
    uv run python -m scripts.swarm down                              # make stack-down
    uv run python -m scripts.swarm leave      # leave a trial swarm, restart the engine, check names resolve

`up` builds the lab's images, writes the stack file (scripts/stack.py), deploys
it as the stack STACK_NAME (default `lab`) to the Swarm the Docker CLI points at,
waits until every service runs every replica healthy, then starts the port
forwarder: a plain container on the stack's network that publishes on 127.0.0.1
what compose publishes there and the stack does not (Prometheus, Flower, the SAQ
UI), at the same ports. The API and Grafana are published by the stack itself,
in mode host, on the node that runs each (docs/swarm.md).

`leave`: a swarm initialised on a standalone engine and left again leaves the
engine unable to resolve names for new containers on its bridge networks until
it restarts: the engine is restarted (ENGINE_RESTART, systemd's docker unit, or
../shared/offline-docker/start-engine) and a fresh container must resolve another
one's name.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

from scripts import stack as stack_file
from scripts.compose import ROOT, Compose, LoadError, setting

UP_TIMEOUT_S = 420  # healthchecks' start periods are 60 s; a cold node pulls nothing (the images are local)
TASK_WAIT_S = 180
OFFLINE_START_ENGINE = ROOT.parent / "shared" / "offline-docker" / "start-engine"
DOCKERD_PIDFILE = Path("/var/run/docker.pid")


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise LoadError(f"`docker {' '.join(args)}` did not finish within {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        raise LoadError(f"`docker {' '.join(args)}` exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
    return proc


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
            self._wait_gone(services)

    def _wait_gone(self, services: tuple[str, ...]) -> None:
        """Until this node has no container of the services left (a new run reuses their names)."""
        deadline = time.monotonic() + 60
        while any(self.ids(s, include_stopped=True) for s in services) and time.monotonic() < deadline:
            time.sleep(1)

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
        deadline = time.monotonic() + TASK_WAIT_S
        local = [s for s in services if s in ("locust-master", "probe")]
        while not all(self.ids(s, include_stopped=True) for s in local):
            if time.monotonic() > deadline:
                raise LoadError(
                    f"{local} did not start within {TASK_WAIT_S} s: docker service ps {self.name(local[0])}"
                )
            time.sleep(1)

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


def orchestrator(env: dict[str, str] | None = None) -> Compose | Swarm:
    """What make load/results/scale drive: LAB_ORCHESTRATOR=compose|swarm, or (auto)
    the compose project when its API runs, else the stack when one is deployed."""
    env = dict(os.environ if env is None else env)
    choice = env.get("LAB_ORCHESTRATOR") or setting("LAB_ORCHESTRATOR", "auto")
    if choice not in ("auto", "compose", "swarm"):
        raise LoadError(f"LAB_ORCHESTRATOR={choice}: auto, compose or swarm")
    if choice == "swarm":
        return Swarm(env)
    compose = Compose(env)
    if choice == "compose" or compose.port("api", 8000):
        return compose
    swarm = Swarm(env)
    return swarm if swarm_state() == "active" and swarm.deployed() else compose


# -- make stack-up / make stack-down ----------------------------------------------------------
def wait_converged(swarm: Swarm, expected: dict[str, int], timeout: float = UP_TIMEOUT_S, say=None) -> None:
    """Until each service runs exactly its replicas (a task with a healthcheck runs once
    healthy) and no task it is shutting down still runs."""
    deadline = time.monotonic() + timeout
    shown = None
    while True:
        behind = {}
        for service, want in expected.items():
            tasks = swarm.tasks(service)
            running = [t for t in tasks if t["Status"]["State"] == "running" and t["DesiredState"] == "running"]
            stopping = [t for t in tasks if t["Status"]["State"] == "running" and t["DesiredState"] != "running"]
            if len(running) != want or stopping:
                behind[service] = f"{len(running)}/{want}" + (f" ({len(stopping)} stopping)" if stopping else "")
        if not behind:
            return
        if time.monotonic() > deadline:
            errors = {s: _task_errors(swarm, s) for s in behind}
            raise LoadError(f"not converged after {timeout:.0f} s: {behind}; task errors: {errors}")
        if say and behind != shown:  # a line when something changed
            say(f"waiting for {len(behind)} service(s): " + ", ".join(f"{s} {n}" for s, n in sorted(behind.items())))
            shown = behind
        time.sleep(3)


def _task_errors(swarm: Swarm, service: str) -> list[str]:
    return sorted({t["Status"].get("Err") for t in swarm.tasks(service) if t["Status"].get("Err")})[-3:]


def start_forwarder(swarm: Swarm, image: str, forwards: list[tuple[str, int, int]]) -> None:
    """The port forwarder on 127.0.0.1 of this node: (service, host port, container port) each."""
    docker("rm", "--force", swarm.forwarder, check=False)
    if not forwards:
        return
    publish = [arg for _, host, _ in forwards for arg in ("-p", f"127.0.0.1:{host}:{host}")]
    specs = [f"{host}={service}:{target}" for service, host, target in forwards]
    docker(
        "run", "--detach", "--init", "--restart", "unless-stopped", "--name", swarm.forwarder,
        "--label", f"lab.stack={swarm.stack}", "--network", f"{swarm.stack}_default", *publish,
        image, "python", "-m", "services.port_forward", *specs,
    )  # fmt: skip


def up(services: list[str] | None) -> int:
    swarm = Swarm()
    if swarm_state() != "active":
        raise LoadError("this Docker engine is in no swarm: `docker swarm init` (docs/swarm.md)")
    print("building the lab's images (docker compose build api locust-master) ...", flush=True)
    Compose(swarm.env)("build", "api", "locust-master", timeout=1800)
    rendered = stack_file.render(services, node_roles=swarm.node_roles(), here=swarm.here())
    print(f"stack file: {rendered.path.relative_to(ROOT)}; deploying the stack {swarm.stack} ...", flush=True)
    deploy = ("stack", "deploy", "--prune", "--resolve-image", "never", "--detach=true")
    docker(*deploy, "-c", str(rendered.path), swarm.stack, timeout=300)
    expected = {name: s["deploy"].get("replicas", 1) for name, s in rendered.stack["services"].items()}
    wait_converged(swarm, expected, say=lambda line: print(line, flush=True))
    start_forwarder(swarm, setting("LAB_IMAGE", "task-queue-lab:local"), rendered.forwards)
    print(f"stack {swarm.stack}: {len(expected)} services running on {swarm.describe()['nodes']} node(s)")
    for service, target in (("api", 8000), ("grafana", 3000), ("prometheus", 9090), ("flower", 5555), ("saq-ui", 8082)):
        if service in expected and (addr := swarm.port(service, target)):
            print(f"  {service:<11} http://{addr}/")
    return 0


def down() -> int:
    swarm = Swarm()
    docker("rm", "--force", swarm.forwarder, check=False)
    if swarm_state() != "active" or not swarm.deployed():
        print(f"no stack {swarm.stack} deployed")
        return 0
    docker("stack", "rm", swarm.stack)
    deadline = time.monotonic() + 180
    network = f"{swarm.stack}_default"
    while swarm.deployed() or docker("network", "inspect", network, check=False).returncode == 0:
        if time.monotonic() > deadline:
            raise LoadError(f"the stack {swarm.stack} was not gone after 180 s: docker stack ps {swarm.stack}")
        time.sleep(2)
    print(f"stack {swarm.stack} removed (its volumes are kept: docker volume ls)")
    return 0


# -- Leaving a trial swarm -------------------------------------------------------------------
def restart_engine() -> str:
    """Restart the Docker engine: ENGINE_RESTART (a shell command), else systemd's docker
    unit, else the offline engine's dockerd (stopped by its pid file) and start-engine."""
    command = setting("ENGINE_RESTART", "")
    if command:
        subprocess.run(command, shell=True, check=True, timeout=300)
        how = command
    elif subprocess.run(["systemctl", "is-active", "--quiet", "docker"], capture_output=True).returncode == 0:
        subprocess.run(["systemctl", "restart", "docker"], check=True, timeout=300)
        how = "systemctl restart docker"
    elif OFFLINE_START_ENGINE.exists() and DOCKERD_PIDFILE.exists():
        pid = int(DOCKERD_PIDFILE.read_text().strip())
        os.kill(pid, 15)
        deadline = time.monotonic() + 120
        while Path(f"/proc/{pid}").exists():
            if time.monotonic() > deadline:
                raise LoadError(f"dockerd (pid {pid}) did not stop within 120 s")
            time.sleep(0.5)
        subprocess.run([str(OFFLINE_START_ENGINE)], check=True, capture_output=True, timeout=300)
        how = f"dockerd {pid} stopped, {OFFLINE_START_ENGINE.name} again"
    else:
        raise LoadError("no way to restart the Docker engine here: set ENGINE_RESTART to the command that does")
    deadline = time.monotonic() + 120
    while docker("info", check=False, timeout=60).returncode != 0:
        if time.monotonic() > deadline:
            raise LoadError("the Docker engine did not answer within 120 s of its restart")
        time.sleep(1)
    return how


def resolves_on(network: str, image: str) -> bool:
    """A new container on `network` resolves its own name (the engine's embedded DNS answers there)."""
    name = f"lab-dns-check-{secrets.token_hex(4)}"
    code = f"import socket; socket.gethostbyname({name!r})"
    proc = docker("run", "--rm", "--name", name, "--network", network, image, "python", "-c", code, check=False)
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
    """Leave this engine's swarm and restart the engine; what was done. LoadError when
    a new container resolves no name on some bridge network afterwards."""
    if swarm_state() in ("active", "pending", "error"):
        docker("swarm", "leave", "--force", timeout=120)
    how = restart_engine()
    docker("network", "rm", "docker_gwbridge", check=False)  # made by the swarm; unused once it is left
    if broken := names_resolve(image):
        raise LoadError(f"after leaving the swarm and restarting the engine ({how}), no name resolves on {broken}")
    return how


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.swarm", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="deploy the stack and wait until every service is healthy")
    up_parser.add_argument("--services", default="", help="compose services (default: every one outside a profile)")
    sub.add_parser("down", help="remove the stack and the port forwarder")
    sub.add_parser("leave", help="leave this engine's swarm, restart the engine, check that names resolve")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            return up(args.services.split() or None)
        if args.command == "down":
            return down()
        print(leave(setting("LAB_IMAGE", "task-queue-lab:local")))
        return 0
    except LoadError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
