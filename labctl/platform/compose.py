"""The compose project: `docker compose --profile <profile> ...` in the project
root, with COMPOSE as the command, as a `Lab`."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from labctl.errors import DockerError
from labctl.platform import docker


class Compose:
    """`docker compose --profile load ...` (or another profile, or none) in the project root."""

    def __init__(self, env: dict[str, str] | None = None, profile: str | None = "load"):
        self.env = dict(os.environ if env is None else env)
        self.cmd = docker.compose_command(self.env)
        self.profile = profile

    def __call__(
        self, *args: str, extra_env: dict[str, str] | None = None, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return docker.run(
            [*self.cmd, *(["--profile", self.profile] if self.profile else []), *args],
            env={**self.env, **(extra_env or {})},
            check=check,
            timeout=timeout,
        )

    def port(self, service: str, port: int) -> str | None:
        proc = self("port", service, str(port), check=False, timeout=60)
        addr = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else ""
        return addr if addr and not addr.endswith(":0") else None

    def ids(self, service: str, include_stopped: bool = False) -> list[str]:
        proc = self("ps", "-q", *(["--all"] if include_stopped else []), service, check=False, timeout=60)
        return proc.stdout.split() if proc.returncode == 0 else []

    def running_services(self) -> list[str]:
        """The services of the project that run now (what `up` starts again as they were)."""
        return self("ps", "--services", "--status", "running", timeout=60).stdout.split()

    def running_ids(self) -> list[str]:
        """Every running container of the project."""
        return self("ps", "-q", "--status", "running", timeout=60).stdout.split()

    def inspect(self, service: str) -> list[dict[str, Any]]:
        ids = self.ids(service)
        try:
            return docker.inspect(*ids)
        except DockerError as exc:
            raise DockerError(f"docker inspect {service}: {exc}") from None

    def remove(self, *services: str) -> None:
        self("rm", "--stop", "--force", *services, check=False, timeout=120)

    def stop(self, *services: str) -> None:
        self("stop", *services, timeout=120)

    def start(self, *services: str, check: bool = True) -> None:
        self("start", *services, check=check, timeout=120)

    def restart(self, *services: str, extra_env: dict[str, str] | None = None) -> None:
        self("restart", *services, extra_env=extra_env, timeout=300)

    def start_service(self, service: str, extra_env: dict[str, str] | None = None, recreate: bool = False) -> None:
        """One service alone (`up -d --no-deps`), under `extra_env`; recreate: a new container even if unchanged."""
        self("up", "-d", "--no-deps", *(["--force-recreate"] if recreate else []), service, extra_env=extra_env)

    def build(self, *services: str) -> None:
        self("build", *services, timeout=900)

    def logs(self, service: str, tail: int = 20) -> str:
        return self("logs", f"--tail={tail}", service, check=False, timeout=60).stdout

    def redis_cli(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`redis-cli COMMAND...` in the project's Redis."""
        return self("exec", "-T", "redis", "redis-cli", *command, check=check, timeout=60)

    def start_one_off(
        self,
        service: str,
        name: str,
        variables: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        command: tuple[str, ...] = (),
    ) -> None:
        """A detached `docker compose run --rm --no-deps --name NAME` of `service` under other
        compose `variables`, with `env` inside it; `command`: an entrypoint and its arguments
        in place of the service's own. Removed with docker.remove_container(name)."""
        entry = ["--entrypoint", command[0]] if command else []
        self(
            "run", "--detach", "--rm", "--no-deps", "--name", name, *docker.env_flags(env), *entry, service,
            *command[1:], extra_env=variables, timeout=300,
        )  # fmt: skip

    def start_load(self, services: tuple[str, ...], env: dict[str, str]) -> None:
        """Start a run's one-off services with its environment; the lab's own are not touched."""
        self("up", "--detach", "--no-deps", "--force-recreate", "--build", *services, extra_env=env, timeout=900)

    def exec(self, service: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self("exec", "-T", service, *cmd, check=False, timeout=timeout)

    @contextmanager
    def one_off(self, service: str, variables: dict[str, str], env: dict[str, str]) -> Iterator[str]:
        """A container of `service` beside the lab's own (`docker compose run`: no service
        alias, so Prometheus does not scrape it), under other compose `variables` (its limits)
        and `env` inside it; its name, and removed on leaving."""
        project = self.env.get("COMPOSE_PROJECT_NAME") or "task-queue-lab"
        name = f"{project}-{service}-one-off-{secrets.token_hex(3)}"
        self.start_one_off(service, name, variables, env)
        try:
            yield name
        finally:
            docker.remove_container(name)

    def up(self, services: list[str], extra_env: dict[str, str] | None = None) -> None:
        """`make up`'s start: build, start what changed, wait until healthy; Prometheus reads its files again."""
        self("up", "-d", "--build", "--wait", "--remove-orphans", *services, extra_env=extra_env, timeout=1800)
        self.reload_prometheus()

    def reload_prometheus(self) -> bool:
        """prometheus.yml is a mounted file: a running Prometheus reads it again on SIGHUP."""
        return self("kill", "-s", "SIGHUP", "prometheus", check=False, timeout=60).returncode == 0

    def scale(self, service: str, replicas: int) -> None:
        """`up --scale`: replicas are added or removed, the others left as they run; waits until healthy."""
        self("up", "--detach", "--no-deps", "--no-recreate", "--wait", "--scale", f"{service}={replicas}", service)

    def replicas(self, service: str) -> int:
        return len(self.ids(service))

    def describe(self) -> dict[str, Any]:
        """Where a run ran, for its record."""
        project = self.env.get("COMPOSE_PROJECT_NAME") or "task-queue-lab"
        return {"orchestrator": "compose", "project": project, "nodes": 1}
