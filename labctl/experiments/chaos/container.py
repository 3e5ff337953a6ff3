"""The faults of one container of the compose project (kill-worker, stop-worker,
restart-redis, restart-broker, oom): injected through the engine while a load
runs, then undone."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.ledger.keys import run_key
from lab.queues import BY_NAME
from labctl.clients.prometheus import rfc3339
from labctl.errors import LabError, ParamError
from labctl.platform import docker as cli
from labctl.platform.compose import Compose
from labctl.queues import service_of

CONTAINER_FAULTS = ("kill-worker", "stop-worker", "restart-redis", "restart-broker", "oom")
ENGINE_ACTION = {
    "kill-worker": cli.kill_container,
    "stop-worker": cli.stop_container,
    "restart-redis": cli.restart_container,
    "restart-broker": cli.restart_container,
}
OOM_MARGIN = 16 * 2**20

# The memory hog run as root inside the worker container (balloon.py beside this file).
BALLOON = Path(__file__).with_name("balloon.py")


class Fault:
    """Injects one fault into one compose service, and undoes it."""

    def __init__(self, compose: Compose, fault: str, worker: str, hold_s: float, say: Callable[[str], None]):
        self.compose, self.fault, self.worker, self.hold_s, self.say = compose, fault, worker, hold_s, say
        self.service = fault_service(fault, worker)
        self.events: dict[str, float] = {}
        self.errors: list[str] = []
        self._limits: tuple[int, int] | None = None
        self._oom_watch: subprocess.Popen[str] | None = None

    def container(self) -> str:
        ids = self.compose.ids(self.service, include_stopped=True)
        if not ids:
            raise LabError(f"no container for service {self.service}: is the lab up?")
        return ids[0]

    def check(self) -> None:
        if self.service == "redis":
            info = self.compose.inspect("redis")
            cmd = " ".join(info[0]["Config"]["Cmd"]) if info else ""
            if "--appendonly yes" not in cmd:
                raise LabError(
                    f"{self.fault} needs Redis to keep its data (the ledger lives there too): "
                    "`make up REDIS_APPENDONLY=yes` first"
                )

    def _done(self, error: str) -> None:
        if error:
            self.errors.append(error)

    def inject(self) -> None:
        cid = self.container()
        self.events["injected_at"] = time.time()
        if self.fault in ENGINE_ACTION:
            self._done(ENGINE_ACTION[self.fault](cid))
        elif self.fault == "oom":
            # The engine's own record of OOM kills (OOMKilled in `inspect` only says
            # how the container's last run ended), followed live: the engine keeps
            # too few past events to ask afterwards, healthchecks crowd them out.
            self._oom_watch = cli.follow_events(cid, "oom", since=time.time() - 1)
            info = cli.inspect(cid)[0]["HostConfig"]
            self._limits = (info["Memory"], info["MemorySwap"])
            tight = int((cli.memory_used(cid) or 100 * 2**20) + OOM_MARGIN)
            self._done(cli.set_memory(cid, tight, tight))
            self.events["oom_limit_bytes"] = tight
            # The hog asks for the whole limit; the worker is killed long before
            # (and the hog with it, when the container stops).
            if cli.run_python(cid, BALLOON.read_text(), str(tight // 2**20)).returncode == 0:
                self.errors.append("oom: the memory hog allocated the whole limit and nothing was killed")
        self.say(f"chaos: {self.fault} on {self.service} injected")

    def read_held(self, run: str) -> None:
        """For `background` the worker is the API: once it is down (killed or stopped),
        the tasks it held are those of the run the ledger counts and has not settled
        (each counted before its 202), all that its fault can lose. Read from Redis
        while the API is down, before the fault is undone; `events["held"]`."""
        if self.service != "api" or self.fault not in ("kill-worker", "stop-worker"):
            return
        if not cli.wait_exited(self.container()):
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
            self._done(cli.start_container(cid))
        elif self.fault == "oom" and self._limits:
            memory, swap = self._limits
            self._done(cli.set_memory(cid, memory, swap))
            state = cli.inspect(cid)[0]["State"]
            if not state.get("Running"):
                self._done(cli.start_container(cid))
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

    def container_state(self) -> dict[str, Any]:
        cid = self.container()
        info = cli.inspect(cid)[0]
        state = {
            "restart_count": info.get("RestartCount"),
            "oom_killed": info["State"].get("OOMKilled"),
            "running": info["State"].get("Running"),
        }
        if self._oom_watch is not None:
            self._oom_watch.terminate()
            state["oom_events"] = self._oom_watch.communicate(timeout=10)[0].split().count("oom")
        return state


def fault_service(fault: str, worker: str) -> str:
    """The compose service a fault hits: Redis, the queue's broker (the
    service of its transport's name: redis, rabbitmq or postgres), or its worker."""
    if fault == "restart-redis":
        return "redis"
    if fault == "restart-broker":
        if worker not in BY_NAME:
            raise ParamError(f"restart-broker: {worker!r} has no broker (`background` runs in the API)")
        return BY_NAME[worker].transport
    return service_of(worker)


def pending_in(ledger_hash: dict[str, str]) -> int:
    """A run's pending tasks from its ledger hash ("<queue>:<kind>/<variant>:<stat>" -> count),
    as the ledger's report counts them: enqueued - completed - failed."""
    totals = dict.fromkeys(("enqueued", "completed", "failed"), 0)
    for name, value in ledger_hash.items():
        stat = name.rsplit(":", 1)[-1]
        if name.count(":") == 2 and stat in totals:
            totals[stat] += int(value)
    return totals["enqueued"] - totals["completed"] - totals["failed"]
