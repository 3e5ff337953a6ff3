"""`make purge worker=Q`: empty a queue's backlog, with every task of it counted.

    make purge worker=arq        (any broker queue; worker=all: each in turn)

The queue's workers are scaled to none: each ends the tasks it runs within its
grace period, as on any stop. Then, in the API's container, the queue's adapter
deletes its library's keys and each run's ledger counts what it still had
pending of that queue as `purged` (services/purge.py). The workers start again,
as many as ran before. A run whose backlog was purged settles: `make results`
shows it with its purged tasks, and every run still accounts for every task
(enqueued = completed + failed + purged). Refused while a load runs: its
tasks would be purged as the API accepts them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from lab.queues import BROKER_NAMES
from labctl.errors import LabError, LabNotRunning, ParamError
from labctl.platform.lab import Lab
from labctl.platform.orchestrator import orchestrator
from labctl.queues import running_brokers

# The load's containers: while one runs, the API takes new tasks.
LOAD_SERVICES = ("locust-master", "locust-ui")
PURGE_TIMEOUT_S = 600  # a backlog of millions of keys, deleted in batches of 500


def queues_of(worker: str) -> list[str]:
    if worker == "all":
        return running_brokers()
    if worker not in BROKER_NAMES:
        hint = " (`background`'s tasks live in the API process: they leave with it)" if worker == "background" else ""
        raise ParamError(f"worker={worker!r}: one of {', '.join(BROKER_NAMES)}, or all{hint}")
    return [worker]


def purge_queue(lab: Lab, queue: str, say: Callable[[str], None]) -> dict[str, Any]:
    """One queue purged with its workers stopped; what services/purge.py printed."""
    replicas = lab.replicas(queue)
    say(f"{queue}: stopping its {replicas} worker(s) ...")
    lab.scale(queue, 0)
    try:
        proc = lab.exec("api", "python", "-m", "services.purge", queue, timeout=PURGE_TIMEOUT_S)
        if proc.returncode != 0:
            raise LabError(f"purging {queue} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return cast(dict[str, Any], json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        if replicas:
            say(f"{queue}: starting {replicas} worker(s) again ...")
            lab.scale(queue, replicas)


def purge(worker: str, say: Callable[[str], None]) -> list[dict[str, Any]]:
    queues = queues_of(worker)
    lab = orchestrator()
    if not lab.ids("api"):
        raise LabNotRunning("the lab's API is not running (make up)")
    if running := [s for s in LOAD_SERVICES if lab.ids(s)]:
        raise LabError(f"a load is running ({', '.join(running)}): purge once it has ended")
    results = []
    for queue in queues:
        out = purge_queue(lab, queue, say)
        runs = out["purged"]
        total = sum(runs.values())
        detail = "; ".join(f"{run} {n}" for run, n in sorted(runs.items()))
        say(
            f"{queue}: {total} task(s) purged"
            + (f" ({detail})" if detail else "")
            + f", {out['keys_deleted']} key(s) deleted; counted as purged in the ledger (make results)"
        )
        results.append(out)
    return results
