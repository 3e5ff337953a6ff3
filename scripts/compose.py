"""The compose project as the scripts see it: `docker compose` in the project
root, and the knobs compose reads from the environment and .env."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class LoadError(RuntimeError):
    """A run could not be made; the message says why and what to do."""


def dotenv() -> dict[str, str]:
    """KEY=VALUE lines of the env files compose reads: COMPOSE_ENV_FILES when set
    (the compose tests point it at an empty file), else the project's .env."""
    files = [Path(f) for f in os.environ.get("COMPOSE_ENV_FILES", "").split(",") if f] or [ROOT / ".env"]
    values = {}
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                values[key.strip()] = value.split(" #")[0].strip().strip("'\"")
    return values


def setting(name: str, default: str) -> str:
    """A knob from the environment, else the project's .env (as compose reads it), else the default."""
    return os.environ.get(name) or dotenv().get(name) or default


class Compose:
    """`docker compose --profile load ...` (or another profile) in the project root, with COMPOSE as the command.

    What a load run asks of the lab it drives (port, ids, inspect, remove,
    start_load, exec, reload_prometheus, scale, describe) has the same shape on
    a Swarm stack: scripts/swarm.py's Swarm."""

    def __init__(self, env: dict[str, str] | None = None, profile: str = "load"):
        self.env = dict(os.environ if env is None else env)
        self.cmd = shlex.split(self.env.get("COMPOSE") or "docker compose")
        self.profile = profile

    def __call__(
        self, *args: str, extra_env: dict[str, str] | None = None, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        cmd = [*self.cmd, "--profile", self.profile, *args]
        try:
            proc = subprocess.run(
                cmd,
                cwd=ROOT,
                env={**self.env, **(extra_env or {})},
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LoadError(f"`{' '.join(cmd)}` did not finish within {timeout:.0f} s") from None
        if check and proc.returncode != 0:
            raise LoadError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{(proc.stderr or proc.stdout)[-3000:]}")
        return proc

    def port(self, service: str, port: int) -> str | None:
        """host:port published for a running service, or None."""
        proc = self("port", service, str(port), check=False, timeout=60)
        addr = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else ""
        return addr if addr and not addr.endswith(":0") else None

    def ids(self, service: str, include_stopped: bool = False) -> list[str]:
        proc = self("ps", "-q", *(["--all"] if include_stopped else []), service, check=False, timeout=60)
        return proc.stdout.split() if proc.returncode == 0 else []

    def inspect(self, service: str) -> list[dict]:
        ids = self.ids(service)
        if not ids:
            return []
        proc = subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise LoadError(f"docker inspect {service}: {proc.stderr.strip()}")
        return json.loads(proc.stdout)

    def remove(self, *services: str) -> None:
        self("rm", "--stop", "--force", *services, check=False, timeout=120)

    def start_load(self, services: tuple[str, ...], env: dict[str, str]) -> None:
        """Start a run's one-off services (the profile `load`) with its environment; the lab's own are not touched."""
        self("up", "--detach", "--no-deps", "--force-recreate", "--build", *services, extra_env=env, timeout=900)

    def exec(self, service: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self("exec", "-T", service, *cmd, check=False, timeout=timeout)

    def answers(self, service: str, port: int, path: str, within_s: float = 60, every_s: float = 1) -> bool:
        """Whether GET <path> on the service's <port> answers 200 within `within_s`,
        asked as its own healthcheck asks (services/healthcheck.sh, in its container)."""
        deadline = time.monotonic() + within_s
        probe = ("bash", "/app/services/healthcheck.sh", str(port), path)
        while self.exec(service, *probe).returncode != 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(every_s)
        return True

    def reload_prometheus(self) -> bool:
        """prometheus.yml is a mounted file: a running Prometheus reads it again on SIGHUP."""
        return self("kill", "-s", "SIGHUP", "prometheus", check=False, timeout=60).returncode == 0

    def scale(self, service: str, replicas: int) -> None:
        """`up --scale`: replicas are added or removed, the others left as they run; waits until healthy."""
        self("up", "--detach", "--no-deps", "--no-recreate", "--wait", "--scale", f"{service}={replicas}", service)

    def replicas(self, service: str) -> int:
        return len(self.ids(service))

    def describe(self) -> dict:
        """Where a run ran, for its record."""
        project = self.env.get("COMPOSE_PROJECT_NAME") or "task-queue-lab"
        return {"orchestrator": "compose", "project": project, "nodes": 1}
