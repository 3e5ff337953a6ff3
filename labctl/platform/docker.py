"""The docker CLI, run one way: a timeout on every call, a DockerError with the
command and its output when it fails (unless check=False), and `docker pause`
retried when the cgroup freezer gives up on a forking container."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence

from labctl.config import ROOT
from labctl.errors import DockerError
from labctl.polling import wait_until

NO_SUCH_OBJECT = "Error: No such object: "


def run(
    cmd: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    """Run a docker (or compose) command in the project root, its output captured."""
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=ROOT,
            env=None if env is None else dict(env),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DockerError(f"`{' '.join(cmd)}` did not finish within {timeout:.0f} s") from None
    except OSError as exc:
        raise DockerError(f"`{' '.join(cmd)}` could not be started: {exc}") from None
    if check and proc.returncode != 0:
        raise DockerError(
            f"`{' '.join(cmd)}` exited {proc.returncode}:\n{(proc.stderr or proc.stdout).strip()[-3000:]}"
        )
    return proc


def docker(
    *args: str, check: bool = True, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess:
    return run(["docker", *args], check=check, timeout=timeout, input=input)


def popen(*args: str, stdin: bool = False) -> subprocess.Popen:
    """A long-running docker command (logs --follow, events, exec -i) with its output piped."""
    return subprocess.Popen(
        ["docker", *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stdin else subprocess.STDOUT,
        text=True,
    )


def compose_command(env: Mapping[str, str] | None = None) -> list[str]:
    """COMPOSE (default `docker compose`) as a command line."""
    return shlex.split((env if env is not None else os.environ).get("COMPOSE") or "docker compose")


def inspect(*ids: str, timeout: float = 60) -> list[dict]:
    return json.loads(docker("inspect", *ids, timeout=timeout).stdout) if ids else []


def inspect_present(*ids: str, timeout: float = 60) -> list[dict]:
    """`docker inspect` of the objects still there: one that went between the call
    that listed it and this one (a task Swarm pruned) is left out, not an error."""
    if not ids:
        return []
    proc = docker("inspect", *ids, check=False, timeout=timeout)
    return present(proc)


def present(proc: subprocess.CompletedProcess) -> list[dict]:
    """The objects a `docker inspect` printed; DockerError unless every error was "No such object"."""
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 0 and (not errors or not all(e.startswith(NO_SUCH_OBJECT) for e in errors)):
        raise DockerError(f"`docker inspect` exited {proc.returncode}:\n{(proc.stderr or proc.stdout).strip()[-3000:]}")
    return json.loads(proc.stdout) if proc.stdout.strip() else []


def state(container: str) -> dict | None:
    """The container's State as `docker inspect` has it, or None if it is gone."""
    proc = docker("inspect", "--format", "{{json .State}}", container, check=False, timeout=60)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def container_ids(name: str) -> list[str]:
    """The full id of a container started by name: its cgroup is named by it."""
    proc = docker("inspect", "-f", "{{.Id}}", name, check=False, timeout=60)
    return proc.stdout.split() if proc.returncode == 0 else []


def remove_container(name: str) -> None:
    """A container started by name (`run --name`): gone, running or not, and no error if it never was."""
    docker("rm", "--force", name, check=False, timeout=120)


def _freeze_call(action: str, container: str) -> bool:
    proc = docker(action, container, check=False, timeout=60)
    if proc.returncode == 0 or "is not paused" in proc.stderr or "is already paused" in proc.stderr:
        return True
    # The cgroup freezer gives up on a container whose processes fork as it
    # freezes them (RQ forks a work horse per job): try again.
    if "unable to freeze" not in proc.stderr:
        raise DockerError(f"docker {action} {container}: {proc.stderr.strip()}")
    return False


def freeze(container: str, action: str = "pause", tries: int = 5) -> None:
    """`docker pause` (or `unpause`) of one container: a retried call on several
    could read as done on one's "already paused" while another still failed to freeze."""
    if not wait_until(lambda: _freeze_call(action, container), timeout_s=None, tries=tries, every_s=0.1):
        raise DockerError(f"docker {action} {container}: unable to freeze after {tries} tries")


def engine_info() -> dict:
    """`docker info` as JSON ({} without an engine)."""
    try:
        proc = docker("info", "--format", "{{json .}}", check=False, timeout=30)
        return json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (DockerError, ValueError):
        return {}
