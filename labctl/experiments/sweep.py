"""`make sweep`: the same load run under every combination of worker limits.

    make sweep worker=arq cpus="0.2 0.5 1" mems="200M 500M" iterations=2000 [endpoint= users= services=]

For each CPU limit and memory limit it starts the lab with them (as `make up
WORKER_CPUS=.. WORKER_MEM=..`, which recreates only the workers whose limits
changed), runs the load with the other parameters under the run name
<run or sweep-TIMESTAMP-WORKER>-<cpus>cpu-<mem>, and prints the table of the
sweep's runs at the end. Each run but the last waits until its tasks settled
(`wait=1`): the next run must start with an empty backlog. The last one watches
its tasks like `make load` unless wait=1 is given. Afterwards the lab is brought
back to its own limits (.env or the defaults). `services=` is what is started
(default: every service outside a profile).

Knobs given on the command line (ARQ_POLL_DELAY=0.05, CONCURRENCY=10, ...) reach
every start, as they would by hand.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Annotated

from labctl.config import Opt
from labctl.errors import EXIT_FAILED, EXIT_OK, LabError, ParamError
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load
from labctl.platform.compose import Compose
from labctl.records.run import RunRecord
from labctl.render import run_table
from labctl.render.console import Console

LIMIT_KNOBS = ("WORKER_CPUS", "WORKER_MEM")


def start_lab(services: list[str], ui: Console, **limits: str) -> None:
    """The lab (re)started under these worker limits; none given: its own (.env or the defaults)."""
    env = {k: v for k, v in os.environ.items() if k not in LIMIT_KNOBS}
    shown = " ".join(f"{k}={v}" for k, v in limits.items()) or "the lab's own limits"
    ui.say(f"\n== up: {shown}" + (f" ({' '.join(services)})" if services else ""))
    Compose(env, profile=None).up(services, extra_env=limits)


@dataclass
class SweepOptions:
    """make sweep's own options: the limits it sweeps and what it starts."""

    cpus: Annotated[str, Opt('worker CPU limits, e.g. "0.2 0.5 1"')] = ""
    mems: Annotated[str, Opt('worker memory limits, e.g. "200M 500M"')] = ""
    services: Annotated[str, Opt("the services started (default: every one outside a profile)")] = ""


def sweep(options: LoadOptions, plan: SweepOptions, ui: Console) -> int:
    cpus, mems, services = plan.cpus.split(), plan.mems.split(), plan.services.split()
    if not cpus or not mems:
        raise ParamError('give cpus="0.2 0.5 ..." and mems="200M ..."')
    params = options.parse()  # fail before recreating anything
    base = (
        options.run or f"sweep-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{params.worker_label or params.scenario}"
    )
    records: list[RunRecord] = []
    failures: list[str] = []
    steps = [(cpu, mem) for cpu in cpus for mem in mems]
    try:
        for i, (cpu, mem) in enumerate(steps):
            start_lab(services, ui, WORKER_CPUS=cpu, WORKER_MEM=mem)
            run = f"{base}-{cpu}cpu-{mem}"[-64:].lstrip("-._")
            # Every run but the last waits for its tasks: the next one changes the
            # workers' limits, and must start with an empty backlog.
            last = i == len(steps) - 1
            try:
                record = run_load(options.but(run=run, wait=options.wait or not last), ui=ui)
            except LabError as exc:
                ui.say(f"run {run} failed: {exc}")
                failures.append(run)
                continue
            records.append(record)
            if record.unsettled():
                failures.append(run)
    finally:
        try:
            start_lab(services, ui)
            ui.say("the lab is back to its own limits (.env or the defaults)")
        except LabError as exc:
            ui.say(f"could not restore the lab's limits: {exc}")
    ui.say(f"\nsweep {base}: {len(records)} run(s)\n")
    ui.say(run_table.table(records))
    if failures:
        ui.say(f"\nnot settled or failed: {', '.join(failures)}")
    return EXIT_FAILED if failures else EXIT_OK
