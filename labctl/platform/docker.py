"""The docker CLI, run one way: a timeout on every call, a DockerError with the
command and its output when it fails (unless check=False), and `docker pause`
retried when the cgroup freezer gives up on a forking container."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

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
) -> subprocess.CompletedProcess[str]:
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
) -> subprocess.CompletedProcess[str]:
    return run(["docker", *args], check=check, timeout=timeout, input=input)


def popen(*args: str, stdin: bool = False) -> subprocess.Popen[str]:
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


def inspect(*ids: str, timeout: float = 60) -> list[dict[str, Any]]:
    return json.loads(docker("inspect", *ids, timeout=timeout).stdout) if ids else []


def inspect_present(*ids: str, timeout: float = 60) -> list[dict[str, Any]]:
    """`docker inspect` of the objects still there: one that went between the call
    that listed it and this one (a task Swarm pruned) is left out, not an error."""
    return present(docker("inspect", *ids, check=False, timeout=timeout)) if ids else []


def present(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The objects a `docker inspect` printed; DockerError unless every error was "No such object"."""
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 0 and (not errors or not all(e.startswith(NO_SUCH_OBJECT) for e in errors)):
        raise DockerError(f"`docker inspect` exited {proc.returncode}:\n{(proc.stderr or proc.stdout).strip()[-3000:]}")
    return json.loads(proc.stdout) if proc.stdout.strip() else []


def state(container: str) -> dict[str, Any] | None:
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


@dataclass
class Pause:
    """When the containers were frozen and thawed (before the wait for them to be healthy)."""

    frozen_at: float = 0.0
    thawed_at: float = 0.0


@contextmanager
def paused(ids: Sequence[str]) -> Iterator[Pause]:
    """The containers frozen meanwhile (`docker pause`), then all thawed (a failed freeze too) and healthy."""
    pause = Pause(frozen_at=time.time())
    try:
        for cid in ids:
            freeze(cid, "pause")
        yield pause
    finally:
        for cid in ids:
            freeze(cid, "unpause")
        pause.thawed_at = time.time()
        wait_healthy(ids)


def healthy(container: str) -> bool:
    """Whether the container is running and, if it has a healthcheck, passed its last one."""
    now = state(container)
    return bool(now and now.get("Running") and now.get("Health", {}).get("Status", "healthy") == "healthy")


def wait_healthy(containers: Sequence[str], timeout_s: float = 120) -> bool:
    """Until every container is healthy again. `docker pause` marks a container
    unhealthy at once, and it stays so until its next check passes: a
    `compose up --wait` (`make up`) meanwhile would fail on it."""
    return wait_until(lambda: all(healthy(c) for c in containers), timeout_s=timeout_s, every_s=0.5)


def engine_info() -> dict[str, Any]:
    """`docker info` as JSON ({} without an engine)."""
    try:
        proc = docker("info", "--format", "{{json .}}", check=False, timeout=30)
        return json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (DockerError, ValueError):
        return {}


# -- Named operations: the experiments reach the engine through these alone -----------------
def _error_of(proc: subprocess.CompletedProcess[str], what: str) -> str:
    return "" if proc.returncode == 0 else f"docker {what}: {proc.stderr.strip()[:200]}"


def kill_container(container: str) -> str:
    """SIGKILL to its main process; the error, "" when done."""
    return _error_of(docker("kill", "--signal", "KILL", container, check=False), f"kill {container}")


def start_container(container: str) -> str:
    return _error_of(docker("start", container, check=False), f"start {container}")


def restart_container(container: str) -> str:
    return _error_of(docker("restart", container, check=False), f"restart {container}")


def wait_exited(container: str, timeout: float = 60) -> bool:
    """Until the container has stopped (`docker wait`); False if that failed."""
    return docker("wait", container, check=False, timeout=timeout).returncode == 0


def set_memory(container: str, memory: int, swap: int) -> str:
    """Its memory limit and memory+swap (bytes), live; the error, "" when done."""
    proc = docker("update", "--memory", str(memory), "--memory-swap", str(swap), container, check=False)
    return _error_of(proc, f"update --memory {container}")


def nano_cpus(container: str) -> int:
    """Its CPU limit in billionths of a CPU (0: none, or not known)."""
    proc = docker("inspect", "-f", "{{.HostConfig.NanoCpus}}", container, check=False, timeout=60)
    return int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0


def set_cpus(container: str, cpus: float) -> None:
    docker("update", "--cpus", f"{cpus:g}", container, timeout=60)


def parse_bytes(text: str) -> float:
    """A size as docker stats writes it (a number, then B, KiB, MiB, GiB, kB, MB or GB) in bytes."""
    units = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9}
    text = text.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


def memory_used(container: str) -> float | None:
    """The memory it uses now (docker stats), in bytes; None if the engine did not say."""
    out = docker("stats", "--no-stream", "--format", "{{json .}}", container, check=False).stdout
    return parse_bytes(json.loads(out)["MemUsage"].split("/")[0]) if out.strip() else None


def run_python(container: str, script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`script` run by the container's python as root (`docker exec -i -u 0 ... python -`)."""
    return docker("exec", "-i", "-u", "0", container, "python", "-", *args, check=False, timeout=timeout, input=script)


def exec_in(container: str, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`docker exec CONTAINER COMMAND...`, its exit code the caller's to judge."""
    return docker("exec", container, *command, check=False, timeout=timeout)


def follow_events(container: str, event: str, since: float) -> subprocess.Popen[str]:
    """The engine's `event` events of one container from `since` (unix time) on, one action a line."""
    return popen(
        "events", "--since", f"{since:.3f}", "--filter", f"container={container}", "--filter", f"event={event}",
        "--format", "{{.Action}}",
    )  # fmt: skip


def follow_logs(container: str) -> subprocess.Popen[str]:
    """Its output (stdout and stderr) as it comes, until the container stops."""
    return popen("logs", "--follow", container)


def exec_interactive(container: str, *command: str) -> subprocess.Popen[str]:
    """`docker exec -i`: a process in the container, spoken to through its stdin and stdout."""
    return popen("exec", "-i", container, *command, stdin=True)


def copy_out(container: str, src: str, dest: str) -> bool:
    """A file copied out of a container (running or exited); False if it is not there."""
    return docker("cp", f"{container}:{src}", dest, check=False, timeout=60).returncode == 0


def address(container: str) -> str:
    """Its first IP address on its networks."""
    out = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container)
    return out.stdout.split()[0]


def image_exists(image: str) -> bool:
    return docker("image", "inspect", image, check=False, timeout=60).returncode == 0


def build_image(tag: str, target: str = "app") -> None:
    """The project's Dockerfile built up to `target`."""
    run(["docker", "build", "--target", target, "-t", tag, "."], timeout=1800)


def run_detached(
    name: str, image: str, *command: str, network: str | None = None, env: Mapping[str, str] | None = None
) -> None:
    """A long-running named container (`docker run -d`); docker.remove_container(name) ends it."""
    flags = [*(["--network", network] if network else []), *env_flags(env)]
    docker("run", "-d", "--name", name, *flags, image, *command, timeout=120)


def run_once(
    image: str,
    *command: str,
    name: str | None = None,
    network: str | None = None,
    volumes: Sequence[str] = (),
    workdir: str | None = None,
    env: Mapping[str, str] | None = None,
    cpus: str | None = None,
    memory: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """A container run to its end and removed (`docker run --rm`); its exit code the caller's to judge."""
    flags = [
        *(["--name", name] if name else []),
        *(["--network", network] if network else []),
        *(x for v in volumes for x in ("-v", v)),
        *(["-w", workdir] if workdir else []),
        *env_flags(env),
        *(["--cpus", cpus] if cpus else []),
        *(["--memory", memory] if memory else []),
    ]
    return docker("run", "--rm", *flags, image, *command, check=False, timeout=timeout)


def stop_container(container: str, grace_s: int | None = None) -> str:
    """SIGTERM, then SIGKILL after `grace_s` (None: the container's own stop timeout, which
    compose sets from stop_grace_period); the error, "" when done."""
    flags = ("--time", str(grace_s)) if grace_s is not None else ()
    proc = docker("stop", *flags, container, check=False, timeout=(grace_s or 60) + 60)
    return _error_of(proc, f"stop {container}")


def env_flags(env: Mapping[str, str] | None) -> list[str]:
    return [x for k, v in (env or {}).items() for x in ("-e", f"{k}={v}")]
