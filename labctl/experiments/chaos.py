"""Fault experiments: a load run (labctl/load_run) with one fault injected
through the engine while it runs, then restored; the run's record gains a
`chaos` section: lost, duplicated, failed, time to recover.

    make chaos worker=arq fault=kill-worker [at=3] [hold=5] [duration=18s users=10 endpoint=io/simple]

For `background` the worker is the API itself: its faults hit the API container.

Faults:
  kill-worker    SIGKILL to the worker container (a crash: nothing can finish)
  stop-worker    SIGTERM to it (`docker stop`: the worker's own graceful shutdown)
  restart-redis  Redis restarted (`docker restart`). Without REDIS_APPENDONLY=yes its
                 data, the ledger included, is gone: the run cannot be accounted for,
                 so this fault refuses to run without it (make up REDIS_APPENDONLY=yes)
  oom            the worker's memory limit lowered to what it uses plus OOM_MARGIN,
                 then a memory hog inside the container (BALLOON) allocates past it:
                 the kernel's OOM killer kills the worker's main process, pointed at
                 it with oom_score_adj 1000 (the biggest process, its usual choice
                 anyway), and the restart policy brings the container back. A lower
                 limit alone proves nothing: the kernel reclaims page cache first and
                 a steady worker allocates too little to be killed.
After `hold` seconds the fault is undone (container started again, limit restored).
Recovery time: from the fault's start until tasks complete again (the ledger's
completed count rises).
"""

import json
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from labctl.clients.api import ledger
from labctl.clients.prometheus import rfc3339
from labctl.config import setting
from labctl.errors import EXIT_FAILED, EXIT_OK, LabError, LabNotRunning, ParamError
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load
from labctl.platform import docker as cli
from labctl.platform.compose import Compose
from labctl.queues import QUEUES, service_of
from labctl.records.chaos import ChaosSection, chaos_totals
from labctl.records.run import RunRecord
from labctl.records.store import Store
from labctl.render.console import Console

FAULTS = ("kill-worker", "stop-worker", "restart-redis", "oom")
WORKERS = QUEUES
# `background` runs its tasks in the API process: nothing comes back from a
# dead API, and what waited for Redis settles seconds after it is back. A
# drain that sees nothing settle for this long is over.
BACKGROUND_DRAIN_STALL_S = 15
# How long the load goes on after the fault is undone (its default length is
# at + hold + this): long enough for a restarted worker to take tasks again.
AFTER_FAULT_S = 10
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


def parse_bytes(text: str) -> float:
    units = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9}
    text = text.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


class CompletionWatch(threading.Thread):
    """Polls the run's ledger: (time, completed) pairs, to see when work resumes."""

    def __init__(self, api: str, run: str):
        super().__init__(daemon=True)
        self.api, self.run_name = api, run
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            report = ledger(self.api, self.run_name)
            if report:
                self.samples.append((time.time(), report["totals"]["completed"]))

    def resumed(self, injected: float, restored: float) -> float | None:
        """Seconds from the fault until tasks completed again once it was undone
        or the worker was back (completions just after the fault are tasks that
        had already finished)."""
        before = [c for ts, c in self.samples if ts <= restored]
        base = before[-1] if before else 0
        for ts, completed in self.samples:
            if ts > restored and completed > base:
                return round(ts - injected, 1)
        return None


def set_load_length(options: LoadOptions, at: float, hold: float) -> LoadOptions:
    """The load is timed, not counted, unless told otherwise, so that it outlasts
    the fault whatever rate the API reaches (a fault a few seconds in could come
    after a counted load had ended). It goes on AFTER_FAULT_S once the fault is
    undone, for the worker to take tasks again; for background (the worker is the
    API, which takes seconds to be ready again after a restart) 30 s."""
    if options.iterations or options.duration:
        return options
    return options.but(duration="30s" if options.worker == "background" else f"{at + hold + AFTER_FAULT_S:g}s")


def late_fault(injected: float | None, load_ended: float | None, recovered_s: float | None) -> str | None:
    """A fault after the load still meets the backlog of a slow queue (arq at
    its poll), and the run shows work resuming; with nothing left, it shows no
    recovery, and the run says so."""
    if injected and load_ended and injected > load_ended and recovered_s is None:
        return (
            f"the fault came {injected - load_ended:.1f} s after the load had ended and no task settled once "
            "it was undone: the run shows no recovery (a longer load: duration=, or an earlier at=)"
        )
    return None


@dataclass
class ChaosOptions:
    fault: str
    at: float = 3
    hold: float = 5


def chaos_load(options: LoadOptions, chaos: ChaosOptions, drain_stall_given: bool) -> LoadOptions:
    """The run's name, endpoint, users, length and stall limit where the command line left them."""
    background = options.worker == "background"
    options = options.but(
        run=options.run or f"chaos-{options.worker}-{chaos.fault}-{secrets.token_hex(3)}",
        endpoint=options.endpoint or "io/simple",
        users=options.users or "10",
    )
    options = set_load_length(options, chaos.at, chaos.hold)
    if not drain_stall_given:
        # A dead worker's tasks come back once their lease runs out: TASK_TIMEOUT_S
        # (+10 s for arq, +60 s sweep for SAQ; Celery's visibility timeout is twice
        # it). Waiting less would call them lost when they are only late.
        stall = BACKGROUND_DRAIN_STALL_S if background else 3 * float(setting("TASK_TIMEOUT_S", "60"))
        options = options.but(drain_stall=stall)
    return options


def _load_with_fault(
    options: LoadOptions, chaos: ChaosOptions, compose: Compose, ui: Console, fault: Fault, watch: CompletionWatch
) -> RunRecord:
    """Runs the load while a thread injects the fault `at` seconds in and restores it after `hold`."""
    load_started = threading.Event()

    def inject_then_restore() -> None:
        # `at` counts from the moment Locust's users start, not from the
        # containers' start-up, which takes a varying 10-20 s.
        if not load_started.wait(timeout=300) or watch.stop.wait(chaos.at):
            return
        try:
            fault.inject()
            time.sleep(chaos.hold)
        finally:
            fault.restore()

    injector = threading.Thread(target=inject_then_restore, daemon=True)
    watch.start()
    injector.start()
    try:
        return run_load(options, compose, ui, on_start=lambda _: load_started.set())
    finally:
        watch.stop.set()
        injector.join(timeout=chaos.hold + 120)


def _record_chaos(
    record: RunRecord, chaos: ChaosOptions, api: str, fault: Fault, watch: CompletionWatch, store: Store
) -> ChaosSection:
    """Adds the fault, its timings and what the ledger lost to the run's record, and writes it."""
    report = ledger(api, record.run) or {}
    injected, restored = fault.events.get("injected_at"), fault.events.get("restored_at")
    recovered = watch.resumed(injected, fault.events.get("restarted_at", restored)) if injected and restored else None
    if problem := late_fault(injected, record.load_ended_at, recovered):
        fault.errors.append(problem)
    section = ChaosSection.model_validate(
        {
            "fault": chaos.fault,
            "service": fault.service,
            "at_s": chaos.at,
            "hold_s": chaos.hold,
            **fault.events,
            "recovered_s": recovered,
            **chaos_totals(report, injected),
            **fault.container_state(),
            "errors": fault.errors,
        }
    )
    record.chaos = section
    if record.is_draining():
        section.lost = None  # not known while the tasks are still worked through: `make results` fills it in
    store.save(record)
    return section


def _say_chaos(ui: Console, fault: Fault, c: ChaosSection) -> None:
    """The run's chaos summary line, then the fault's warnings."""
    lost = "not yet known (still draining: make results)" if c.lost is None else c.lost
    ui.say(
        f"\nchaos {c.fault} on {fault.service}: lost {lost}, duplicated {c.duplicates}, "
        f"failed {c.failed}, interrupted {c.interrupted}, work resumed {c.recovered_s} s and the "
        f"last task settled {c.last_settled_after_fault_s} s after the fault, "
        f"restarts {c.restart_count}, OOM kills {c.oom_events or 0}"
    )
    for error in fault.errors:
        ui.say(f"WARNING: {error}")


def chaos(options: LoadOptions, chaos: ChaosOptions, drain_stall_given: bool, ui: Console) -> int:
    if options.worker not in WORKERS:
        raise ParamError(f"worker= one of {', '.join(WORKERS)}")
    if chaos.fault not in FAULTS:
        raise ParamError(f"fault= one of {', '.join(FAULTS)}")
    compose = Compose()
    options = chaos_load(options, chaos, drain_stall_given)
    options.parse()
    fault = Fault(compose, chaos.fault, options.worker, chaos.hold, ui.say)
    fault.check()
    api = compose.port("api", 8000)
    if not api:
        raise LabNotRunning("the lab is not running: `make up`")
    watch = CompletionWatch(api, options.run)
    record = _load_with_fault(options, chaos, compose, ui, fault, watch)
    _say_chaos(ui, fault, _record_chaos(record, chaos, api, fault, watch, Store(options.results_dir)))
    return EXIT_FAILED if record.unsettled() else EXIT_OK
