"""The authors' jobs through the lab's own path: the lab's API enqueues, its
worker drains, its ledger counts; set beside the author's path's figure for
the same job (records/claims.py, lab_rows)."""

from __future__ import annotations

import json
from typing import Any, cast

from labctl.experiments.claims.machine import Machine
from labctl.experiments.claims.steps import UNLIMITED, Config, run_record, scaled
from labctl.records.claims import ClaimsRun

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


def lab_path(m: Machine, c: Config, rep: int, run: str) -> ClaimsRun:
    """The lab's API enqueues N io/simple tasks (services/bare/loadgen.py, 20 connections),
    its worker stopped; then the lab's worker of the queue drains them; the ledger counts."""
    p, queue = c.params, c.queue
    env = {
        "REDIS_URL": "redis://localhost:6379/0",
        "CONCURRENCY": str(p["concurrency"]),
        "IO_LATENCY_MS": str(p["io_latency_ms"]),
        "LIBRARY_LOG_LEVEL": "WARNING",
        **p["knobs"],
    }
    api = m.service(LAB_API, ["python", "-m", "services.api"], env)
    try:
        ready = m.step(
            run,
            "/app",
            [["python", "-m", "services.bare.wait_ready", queue]],
            {"kind": "exit"},
            env=env,
            timeout_s=90,
            keep=r"^ready",
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
    accounting: dict[str, Any] = {
        stat: int(counts.get(f"{field}:{stat}", 0)) for stat in ("enqueued", "completed", "failed", "duplicates")
    }
    accounting["lost"] = accounting["enqueued"] - accounting["completed"] - accounting["failed"]
    accounting["requests_ok"] = sent.get("ok")
    first, end = work.get("first_started_seen"), work.get("done_at")
    figures = {
        "enqueue_s": sent.get("elapsed_s"),
        "api_rps": sent.get("rps"),
        "spawn_done_s": round(work["spawn_done_s"], 4) if work.get("spawn_done_s") else None,
        "first_last_s": round(end - first, 4) if first and end else None,
    }
    return run_record(
        c, rep, [ready, enqueue, work], figures, accounting, need={"first_last_s": figures["first_last_s"]}
    )


def _json_line(lines: list[str] | None) -> dict[str, Any]:
    for line in reversed(lines or []):
        try:
            return cast(dict[str, Any], json.loads(line))
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
