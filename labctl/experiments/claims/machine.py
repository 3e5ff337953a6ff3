"""Where make claims runs its steps: a Redis of its own (container
`claims-redis`, never the lab's, so each run may FLUSHALL it), and one
container per step on the lab's image, in that Redis's network namespace,
so the authors' hard-coded `localhost:6379` reaches it unchanged. The work
directory (sources.stage) is mounted read-only at /claims; the step's
processes are started by services/claims/lib/harness.py, which prints one
JSON line. Limited steps get the lab's worker limits (WORKER_CPUS,
WORKER_MEM); unlimited ones none, as the authors ran.

Before each step the machine is watched for a second: the share of its cores
that others use (this machine is shared) is recorded with the load average,
and a step waits (up to quiet_wait_s) for it to fall below quiet_share."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from labctl.config import knobs
from labctl.errors import LabError
from labctl.platform import docker
from labctl.polling import wait_until

REDIS = "claims-redis"
REDIS_IMAGE = "redis:7.4.7"
MOUNT = "/claims"


def cpu_busy(interval_s: float = 1.0) -> float:
    """The share of all cores busy over `interval_s` (0-1), from /proc/stat."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields), idle

    total0, idle0 = sample()
    time.sleep(interval_s)
    total1, idle1 = sample()
    return round(1 - (idle1 - idle0) / max(1, total1 - total0), 3)


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


class Machine:
    def __init__(
        self,
        work: Path,
        stamp: str,
        say: Callable[[str], None],
        quiet_share: float = 0.25,
        quiet_wait_s: float = 5.0,
    ):
        self.work, self.stamp, self.say = work, stamp, say
        given = knobs()
        self.image = given.lab_image
        self.limits = {"cpus": given.worker_cpus, "memory": given.worker_mem}
        self.quiet_share, self.quiet_wait_s = quiet_share, quiet_wait_s
        self.steps = 0

    # -- Redis -------------------------------------------------------------------------------
    def up(self) -> None:
        if not docker.image_exists(self.image):
            self.say(f"building the lab's image {self.image} (docker build; a fresh clone's first run) ...")
            docker.build_image(self.image)
        docker.remove_container(REDIS)
        docker.run_detached(REDIS, REDIS_IMAGE, "redis-server", "--save", "", "--appendonly", "no")
        if not wait_until(lambda: self.redis("PING") == "PONG", timeout_s=30, every_s=0.2):
            raise LabError(f"{REDIS} did not answer PING within 30 s")

    def down(self) -> None:
        docker.remove_container(REDIS)

    def redis(self, *command: str) -> str:
        return docker.exec_in(REDIS, "redis-cli", *command).stdout.strip()

    def flush(self) -> None:
        """Empties the claims' own Redis (REDIS, started by up() and removed by
        down()): it holds nothing but the authors' benchmarks, never the lab's keys."""
        self.redis("FLUSHALL")

    def service(self, name: str, command: list[str], env: dict[str, str]) -> str:
        """A long-running container of the lab's own (its API), in the claims Redis's namespace."""
        full = f"claims-{name}-{self.stamp}"
        docker.remove_container(full)
        docker.run_detached(full, self.image, *command, network=f"container:{REDIS}", env=env)
        return full

    def stop_service(self, name: str) -> None:
        docker.stop_container(name, grace_s=20)
        docker.remove_container(name)

    def redis_hash(self, key: str) -> dict[str, str]:
        lines = self.redis("HGETALL", key).splitlines()
        return dict(zip(lines[::2], lines[1::2]))

    def redis_info(self) -> dict[str, str]:
        keep = ("redis_version", "io_threads_active", "os", "arch_bits")
        lines = (line.partition(":") for line in self.redis("INFO", "server").splitlines())
        info = {key: value for key, colon, value in lines if colon and key in keep}
        info["maxclients"] = (self.redis("CONFIG", "GET", "maxclients").splitlines() or [""])[-1]
        return info

    # -- Steps -------------------------------------------------------------------------------
    def quiet(self) -> tuple[float, list[float]]:
        """Wait (up to quiet_wait_s) until others use less than quiet_share of the cores; what was seen."""
        seen: list[float] = []

        def calm() -> bool:
            seen.append(cpu_busy())
            return seen[-1] < self.quiet_share

        wait_until(calm, timeout_s=self.quiet_wait_s, every_s=0)
        return seen[-1], loadavg()

    def step(
        self,
        run: str,
        cwd: str,
        procs: list[list[str]],
        done: dict[str, Any],
        *,
        env: dict[str, str] | None = None,
        limited: bool = False,
        timeout_s: float = 300,
        keep: str = "",
        poll_s: float = 0.01,
    ) -> dict[str, Any]:
        """One container running `procs` in /claims/<cwd> through the harness; its JSON."""
        self.steps += 1
        name = f"claims-step-{self.stamp}-{self.steps}"
        spec = {
            "run": run,
            "procs": procs,
            "done": done,
            "env": env or {},
            "timeout_s": timeout_s,
            "keep": keep,
            # Within a 0.2-CPU quota the harness's own polls would take a share of it: fewer there.
            "poll_s": max(poll_s, 0.05) if limited else poll_s,
        }
        try:
            proc = docker.run_once(
                self.image, "python", f"{MOUNT}/lib/harness.py", json.dumps(spec),
                name=name,
                network=f"container:{REDIS}",
                volumes=[f"{self.work}:{MOUNT}:ro"],
                workdir=cwd if cwd.startswith("/") else f"{MOUNT}/{cwd}",
                env={"PYTHONPATH": f"{MOUNT}/lib"},
                cpus=str(self.limits["cpus"]) if limited else None,
                memory=str(self.limits["memory"]) if limited else None,
                timeout=timeout_s + 120,
            )  # fmt: skip
        finally:
            docker.remove_container(name)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            killed = " (killed: memory?)" if proc.returncode == 137 else ""
            return {
                "status": f"failed: the step's container exited {proc.returncode}{killed}",
                "output": [(proc.stderr or proc.stdout).strip()[-2000:]],
                "tally": {},
                "exit_codes": [],
            }
        return cast(dict[str, Any], json.loads(lines[-1]))


def machine_description() -> dict[str, Any]:
    """The machine: CPU model and flags that matter here, cores, kernel, memory, the engine."""
    model, flags = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1]
    except OSError:
        pass
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    info = docker.engine_info()
    return {
        "cpu": model,
        "sha_ni": "sha_ni" in flags.split(),
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(),
        "docker": str(info.get("ServerVersion", "")),
        "shared": "yes: other engineers' work runs beside it (busy share recorded per run)",
    }


PACKAGES = (
    "saq", "arq", "rq", "streaq", "taskiq", "taskiq-redis", "dramatiq", "celery", "kombu", "huey",
    "redis", "hiredis", "uvloop", "coredis", "anyio",
)  # fmt: skip


def image_versions(image: str, work: Path) -> dict[str, Any]:
    """The libraries' versions in the image the steps run on, as installed (lib/versions.py, staged in `work`)."""
    proc = docker.run_once(image, "python", f"{MOUNT}/lib/versions.py", *PACKAGES, volumes=[f"{work}:{MOUNT}:ro"])
    try:
        return cast(dict[str, Any], json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"error": (proc.stderr or proc.stdout).strip()[-300:]}
