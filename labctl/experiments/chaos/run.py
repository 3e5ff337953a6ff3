"""make chaos: a load run (labctl/load_run) with a fault injected while it runs,
then undone, and the record's `chaos` section: what was lost, duplicated,
failed, and how long until work resumed."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from labctl.clients.api import ledger
from labctl.config import Opt, knobs
from labctl.errors import EXIT_FAILED, EXIT_OK, LabNotRunning, ParamError
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load
from labctl.platform.compose import Compose
from labctl.platform.lab import Lab
from labctl.platform.orchestrator import orchestrator
from labctl.platform.swarm import Swarm
from labctl.queues import QUEUES
from labctl.records.chaos import ChaosSection, chaos_totals
from labctl.records.run import RunRecord
from labctl.records.store import Store
from labctl.render.console import Console

from .container import CONTAINER_FAULTS, Fault
from .node import NodeFault

FAULTS = (*CONTAINER_FAULTS, "kill-node")
# `background` runs its tasks in the API process: nothing comes back from a
# dead API, and what waited for Redis settles seconds after it is back. A
# drain that sees nothing settle for this long is over.
BACKGROUND_DRAIN_STALL_S = 15
# How long the load goes on after the fault is undone (its default length is
# at + hold + this): long enough for a restarted worker to take tasks again.
AFTER_FAULT_S = 10
# kill-node's default hold: the Swarm sees a node down after its heartbeats
# stop, then starts the node's tasks elsewhere, each healthy only after its
# healthcheck's first interval; the node comes back after that.
KILL_NODE_HOLD_S = 60
AnyFault = Fault | NodeFault


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
        return next((round(ts - injected, 1) for ts, c in self.samples if ts > restored and c > base), None)


def set_load_length(options: LoadOptions, at: float, hold: float) -> LoadOptions:
    """The load is timed, not counted, unless told otherwise, so that it outlasts
    the fault whatever rate the API reaches (a fault a few seconds in could come
    after a counted load had ended). It goes on AFTER_FAULT_S once the fault is
    undone, for the worker to take tasks again; for background (the worker is the
    API, which takes seconds to be ready again after a restart) 30 s."""
    if options.iterations is not None or options.duration is not None:
        return options
    return options.but(duration=30.0 if options.worker == "background" else at + hold + AFTER_FAULT_S)


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
    fault: Annotated[str, Opt(f"one of {', '.join(FAULTS)}")]
    at: Annotated[float, Opt("seconds into the load when the fault starts")] = 3
    hold: Annotated[float | None, Opt("seconds the fault lasts before it is undone (5; kill-node 60)")] = None
    node: Annotated[str, Opt("kill-node: the node (default: one that runs the queue's workers)")] = ""

    @property
    def hold_s(self) -> float:
        """How long the fault lasts: as told, else 5 s; a dead node stays down long enough
        for the Swarm to see it and run its tasks elsewhere."""
        if self.hold is not None:
            return self.hold
        return KILL_NODE_HOLD_S if self.fault == "kill-node" else 5


def make_fault(lab: Lab, chaos: ChaosOptions, worker: str, say: Callable[[str], None]) -> AnyFault:
    """The fault on the lab it can act on: a container of the compose project, a node of a Swarm."""
    if chaos.fault == "kill-node":
        if not isinstance(lab, Swarm):
            raise ParamError(
                'fault=kill-node kills a node of a Swarm: the cluster of make cluster-up (eval "$(make -s cluster-env)")'
            )
        return NodeFault(lab, worker, chaos.node or None, say)
    if not isinstance(lab, Compose):
        raise ParamError(f"fault={chaos.fault} acts on a container of the compose project; on a Swarm: fault=kill-node")
    return Fault(lab, chaos.fault, worker, chaos.hold_s, say)


def chaos_load(options: LoadOptions, chaos: ChaosOptions, drain_stall_given: bool) -> LoadOptions:
    """The run's name, endpoint, users, length and stall limit where the command line left them."""
    background = options.worker == "background"
    options = options.but(
        run=options.run or f"chaos-{options.worker}-{chaos.fault}-{secrets.token_hex(3)}",
        endpoint=options.endpoint or "io/simple",
        users=10 if options.users is None else options.users,
    )
    options = set_load_length(options, chaos.at, chaos.hold_s)
    if not drain_stall_given:
        # A dead worker's tasks come back once their lease runs out: TASK_TIMEOUT_S
        # (+10 s for arq, +60 s sweep for SAQ; Celery's visibility timeout is twice
        # it). Waiting less would call them lost when they are only late.
        stall = BACKGROUND_DRAIN_STALL_S if background else 3 * knobs().task_timeout_s
        options = options.but(drain_stall=stall)
    return options


def _load_with_fault(
    options: LoadOptions, chaos: ChaosOptions, lab: Lab, ui: Console, fault: AnyFault, watch: CompletionWatch
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
            if isinstance(fault, Fault):
                fault.read_held(options.run)
            time.sleep(max(0.0, fault.events.get("injected_at", 0) + chaos.hold_s - time.time()))
        finally:
            fault.restore()

    def written_off() -> int | None:
        """A killed API's tasks never come back: the drain is over once only they are pending."""
        held = fault.events.get("held")
        return None if held is None or "restored_at" not in fault.events else int(held)

    injector = threading.Thread(target=inject_then_restore, daemon=True)
    watch.start()
    injector.start()
    try:
        return run_load(options, lab, ui, on_start=lambda _: load_started.set(), written_off=written_off)
    finally:
        watch.stop.set()
        injector.join(timeout=chaos.hold_s + 120)


def _record_chaos(
    record: RunRecord, chaos: ChaosOptions, api: str, fault: AnyFault, watch: CompletionWatch, store: Store
) -> ChaosSection:
    """Adds the fault, its timings and what the ledger lost to the run's record, and writes it."""
    report = ledger(api, record.run) or {}
    injected, resume = fault.events.get("injected_at"), fault.resume_from()
    recovered = watch.resumed(injected, resume) if injected and resume else None
    if problem := late_fault(injected, record.load_ended_at, recovered):
        fault.errors.append(problem)
    section = ChaosSection.model_validate(
        {
            "fault": chaos.fault,
            "service": fault.service,
            "at_s": chaos.at,
            "hold_s": chaos.hold_s,
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


def _say_chaos(ui: Console, fault: AnyFault, c: ChaosSection) -> None:
    """The run's chaos summary line, then the fault's warnings."""
    lost = "not yet known (still draining: make results)" if c.lost is None else c.lost
    if c.held is not None:
        lost = f"{lost} of the {c.held} task(s) the API held when it went down"
    where = (
        f"Swarm saw {c.node} down {c.node_down_s} s, ran {fault.service}'s replicas again {c.rescheduled_s} s "
        f"and had {c.node} back {c.node_ready_s} s after the fault"
        if c.fault == "kill-node"
        else f"restarts {c.restart_count}, OOM kills {c.oom_events or 0}"
    )
    ui.say(
        f"\nchaos {c.fault} on {c.node or fault.service}: lost {lost}, duplicated {c.duplicates}, "
        f"failed {c.failed}, interrupted {c.interrupted}, work resumed {c.recovered_s} s and the "
        f"last task settled {c.last_settled_after_fault_s} s after the fault; {where}"
    )
    for error in fault.errors:
        ui.say(f"WARNING: {error}")


def chaos(options: LoadOptions, chaos: ChaosOptions, drain_stall_given: bool, ui: Console) -> int:
    if options.worker not in QUEUES:
        raise ParamError(f"worker= one of {', '.join(QUEUES)}")
    if chaos.fault not in FAULTS:
        raise ParamError(f"fault= one of {', '.join(FAULTS)}")
    lab = orchestrator()
    options = chaos_load(options, chaos, drain_stall_given)
    options.parse()
    fault = make_fault(lab, chaos, options.worker, ui.say)
    fault.check()
    api = lab.port("api", 8000)
    if not api:
        raise LabNotRunning("the lab is not running: `make up`")
    watch = CompletionWatch(api, options.run)
    record = _load_with_fault(options, chaos, lab, ui, fault, watch)
    _say_chaos(ui, fault, _record_chaos(record, chaos, api, fault, watch, Store(options.results_dir)))
    return EXIT_FAILED if record.unsettled() else EXIT_OK
