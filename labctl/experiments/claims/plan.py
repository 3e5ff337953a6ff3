"""The benchmarks and their configurations: each as its author runs it, scaled
where it cannot fit two cores or the hour the full run is sized for
(`configs`), and the function that measures one run of one configuration
(`MEASURE`: authors.py, ports.py, lab_path.py).

Sizes (full run, scale=1; docs/claims.md, "What runs"): SAQ simple 1,000
(limited 250); RQ's doc 1,000 (250); streaq no-op 4,000 at 1/2/4/8 processes
(1/5 of 20,000, 2/10 of the processes per core; limited 1,000 at 1 process);
streaq sleep(1) at the literal 10/20 processes, 5 rounds of 32 per process,
and at 40 processes the author's 20,000, once; steventen 4,000 at his 10
workers; the blog 1,000 (limited: cpu 300); Dramatiq's fib 4,000 (limited
1,000, RQ 250). `scale` multiplies every N but the sleep(1) set's. A
configuration no claim reads runs once (`configs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from labctl.experiments.claims.authors import STEVENTEN_COMMANDS, rq_doc, saq_simple, steventen, streaq
from labctl.experiments.claims.lab_path import lab_configs, lab_path
from labctl.experiments.claims.ports import BLOG_WORKERS, blog, dramatiq_fib
from labctl.experiments.claims.steps import LIMITED, Config, scaled
from labctl.records.claims import ClaimsRun
from labctl.records.claims_published import BENCHES, CLAIMS, STREAQ_CONCURRENCY, STREAQ_SLEEP_WORKERS

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
STREAQ_QUEUES = ("streaq", "saq", "taskiq", "arq")
# Columns of streaq's noop table and their scaled process counts here (2/10 per core: 1 stays 1).
STREAQ_NOOP_WORKERS = {1: 1, 10: 2, 20: 4, 40: 8}
STREAQ_SLEEP_ROUNDS = 5  # N = rounds x workers x 32: the ideal time is rounds x 1 s


def rests_a_claim(c: Config) -> bool:
    """Whether some claim's ratio reads this configuration's figure (records/data/claims_published.toml)."""
    column = str(c.params.get("column", ""))
    return any(cl.bench == c.bench and c.queue in (cl.num, cl.den) and cl.column == column for cl in CLAIMS)


def configs(bench: str, setup: str, scale: float, quick: bool) -> list[Config]:
    """The configurations of one benchmark in one setup (none where the setup is skipped). A
    configuration no claim rests on (a process count no claim reads, a row shown beside the claimed
    ones, the lab's own path) runs once: only a claim needs the interval the repetitions give."""
    return [
        c if c.most_reps or rests_a_claim(c) else replace(c, most_reps=1) for c in _configs(bench, setup, scale, quick)
    ]


def _configs(bench: str, setup: str, scale: float, quick: bool) -> list[Config]:
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
            for q in STREAQ_QUEUES
        ]
    if bench == "streaq_sleep":
        if lim:
            return []  # 0.2 CPU keeps up with this rate: the limit would change nothing
        if quick:
            return [Config(bench, q, setup, 10 * STREAQ_CONCURRENCY, "author", {"workers": 10, "column": "w10", "sleep": 1}) for q in STREAQ_QUEUES]  # fmt: skip
        # 10 and 20 processes: 5 rounds of 32 each, every repetition (the ratios C3 rests on); 40 processes:
        # the author's own 20,000 tasks, once (arq's published failure there is an event, not a ratio).
        *rounds, last = STREAQ_SLEEP_WORKERS
        out = [
            Config(bench, q, setup, STREAQ_SLEEP_ROUNDS * w * STREAQ_CONCURRENCY, "author", {"workers": w, "column": f"w{w}", "sleep": 1})
            for w in rounds
            for q in STREAQ_QUEUES
        ]  # fmt: skip
        return out + [Config(bench, q, setup, BENCHES[bench].n, "author", {"workers": last, "column": f"w{last}", "sleep": 1}, most_reps=1) for q in STREAQ_QUEUES]  # fmt: skip
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
