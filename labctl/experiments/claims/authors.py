"""The benchmarks run with their authors' own files (sources.py vendors them):
SAQ's benchmarks/simple.py, RQ's docs/benchmark.md, streaq's benchmarks/
(no-op and sleep(1)) and steventen/python_queue_benchmark. Each function is one
run of one configuration; it returns the run's record."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from labctl.experiments.claims.machine import Machine
from labctl.experiments.claims.steps import LIMITED, Config, account, number, run_record, span
from labctl.records.claims import ClaimsRun
from labctl.records.claims_published import STREAQ_CONCURRENCY


# -- SAQ benchmarks/simple.py --------------------------------------------------------------------
def saq_simple(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    lib = c.queue
    step = m.step(
        run,
        "saq",
        [["python", "simple.py", lib]],
        {"kind": "exit"},
        env={"N": str(c.n)},
        limited=c.setup == LIMITED,
        timeout_s=60 + c.n * (0.5 if c.setup == LIMITED else 0.2),
        keep=r"^(SAQ|ARQ|RQ) (enqueue|process) ",
    )
    out = "".join(step.get("kept") or [])
    tag = {"saq": "SAQ", "arq": "ARQ", "rq": "RQ"}[lib]
    enqueue = number(rf"^{tag} enqueue \d+ ([0-9.e-]+)$", out)
    noop = number(rf"^{tag} process \d+ noop ([0-9.e-]+)$", out)
    sleep = number(rf"^{tag} process \d+ sleep ([0-9.e-]+)$", out)
    figures: dict[str, float | None] = {"enqueue_s": enqueue, "noop_s": noop, "sleep_s": sleep}
    if lib == "rq" and enqueue is not None and noop is not None and sleep is not None:
        # RQ's timer is never reset: its own noop is noop - enqueue, its own sleep
        # what follows the noop phase less a second enqueue as long as the first.
        figures["noop_own_s"] = round(noop - enqueue, 4)
        figures["sleep_own_s"] = round(sleep - noop - enqueue, 4)
    else:
        figures["noop_own_s"], figures["sleep_own_s"] = noop, sleep
    if lib == "arq":
        # arq's floor at its defaults: a poll every 0.5 s takes at most 100 jobs (queue_read_limit).
        figures["noop_floor_s"] = math.ceil(c.n / 100) * 0.5
    accounting = account(2 * c.n, step.get("tally") or {})
    if lib == "rq":
        accounting["rq_failed_registry"] = int(m.redis("ZCARD", "rq:failed:default") or 0)
    return run_record(c, rep, [step], figures, accounting, need={"noop": noop, "sleep": sleep})


# -- RQ docs/benchmark.md ---------------------------------------------------------------------------
def rq_doc(m: Machine, c: Config, rep: int, run: str) -> list[ClaimsRun]:
    """One run of the script gives both rows: the forking Worker, then SimpleWorker."""
    step = m.step(
        run,
        "rq",
        [["python", "rq_benchmark.py"]],
        {"kind": "exit"},
        env={"N": str(c.n)},
        limited=c.setup == LIMITED,
        timeout_s=60 + c.n * (0.3 if c.setup == LIMITED else 0.1),
        keep=r"^Processed \d+ jobs",
    )
    out = "".join(step.get("kept") or [])
    worker = number(r"with Worker in ([0-9.]+) seconds", out)
    simple = number(r"with SimpleWorker in ([0-9.]+) seconds", out)
    accounting = account(2 * c.n, step.get("tally") or {})
    accounting["rq_failed_registry"] = int(m.redis("ZCARD", "rq:failed:default") or 0)
    need = {"Worker": worker, "SimpleWorker": simple}
    return [
        run_record(replace(c, queue=queue), rep, [step], {"process_s": figure}, accounting, need)
        for queue, figure in (("rq-worker", worker), ("rq-simple", simple))
    ]


# -- streaq benchmarks/ --------------------------------------------------------------------------------
STREAQ_BACKLOG = {
    "arq": ("ZCARD", "arq:queue"),
    "saq": ("LLEN", "saq:default:queued"),
    "taskiq": ("XLEN", "taskiq"),
}


def streaq_worker_procs(lib: str, workers: int) -> tuple[list[list[str]], dict[str, Any]]:
    """The author's worker commands (benchmarks/README.md), and how their end is known."""
    if lib == "arq":  # arq 0.28 has no --workers: the fork's --workers started W interpreters
        return [["arq", "--burst", "bench_arq.WorkerSettings"]] * workers, {"kind": "exit"}
    if lib == "saq":  # the saq CLI under uvloop, as the author's ran (services/claims/lib/saq_uvloop.py)
        argv = ["python", "-m", "saq_uvloop", "--quiet", "bench_saq.settings", "--workers", str(workers)]
        return [argv], {"kind": "exit"}
    if lib == "streaq":
        return [["streaq", "run", "--burst", "--workers", str(workers), "bench_streaq:worker"]], {"kind": "exit"}
    argv = ["taskiq", "worker", "--workers", str(workers), "--max-async-tasks", "32", "bench_taskiq:broker"]
    return [[*argv, "--max-prefetch", "32"]], {"kind": "xgroup", "stream": "taskiq"}


# A run's deadline bounds a hang, never a slow run: three times N at a rate well below any the authors
# published (for sleep(1), below arq's own at 10 and 20 processes), so that arq at 40 processes is
# recorded failing where it stops or loses a job, not where it is slow.
STREAQ_DEADLINE_RATE = {"noop": 300, "sleep": 100}  # tasks a second


def streaq(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    lib, workers, seconds = c.queue, c.params["workers"], c.params["sleep"]
    enqueue = m.step(
        run,
        "streaq",
        [["python", f"bench_{lib}.py", "--time", str(seconds)]],
        {"kind": "exit"},
        env={"N_TASKS": str(c.n)},
        timeout_s=120 + c.n / 100,
        keep=r"^enqueued \d+ tasks",
    )
    enqueued_s = number(r"enqueued \d+ tasks in ([0-9.]+)s", "".join(enqueue.get("kept") or []))
    backlog = STREAQ_BACKLOG.get(lib)
    queued = int(m.redis(*backlog) or 0) if backlog else None
    procs, done = streaq_worker_procs(lib, workers)
    if done["kind"] == "xgroup":
        done["n"] = c.n
    ideal = c.n / (workers * STREAQ_CONCURRENCY) * seconds
    rate = STREAQ_DEADLINE_RATE["sleep" if seconds else "noop"]
    timeout = 120 + 3 * max(ideal, c.n / rate) + 2 * workers
    work = m.step(run, "streaq", procs, done, env={"N_TASKS": str(c.n)}, limited=c.setup == LIMITED, timeout_s=timeout)
    tally = work.get("tally") or {}
    first_last = span(tally)
    figures: dict[str, float | None] = {
        "enqueue_s": enqueued_s,
        "spawn_done_s": round(work["spawn_done_s"], 4) if work.get("spawn_done_s") else None,
        "first_last_s": first_last,
    }
    if seconds:
        figures["efficiency"] = round(ideal / first_last, 3) if first_last else None
    if lib == "arq" and workers == 1 and not seconds:
        # one arq process at max_jobs 32 reads at most 160 jobs a poll (queue_read_limit), a poll every 0.5 s
        figures["noop_floor_s"] = math.ceil(c.n / 160) * 0.5
    if lib == "saq":
        printed = [float(x) for x in re.findall(r"finished in (\d+)ms", "\n".join(work.get("output") or []))]
        figures["saq_printed_s"] = max(printed) / 1000 if printed else None
    return run_record(c, rep, [enqueue, work], figures, streaq_accounting(lib, c.n, tally, queued))


def streaq_accounting(lib: str, n: int, tally: dict[str, Any], queued: int | None) -> dict[str, Any]:
    """A streaq bench's jobs counted (steps.account), with its queue's length once every job
    was enqueued (None: not read)."""
    if lib == "taskiq":  # its bodies take no context: executions are counted, ids not
        accounting = account(n, tally, distinct=min(n, tally.get("executions", 0)))
        accounting["ids"] = "not counted (the body has no context); duplicates = executions beyond N"
    else:
        accounting = account(n, tally)
    if queued is not None:
        accounting["queued_after_enqueue"] = queued
    return accounting


# -- steventen/python_queue_benchmark ------------------------------------------------------------------------
STEVENTEN_CELERY = ["celery", "-q", "--skip-checks", "-A", "tasks", "worker", "--loglevel=info", "-c", "10", "-P"]
STEVENTEN_COMMANDS: dict[str, tuple[str, list[list[str]]]] = {
    "rq": ("rq", [["rq", "worker-pool", "-q", "-n", "10"]]),
    # supervisord's numprocs=10 of `arq tasks.WorkerSettings`
    "arq": ("arq", [["arq", "tasks.WorkerSettings"]] * 10),
    "celery-threads": ("celery", [[*STEVENTEN_CELERY, "threads"]]),
    "celery-processes": ("celery", [[*STEVENTEN_CELERY, "processes"]]),
    "huey-threads": ("huey", [["huey_consumer", "tasks.huey", "-k", "thread", "-w", "10", "-d", "0.001", "-C", "-q"]]),
    "huey-processes": (
        "huey",
        [["huey_consumer", "tasks.huey", "-k", "process", "-w", "10", "-d", "0.001", "-C", "-q"]],
    ),
    "dramatiq-1x10": ("dramatiq", [["dramatiq", "tasks", "-p", "1", "-t", "10"]]),
    "dramatiq-10x1": ("dramatiq", [["dramatiq", "tasks", "-p", "10", "-t", "1"]]),
    "dramatiq-defaults": ("dramatiq", [["dramatiq", "tasks"]]),
    "taskiq": ("taskiq", [["taskiq", "worker", "--workers", "10", "tasks:broker"]]),
}


def steventen(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    lib, procs = STEVENTEN_COMMANDS[c.queue]
    cwd = f"steventen/{lib}"
    enqueue = m.step(
        run,
        cwd,
        [["python", "enqueue_jobs.py"]],
        {"kind": "exit"},
        env={"TOTAL_JOBS": str(c.n)},
        timeout_s=120 + c.n / 100,
    )
    enqueued_s = number(r"All jobs enqueued within:\s+([0-9.]+) seconds", "\n".join(enqueue.get("output") or []))
    work = m.step(run, cwd, procs, {"kind": "log", "n": c.n}, timeout_s=120 + c.n / 20, poll_s=0.05)
    jobs = work.get("job_lines") or {}
    last, first = jobs.get("last"), jobs.get("first")
    figures = {
        "enqueue_s": enqueued_s,
        "start_last_s": round(last - work["started"], 4) if last and work.get("started") else None,
        "first_last_s": round(last - first, 4) if last and first else None,
    }
    accounting = account(c.n, {}, executions=jobs.get("lines", 0), distinct=jobs.get("distinct", 0))
    return run_record(c, rep, [enqueue, work], figures, accounting, need={"enqueue": enqueued_s})
