"""The faults of one container of the compose project (kill-worker, stop-worker,
restart-redis, oom): injected through the engine while a load runs, then undone."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

from lab.ledger.keys import run_key
from labctl.clients.prometheus import rfc3339
from labctl.errors import LabError
from labctl.platform import docker as cli
from labctl.platform.compose import Compose
from labctl.queues import service_of

CONTAINER_FAULTS = ("kill-worker", "stop-worker", "restart-redis", "oom")
OOM_MARGIN = 16 * 2**20

# Run as root inside the worker container (root may raise another process's
# oom_score_adj; no capability needed). The worker's main process is the
# child of the container's init (tini); `docker exec` processes have parent 0.
BALLOON = """
import os, sys, time
def parent(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("PPid:")).split()[1])
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid() and parent(pid) == 1:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
hog = []
for _ in range(int(sys.argv[1])):
    hog.append(b"\\x01" * 2**20)  # written, so really resident
    time.sleep(0.005)
"""


def docker(*args: str, timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess:
    return cli.docker(*args, check=False, timeout=timeout, input=input)


class Fault:
    """Injects one fault into one compose service, and undoes it."""

    def __init__(self, compose: Compose, fault: str, worker: str, hold_s: float, say: Callable[[str], None]):
        self.compose, self.fault, self.worker, self.hold_s, self.say = compose, fault, worker, hold_s, say
        self.service = "redis" if fault == "restart-redis" else service_of(worker)
        self.events: dict[str, float] = {}
        self.errors: list[str] = []
        self._limits: tuple[int, int] | None = None
        self._oom_watch: subprocess.Popen | None = None

    def container(self) -> str:
        ids = self.compose.ids(self.service, include_stopped=True)
        if not ids:
            raise LabError(f"no container for service {self.service}: is the lab up?")
        return ids[0]

    def check(self) -> None:
        if self.fault == "restart-redis":
            info = self.compose.inspect("redis")
            cmd = " ".join(info[0]["Config"]["Cmd"]) if info else ""
            if "--appendonly yes" not in cmd:
                raise LabError(
                    "restart-redis needs Redis to keep its data (the ledger lives there too): "
                    "`make up REDIS_APPENDONLY=yes` first"
                )

    def _run(self, *args: str) -> None:
        proc = docker(*args)
        if proc.returncode != 0:
            self.errors.append(f"docker {' '.join(args)}: {proc.stderr.strip()[:200]}")

    def inject(self) -> None:
        cid = self.container()
        self.events["injected_at"] = time.time()
        if self.fault == "kill-worker":
            self._run("kill", "--signal", "KILL", cid)
        elif self.fault == "stop-worker":
            self._run("stop", cid)
        elif self.fault == "restart-redis":
            self._run("restart", cid)
        elif self.fault == "oom":
            # The engine's own record of OOM kills (OOMKilled in `inspect` only says
            # how the container's last run ended), followed live: the engine keeps
            # too few past events to ask afterwards, healthchecks crowd them out.
            self._oom_watch = cli.popen(
                "events",
                "--since",
                f"{time.time() - 1:.3f}",
                "--filter",
                f"container={cid}",
                "--filter",
                "event=oom",
                "--format",
                "{{.Action}}",
            )
            info = json.loads(docker("inspect", cid).stdout)[0]["HostConfig"]
            self._limits = (info["Memory"], info["MemorySwap"])
            stats = docker("stats", "--no-stream", "--format", "{{json .}}", cid).stdout
            used = parse_bytes(json.loads(stats)["MemUsage"].split("/")[0]) if stats.strip() else 100 * 2**20
            tight = int(used + OOM_MARGIN)
            self._run("update", "--memory", str(tight), "--memory-swap", str(tight), cid)
            self.events["oom_limit_bytes"] = tight
            # The hog asks for the whole limit; the worker is killed long before
            # (and the hog with it, when the container stops).
            proc = docker("exec", "-i", "-u", "0", cid, "python", "-", str(tight // 2**20), input=BALLOON, timeout=60)
            if proc.returncode == 0:
                self.errors.append("oom: the memory hog allocated the whole limit and nothing was killed")
        self.say(f"chaos: {self.fault} on {self.service} injected")

    def read_held(self, run: str) -> None:
        """For `background` the worker is the API: once it is down (killed or stopped),
        the tasks it held are those of the run the ledger counts and has not settled
        (each counted before its 202), all that its fault can lose. Read from Redis
        while the API is down, before the fault is undone; `events["held"]`."""
        if self.service != "api" or self.fault not in ("kill-worker", "stop-worker"):
            return
        if docker("wait", self.container(), timeout=60).returncode != 0:
            self.errors.append("the API did not go down: what it held was not read")
            return
        proc = self.compose.exec("redis", "redis-cli", "HGETALL", run_key(run, "ledger"))
        if proc.returncode != 0:
            self.errors.append(f"the run's ledger could not be read while the API was down: {proc.stderr[:200]}")
            return
        lines = proc.stdout.splitlines()
        self.events["held"] = pending_in(dict(zip(lines[::2], lines[1::2])))

    def restore(self) -> None:
        cid = self.container()
        if self.fault in ("kill-worker", "stop-worker"):
            self._run("start", cid)
        elif self.fault == "oom" and self._limits:
            memory, swap = self._limits
            self._run("update", "--memory", str(memory), "--memory-swap", str(swap), cid)
            state = json.loads(docker("inspect", cid).stdout)[0]["State"]
            if not state.get("Running"):
                self._run("start", cid)
            # The restart policy, not this restore, brought the killed worker back.
            started = rfc3339(state.get("StartedAt", ""))
            if started > self.events["injected_at"]:
                self.events["restarted_at"] = started
        self.events["restored_at"] = time.time()
        self.say(f"chaos: {self.fault} on {self.service} restored")

    def resume_from(self) -> float | None:
        """Work counts as resumed once a task completes after this: the fault undone, or
        the worker back by its restart policy."""
        return self.events.get("restarted_at", self.events.get("restored_at"))

    def container_state(self) -> dict:
        cid = self.container()
        info = json.loads(docker("inspect", cid).stdout)[0]
        state = {
            "restart_count": info.get("RestartCount"),
            "oom_killed": info["State"].get("OOMKilled"),
            "running": info["State"].get("Running"),
        }
        if self._oom_watch is not None:
            self._oom_watch.terminate()
            state["oom_events"] = self._oom_watch.communicate(timeout=10)[0].split().count("oom")
        return state


def pending_in(ledger_hash: dict[str, str]) -> int:
    """A run's pending tasks from its ledger hash ("<queue>:<kind>/<variant>:<stat>" -> count),
    as the ledger's report counts them: enqueued - completed - failed."""
    totals = dict.fromkeys(("enqueued", "completed", "failed"), 0)
    for name, value in ledger_hash.items():
        stat = name.rsplit(":", 1)[-1]
        if name.count(":") == 2 and stat in totals:
            totals[stat] += int(value)
    return totals["enqueued"] - totals["completed"] - totals["failed"]


def parse_bytes(text: str) -> float:
    units = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9}
    text = text.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)
