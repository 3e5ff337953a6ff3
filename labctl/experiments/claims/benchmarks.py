"""Each benchmark as its author runs it, scaled where it cannot fit two cores:
the configurations it has (`configs`), and one run of one configuration
(`measure`), which returns the run's record: the author's printed figure
where the author prints one, the harness's times, and the accounting (every
job: enqueued = completed, duplicates counted).

Sizes (full run, scale=1): SAQ simple 1,000 (limited 250); RQ's doc 1,000
(250); streaq no-op 4,000 at 1/2/4/8 processes (1/5 of 20,000, 2/10 of the
processes per core; limited 1,000 at 1 process); streaq sleep(1) at the
literal 10/20/40 processes, 5 rounds of 32 per process; steventen 4,000 at
his 10 workers; the blog 1,000 (limited: cpu 300); Dramatiq's fib 4,000
(limited 1,000, RQ 250). `scale` multiplies every N.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labctl.experiments.claims.machine import Machine
from labctl.records.claims import ClaimsRun
from labctl.records.claims_published import (
    STREAQ_CONCURRENCY,
    STREAQ_NOOP_WORKERS,
    STREAQ_SLEEP_ROUNDS,
    STREAQ_SLEEP_WORKERS,
)

LIMITED = "limited"
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class Config:
    bench: str
    queue: str
    setup: str
    n: int
    path: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        column = f" {self.params['column']}" if self.params.get("column") else ""
        return f"{self.bench} {self.queue}{column} ({self.setup}, N={self.n})"


def scaled(n: int, scale: float, least: int = 20) -> int:
    return max(least, int(round(n * scale)))


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None


def _span(tally: dict) -> float | None:
    a, b = tally.get("first_start"), tally.get("last_end")
    return round(b - a, 4) if a is not None and b is not None else None


def account(n: int, tally: dict, executions: int | None = None, distinct: int | None = None) -> dict:
    """enqueued, completed (distinct ids), executions, duplicates (executions - distinct), lost (enqueued - distinct)."""
    executions = tally.get("executions", 0) if executions is None else executions
    distinct = tally.get("distinct", 0) if distinct is None else distinct
    return {
        "enqueued": n,
        "completed": distinct,
        "executions": executions,
        "duplicates": max(0, executions - distinct),
        "lost": n - distinct,
    }


def status_of(*steps: dict, accounting: dict | None = None, need: dict[str, float | None] | None = None) -> str:
    for s in steps:
        if s.get("status", "ok") != "ok":
            return s["status"]
        bad = [c for c in s.get("exit_codes") or [] if c not in (0, -15, 143, None)]
        if bad and s.get("done_at") is None:
            return f"failed: exit codes {bad}"
    if need:
        missing = [k for k, v in need.items() if v is None]
        if missing:
            return f"failed: no {', '.join(missing)} in the output"
    if accounting and accounting.get("lost"):
        return f"failed: {accounting['lost']} job(s) not completed"
    return "ok"


def base_run(config: Config, rep: int, steps: list[dict]) -> dict:
    last = steps[-1]
    return {
        "bench": config.bench,
        "queue": config.queue,
        "path": config.path,
        "setup": config.setup,
        "rep": rep,
        "n": config.n,
        "params": config.params,
        "redis": {
            "peak_connected_clients": last.get("peak_connected_clients"),
            "rejected_connections": last.get("rejected_connections"),
        },
        "output": [o for s in steps for o in s.get("output") or []][-4:],
    }


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
    enqueue = _num(rf"^{tag} enqueue \d+ ([0-9.e-]+)$", out)
    noop = _num(rf"^{tag} process \d+ noop ([0-9.e-]+)$", out)
    sleep = _num(rf"^{tag} process \d+ sleep ([0-9.e-]+)$", out)
    figures: dict[str, float | None] = {"enqueue_s": enqueue, "noop_s": noop, "sleep_s": sleep}
    if lib == "rq" and None not in (enqueue, noop, sleep):
        # RQ's timer is never reset: its own noop is noop - enqueue, its own sleep
        # what follows the noop phase less a second enqueue as long as the first.
        figures["noop_own_s"] = round(noop - enqueue, 4)  # type: ignore[operator]
        figures["sleep_own_s"] = round(sleep - noop - enqueue, 4)  # type: ignore[operator]
    else:
        figures["noop_own_s"], figures["sleep_own_s"] = noop, sleep
    if lib == "arq":
        # arq's floor at its defaults: a poll every 0.5 s takes at most 100 jobs (queue_read_limit).
        figures["noop_floor_s"] = math.ceil(c.n / 100) * 0.5
    accounting = account(2 * c.n, step.get("tally") or {})
    if lib == "rq":
        accounting["rq_failed_registry"] = int(m.redis("ZCARD", "rq:failed:default") or 0)
    return ClaimsRun(
        **base_run(c, rep, [step]),
        figures=figures,
        accounting=accounting,
        status=status_of(step, accounting=accounting, need={"noop": noop, "sleep": sleep}),
        wall_s=_elapsed(step),
    )


def _elapsed(step: dict) -> float | None:
    return round(step["ended"] - step["started"], 3) if step.get("ended") and step.get("started") else None


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
    worker = _num(r"with Worker in ([0-9.]+) seconds", out)
    simple = _num(r"with SimpleWorker in ([0-9.]+) seconds", out)
    accounting = account(2 * c.n, step.get("tally") or {})
    accounting["rq_failed_registry"] = int(m.redis("ZCARD", "rq:failed:default") or 0)
    status = status_of(step, accounting=accounting, need={"Worker": worker, "SimpleWorker": simple})
    runs = []
    for queue, figure in (("rq-worker", worker), ("rq-simple", simple)):
        cfg = Config(c.bench, queue, c.setup, c.n, c.path, c.params)
        runs.append(
            ClaimsRun(
                **base_run(cfg, rep, [step]),
                figures={"process_s": figure},
                accounting=accounting,
                status=status,
                wall_s=_elapsed(step),
            )
        )
    return runs


# -- streaq benchmarks/ --------------------------------------------------------------------------------
STREAQ_BACKLOG = {
    "arq": ("ZCARD", "arq:queue"),
    "saq": ("LLEN", "saq:default:queued"),
    "taskiq": ("XLEN", "taskiq"),
}


def streaq_worker_procs(lib: str, workers: int) -> tuple[list[list[str]], dict]:
    """The author's worker commands (benchmarks/README.md), and how their end is known."""
    if lib == "arq":  # arq 0.28 has no --workers: the fork's --workers started W interpreters
        return [["arq", "--burst", "bench_arq.WorkerSettings"]] * workers, {"kind": "exit"}
    if lib == "saq":  # the saq CLI under uvloop, as the author's ran (streaq's import installed it)
        boot = "import uvloop; uvloop.install(); from saq.__main__ import main; main()"
        return [["python", "-c", boot, "--quiet", "bench_saq.settings", "--workers", str(workers)]], {"kind": "exit"}
    if lib == "streaq":
        return [["streaq", "run", "--burst", "--workers", str(workers), "bench_streaq:worker"]], {"kind": "exit"}
    argv = ["taskiq", "worker", "--workers", str(workers), "--max-async-tasks", "32", "bench_taskiq:broker"]
    return [[*argv, "--max-prefetch", "32"]], {"kind": "xgroup", "stream": "taskiq"}


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
    enqueued_s = _num(r"enqueued \d+ tasks in ([0-9.]+)s", "".join(enqueue.get("kept") or []))
    backlog = STREAQ_BACKLOG.get(lib)
    queued = int(m.redis(*backlog) or 0) if backlog else None
    procs, done = streaq_worker_procs(lib, workers)
    if done["kind"] == "xgroup":
        done["n"] = c.n
    ideal = c.n / (workers * STREAQ_CONCURRENCY) * seconds
    timeout = 120 + 3 * max(ideal, c.n / 300) + 2 * workers
    work = m.step(run, "streaq", procs, done, env={"N_TASKS": str(c.n)}, limited=c.setup == LIMITED, timeout_s=timeout)
    tally = work.get("tally") or {}
    first_last = _span(tally)
    figures: dict[str, float | None] = {
        "enqueue_s": enqueued_s,
        "spawn_done_s": round(work["spawn_done_s"], 4) if work.get("spawn_done_s") else None,
        "first_last_s": first_last,
    }
    if seconds:
        figures["efficiency"] = round(c.params["rounds"] * seconds / first_last, 3) if first_last else None
    if lib == "arq" and workers == 1 and not seconds:
        # one arq process at max_jobs 32 reads at most 160 jobs a poll (queue_read_limit), a poll every 0.5 s
        figures["noop_floor_s"] = math.ceil(c.n / 160) * 0.5
    if lib == "saq":
        printed = [float(x) for x in re.findall(r"finished in (\d+)ms", "\n".join(work.get("output") or []))]
        figures["saq_printed_s"] = max(printed) / 1000 if printed else None
    accounting = account(c.n, tally)
    if queued is not None:
        accounting["queued_after_enqueue"] = queued
    if lib == "taskiq":  # its bodies take no context: executions are counted, ids not
        accounting = account(c.n, tally, distinct=min(c.n, tally.get("executions", 0)))
        accounting["ids"] = "not counted (the body has no context); duplicates = executions beyond N"
    return ClaimsRun(
        **base_run(c, rep, [enqueue, work]),
        figures=figures,
        accounting=accounting,
        status=status_of(enqueue, work, accounting=accounting),
        wall_s=_elapsed(work),
    )


# -- steventen/python_queue_benchmark ------------------------------------------------------------------------
STEVENTEN_COMMANDS: dict[str, tuple[str, list[list[str]]]] = {
    "rq": ("rq", [["rq", "worker-pool", "-q", "-n", "10"]]),
    # supervisord's numprocs=10 of `arq tasks.WorkerSettings`
    "arq": ("arq", [["arq", "tasks.WorkerSettings"]] * 10),
    "celery-threads": (
        "celery",
        [["celery", "-q", "--skip-checks", "-A", "tasks", "worker", "--loglevel=info", "-c", "10", "-P", "threads"]],
    ),
    "celery-processes": (
        "celery",
        [["celery", "-q", "--skip-checks", "-A", "tasks", "worker", "--loglevel=info", "-c", "10", "-P", "processes"]],
    ),
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
    enqueued_s = _num(r"All jobs enqueued within:\s+([0-9.]+) seconds", "\n".join(enqueue.get("output") or []))
    work = m.step(run, cwd, procs, {"kind": "log", "n": c.n}, timeout_s=120 + c.n / 20, poll_s=0.05)
    jobs = work.get("job_lines") or {}
    last, first = jobs.get("last"), jobs.get("first")
    figures = {
        "enqueue_s": enqueued_s,
        "start_last_s": round(last - work["started"], 4) if last and work.get("started") else None,
        "first_last_s": round(last - first, 4) if last and first else None,
    }
    accounting = account(c.n, {}, executions=jobs.get("lines", 0), distinct=jobs.get("distinct", 0))
    return ClaimsRun(
        **base_run(c, rep, [enqueue, work]),
        figures=figures,
        accounting=accounting,
        status=status_of(enqueue, work, accounting=accounting, need={"enqueue": enqueued_s}),
        wall_s=_elapsed(work),
    )


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
    enqueued_s = _num(r"enqueued \d+ tasks in ([0-9.]+)s", "\n".join(enqueue.get("output") or []))
    ids = f"claims:{run}:ids"
    timeout = 120 + c.n * (0.5 if c.setup == LIMITED else 0.1)
    work = m.step(
        run, "own", BLOG_WORKERS[c.queue], {"kind": "scard", "key": ids, "n": c.n}, limited=c.setup == LIMITED,
        timeout_s=timeout, poll_s=0.05,
    )  # fmt: skip
    tally = work.get("tally") or {}
    span = _span(tally)
    figures = {
        "enqueue_s": enqueued_s,
        "rate": round(c.n / span, 2) if span else None,
        "first_last_s": span,
        "peak_rss_mb": work.get("peak_rss_mb"),
    }
    accounting = account(c.n, tally)
    return ClaimsRun(
        **base_run(c, rep, [enqueue, work]),
        figures=figures,
        accounting=accounting,
        status=status_of(enqueue, work, accounting=accounting),
        wall_s=_elapsed(work),
    )


def blog_calibrate(m: Machine, run: str, limited: bool) -> float | None:
    """The cpu job's body alone, in ms: how much of a task is hashing here."""
    step = m.step(run, "own", [["python", "blog_jobs.py", "calibrate"]], {"kind": "exit"}, limited=limited)
    return _num(r"cpu body ([0-9.]+) ms", "\n".join(step.get("output") or []))


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
    enqueued_s = _num(r"Enqueued \d+ messages in ([0-9.]+) seconds", "\n".join(enqueue.get("output") or []))
    queued = int(m.redis(*DRAMATIQ_BACKLOG[lib]) or 0)
    timeout = 120 + c.n * (0.4 if c.setup == LIMITED else 0.05)
    work = m.step(
        run, "own", [[*script, "work", "--lib", lib, "--count", str(c.n), "--processes", str(processes)]],
        {"kind": "exit"}, limited=c.setup == LIMITED, timeout_s=timeout,
    )  # fmt: skip
    took = _num(r"Took ([0-9.]+) seconds", "\n".join(work.get("output") or []))
    executions = int(m.redis("GET", "latench-bench-counter") or 0)
    distinct = int(m.redis("SCARD", "latench-bench-counter:ids") or 0)
    accounting = account(c.n, {}, executions=executions, distinct=distinct)
    accounting["queued_after_enqueue"] = queued
    return ClaimsRun(
        **base_run(c, rep, [enqueue, work]),
        figures={"enqueue_s": enqueued_s, "process_s": took, "rate": round(c.n / took, 2) if took else None},
        accounting=accounting,
        status=status_of(enqueue, work, accounting=accounting, need={"Took": took}),
        wall_s=_elapsed(work),
    )


# -- The same jobs through the lab's own path --------------------------------------------------------------
# shape -> (the author's benchmark and the figure its bare rows are read from, the column there,
#           N at scale 1, concurrency, IO_LATENCY_MS, queues, knobs of the lab's workers)
LAB_SHAPES: dict[str, tuple[str, str, str, int, int, int, tuple[str, ...], dict[str, str]]] = {
    "saq-noop": ("saq_simple", "noop_own_s", "", 1000, 10, 0, ("saq", "arq", "rq"), {"RQ_CONCURRENCY": "1"}),
    # sleep(random()/20) has a mean of 25 ms: the lab's io/simple sleeps a fixed IO_LATENCY_MS
    "saq-sleep": ("saq_simple", "sleep_own_s", "", 1000, 10, 25, ("saq", "arq", "rq"), {"RQ_CONCURRENCY": "1"}),
    "streaq-noop-w1": ("streaq_noop", "first_last_s", "w1", 4000, 32, 0, ("streaq", "saq", "taskiq", "arq"), {}),
    "blog-io": (
        "blog_io", "first_last_s", "", 1000, 10, 100, ("taskiq", "dramatiq", "streaq", "arq", "celery"),
        {"ARQ_POLL_DELAY": "0.01", "CELERY_POOL": "threads", "CELERY_PREFETCH_MULTIPLIER": "10"},
    ),
}  # fmt: skip
LAB_API = "lab-api"


def lab_env(concurrency: int, latency_ms: int, knobs: dict[str, str]) -> dict[str, str]:
    return {
        "REDIS_URL": "redis://localhost:6379/0",
        "CONCURRENCY": str(concurrency),
        "IO_LATENCY_MS": str(latency_ms),
        "LIBRARY_LOG_LEVEL": "WARNING",
        **knobs,
    }


def lab_path(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    """The lab's API enqueues N io/simple tasks (services/bare/loadgen.py, 20 connections),
    its worker stopped; then the lab's worker of the queue drains them; the ledger counts."""
    p, queue = c.params, c.queue
    env = lab_env(p["concurrency"], p["io_latency_ms"], p["knobs"])
    api = m.service(LAB_API, ["python", "-m", "services.api"], env)
    try:
        ready = m.step(
            run, "/app", [["python", "-c", READY, queue]], {"kind": "exit"}, env=env, timeout_s=90, keep=r"^ready"
        )
        url = f"http://localhost:8000/api/v1/incr/io/simple/{queue}"
        load = ["python", "-m", "services.bare.loadgen", url, "--requests", str(c.n), "--users", "20"]
        enqueue = m.step(
            run, "/app", [[*load, "--warmup", "0", "--run", run]], {"kind": "exit"}, timeout_s=300, keep=r"^\{"
        )
    finally:
        m.stop_service(api)
    sent = _json_line(enqueue.get("kept"))
    ledger_key, field = f"lab:run:{run}:ledger", f"{queue}:io/simple"
    done = {"kind": "ledger", "key": ledger_key, "field": field, "n": int(sent.get("ok") or c.n)}
    work = m.step(run, "/app", [["python", "-m", f"workers.{queue}_queue"]], done, env=env, timeout_s=120 + c.n / 20)
    counts = m.redis_hash(ledger_key)
    get = lambda stat: int(counts.get(f"{field}:{stat}", 0))  # noqa: E731
    accounting = {
        "enqueued": get("enqueued"),
        "completed": get("completed"),
        "failed": get("failed"),
        "duplicates": get("duplicates"),
        "lost": get("enqueued") - get("completed") - get("failed"),
        "requests_ok": sent.get("ok"),
    }
    first, end = work.get("first_started_seen"), work.get("done_at")
    figures = {
        "enqueue_s": sent.get("elapsed_s"),
        "api_rps": sent.get("rps"),
        "spawn_done_s": round(work["spawn_done_s"], 4) if work.get("spawn_done_s") else None,
        "first_last_s": round(end - first, 4) if first and end else None,
    }
    return ClaimsRun(
        **base_run(c, rep, [ready, enqueue, work]),
        figures=figures,
        accounting=accounting,
        status=status_of(ready, enqueue, work, accounting=accounting, need={"first_last_s": figures["first_last_s"]}),
        wall_s=_elapsed(work),
    )


# Waits for the lab's API to answer /readyz for the queue (its library imported), then says so.
READY = """
import sys, time, urllib.request
for _ in range(600):
    try:
        with urllib.request.urlopen(f"http://localhost:8000/readyz?queues={sys.argv[1]}", timeout=2) as r:
            if r.status == 200:
                print("ready"); break
    except Exception:
        time.sleep(0.1)
"""


def _json_line(lines: list[str] | None) -> dict:
    for line in reversed(lines or []):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def lab_configs(scale: float) -> list[Config]:
    out = []
    for shape, (bench, figure, column, n, concurrency, latency, queues, knobs) in LAB_SHAPES.items():
        for q in queues:
            params = {
                "column": shape,
                "shape": shape,
                "concurrency": concurrency,
                "io_latency_ms": latency,
                "knobs": knobs,
                "bare": {"bench": bench, "figure": figure, "column": column},
            }
            out.append(Config("lab_path", q, UNLIMITED, scaled(n, scale), "lab", params))
    return out


# -- The plan ------------------------------------------------------------------------------------------------
MEASURE: dict[str, Callable[..., ClaimsRun | list[ClaimsRun]]] = {
    "saq_simple": saq_simple,
    "rq_doc": rq_doc,
    "streaq_noop": streaq,
    "streaq_sleep": streaq,
    "steventen": steventen,
    "blog_io": blog,
    "blog_cpu": blog,
    "dramatiq_fib": dramatiq_fib,
    "lab_path": lab_path,
}
BENCH_ORDER = tuple(MEASURE)
# One repetition at most: streaq's sleep(1) set is set by its concurrency (little spread, minutes
# of wall time), and the lab's own path is a comparison beside the benchmarks, not one of them.
MOST_REPS = {"streaq_sleep": 1, "lab_path": 1}


def configs(bench: str, setup: str, scale: float, quick: bool) -> list[Config]:
    """The configurations of one benchmark in one setup (none where the setup is skipped)."""
    lim = setup == LIMITED
    if bench == "saq_simple":
        n = scaled(250 if lim else 1000, scale)
        return [Config(bench, q, setup, n, "author") for q in ("saq", "arq", "rq")]
    if bench == "rq_doc":
        return [Config(bench, "rq-worker", setup, scaled(250 if lim else 1000, scale), "author")]
    if bench == "streaq_noop":
        columns = {1: 1} if lim or quick else STREAQ_NOOP_WORKERS
        n = scaled(1000 if lim else 4000, scale)
        return [
            Config(bench, q, setup, n, "author", {"workers": w, "column": f"w{col}", "sleep": 0})
            for col, w in columns.items()
            for q in ("streaq", "saq", "taskiq", "arq")
        ]
    if bench == "streaq_sleep":
        if lim:
            return []  # 0.2 CPU keeps up with this rate: the limit would change nothing
        rounds = STREAQ_SLEEP_ROUNDS if not quick else 1
        workers = STREAQ_SLEEP_WORKERS if not quick else (10,)
        return [
            Config(bench, q, setup, rounds * w * STREAQ_CONCURRENCY, "author", {"workers": w, "column": f"w{w}", "sleep": 1, "rounds": rounds})
            for w in workers
            for q in ("streaq", "saq", "taskiq", "arq")
        ]  # fmt: skip
    if bench == "steventen":
        if lim:
            return []  # ten interpreters booting in 0.2 CPU: the figure would be import time
        return [Config(bench, q, setup, scaled(4000, scale), "author", {"workers": 10}) for q in STEVENTEN_COMMANDS]
    if bench in ("blog_io", "blog_cpu"):
        kind = bench.removeprefix("blog_")
        n = scaled(300 if lim and kind == "cpu" else 1000, scale)
        return [Config(bench, q, setup, n, "own", {"kind": kind, "concurrency": 10}) for q in BLOG_WORKERS]
    if bench == "lab_path":
        return [] if lim else lab_configs(scale)
    if bench == "dramatiq_fib":
        processes = 1 if lim else 8
        out = []
        for q in ("dramatiq", "celery", "rq"):
            n = scaled((250 if q == "rq" else 1000) if lim else 4000, scale)
            out.append(Config(bench, q, setup, n, "port", {"processes": processes}))
        return out
    raise ValueError(bench)
