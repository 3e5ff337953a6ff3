"""What an experiment asks of the lab it drives, on the compose project or a
Swarm stack alike: compose.py's Compose and swarm.py's Swarm both are a `Lab`."""

from __future__ import annotations

import subprocess
from typing import Any, Protocol, runtime_checkable

from labctl.polling import wait_until


@runtime_checkable
class Lab(Protocol):
    env: dict[str, str]

    def port(self, service: str, port: int) -> str | None:
        """host:port where the service's container `port` is reached, or None."""

    def ids(self, service: str, include_stopped: bool = False) -> list[str]:
        """The service's container ids (on this node)."""

    def inspect(self, service: str) -> list[dict[str, Any]]:
        """One `docker inspect`-shaped entry per running container of the service."""

    def remove(self, *services: str) -> None:
        """The services' containers stopped and removed."""

    def start_load(self, services: tuple[str, ...], env: dict[str, str]) -> None:
        """A run's one-off services (the profile `load`) started with its environment."""

    def exec(self, service: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command in the service's (first) container; its exit code is the caller's to read."""

    def reload_prometheus(self) -> bool:
        """Prometheus made to read its configuration again; False where there is nothing to reload."""

    def scale(self, service: str, replicas: int) -> None:
        """The service at exactly `replicas` replicas, each healthy."""

    def replicas(self, service: str) -> int:
        """How many replicas of the service run."""

    def describe(self) -> dict[str, Any]:
        """Where a run ran, for its record."""


def answers(lab: Lab, service: str, port: int, path: str, within_s: float = 60, every_s: float = 1) -> bool:
    """Whether GET <path> on the service's <port> answers 200 within `within_s`,
    asked as its own healthcheck asks (services/healthcheck.sh, in its container)."""
    probe = ("bash", "/app/services/healthcheck.sh", str(port), path)
    return wait_until(lambda: lab.exec(service, *probe).returncode == 0, timeout_s=within_s, every_s=every_s)
