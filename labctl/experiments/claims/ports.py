"""The benchmarks whose authors' code cannot run here as published: Dramatiq's
fib benchmark, ported (services/claims/own/dramatiq_bench.py), and the blog
comparison, whose code is not public (minimal workers of our own,
services/claims/own/blog_*.py)."""

from __future__ import annotations

from labctl.experiments.claims.machine import Machine
from labctl.experiments.claims.steps import LIMITED, Config, account, number, run_record, span
from labctl.records.claims import ClaimsRun

# -- The blog comparison -----------------------------------------------------------------------------------
BLOG_WORKERS = {
    "taskiq": [["taskiq", "worker", "--workers", "1", "--max-async-tasks", "10", "blog_taskiq:broker"]],
    "dramatiq": [["dramatiq", "blog_dramatiq", "-p", "1", "-t", "10"]],
    "streaq": [["streaq", "run", "blog_streaq:worker"]],
    "arq": [["arq", "blog_arq.WorkerSettings"]],
    "celery": [["celery", "-A", "blog_celery", "worker", "-P", "threads", "-c", "10"]],
}


def blog(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    kind = c.params["kind"]
    enqueue = m.step(
        run, "own", [["python", "blog_enqueue.py", c.queue, kind, str(c.n)]], {"kind": "exit"}, timeout_s=120
    )
    enqueued_s = number(r"enqueued \d+ tasks in ([0-9.]+)s", "\n".join(enqueue.get("output") or []))
    ids = f"claims:{run}:ids"
    timeout = 120 + c.n * (0.5 if c.setup == LIMITED else 0.1)
    work = m.step(
        run, "own", BLOG_WORKERS[c.queue], {"kind": "scard", "key": ids, "n": c.n}, limited=c.setup == LIMITED,
        timeout_s=timeout, poll_s=0.05,
    )  # fmt: skip
    tally = work.get("tally") or {}
    first_last = span(tally)
    figures = {
        "enqueue_s": enqueued_s,
        "rate": round(c.n / first_last, 2) if first_last else None,
        "first_last_s": first_last,
        "peak_rss_mb": work.get("peak_rss_mb"),
    }
    accounting = account(c.n, tally)
    return run_record(c, rep, [enqueue, work], figures, accounting)


def blog_calibrate(m: Machine, run: str, limited: bool) -> float | None:
    """The cpu job's body alone, in ms: how much of a task is hashing here."""
    step = m.step(run, "own", [["python", "blog_jobs.py", "calibrate"]], {"kind": "exit"}, limited=limited)
    return number(r"cpu body ([0-9.]+) ms", "\n".join(step.get("output") or []))


# -- Dramatiq's fib benchmark, ported -------------------------------------------------------------------------
DRAMATIQ_BACKLOG = {
    "dramatiq": ("LLEN", "dramatiq:default"),
    "celery": ("LLEN", "celery"),
    "rq": ("LLEN", "rq:queue:default"),
}


def dramatiq_fib(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    lib, processes = c.queue, c.params["processes"]
    script = ["python", "dramatiq_bench.py"]
    enqueue = m.step(
        run,
        "own",
        [[*script, "enqueue", "--lib", lib, "--count", str(c.n)]],
        {"kind": "exit"},
        timeout_s=120 + c.n / 50,
    )
    enqueued_s = number(r"Enqueued \d+ messages in ([0-9.]+) seconds", "\n".join(enqueue.get("output") or []))
    queued = int(m.redis(*DRAMATIQ_BACKLOG[lib]) or 0)
    timeout = 120 + c.n * (0.4 if c.setup == LIMITED else 0.05)
    work = m.step(
        run, "own", [[*script, "work", "--lib", lib, "--count", str(c.n), "--processes", str(processes)]],
        {"kind": "exit"}, limited=c.setup == LIMITED, timeout_s=timeout,
    )  # fmt: skip
    took = number(r"Took ([0-9.]+) seconds", "\n".join(work.get("output") or []))
    executions = int(m.redis("GET", "latench-bench-counter") or 0)
    distinct = int(m.redis("SCARD", "latench-bench-counter:ids") or 0)
    accounting = account(c.n, {}, executions=executions, distinct=distinct)
    accounting["queued_after_enqueue"] = queued
    figures = {"enqueue_s": enqueued_s, "process_s": took, "rate": round(c.n / took, 2) if took else None}
    return run_record(c, rep, [enqueue, work], figures, accounting, need={"Took": took})
