"""`make scale`: how a queue's throughput follows its number of workers.

    make scale worker=celery replicas="1 2 4 8" [reps=3 seed=N requests=3000 users=100 endpoint=io/simple run=NAME]
    make scale worker=celery nodes="1 2 3" [per_node=1 reps=3 ...]     (on a Swarm of several nodes)

Each replica count runs `reps` times: in each repetition every count once, in
an order drawn at random from `seed` (given, or drawn and recorded), so that
the machine's drift over the experiment and whatever one run leaves to the
next fall on every count alike. For each run: the queue's worker service is
scaled to the count (on compose `docker compose up --scale`, on a Swarm stack
`docker service scale`: whichever `make load` drives,
labctl/platform/orchestrator.py) and waits until every replica is healthy and
scraped by Prometheus; then the same `make load` runs with wait=1 (the next
run starts with an empty backlog) as the run <base>-<n>r-rep<i>. From its
record and Prometheus, each run gives:

  API req/s     Locust's requests over the load (the record's RPS), and its p95
  drain rate    tasks completed per second, from the first enqueue to the last
                completion (the ledger): the pool's throughput
  Redis CPU     the cores Redis used over the run, mean and peak (a 6 s rate): a
                single-threaded Redis is the ceiling once it nears 1
  workers' CPU  the replicas' cores summed; and how many replicas ran tasks

and each count, over its runs, each figure's median with its confidence interval and
n, and its speed-up: its drain rate over the first count's, with the interval
of that ratio (the runs independent: labctl/stats.py's `ratio`), "no
difference shown" where the interval holds 1.

Over nodes (nodes="1 2 3", a Swarm only): the same steps with the queue's workers
on the first 1, 2, 3 nodes labelled `worker` (else `lab`), per_node replicas on
each (`docker service update`: every other node excluded by its hostname, at most
per_node a node), so that each count adds machines of the same size; the run is
<base>-<n>n-rep<i>, and the tables have a column of the nodes.

The tables go to results/<base>.md and .json, the plots (inline SVG, no network
needed) to results/<base>.html. The worker is scaled back to its replica count
at the start (and, over nodes, placed as the stack file says again). Every knob
of the make line reaches the runs as for `make load`.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from lab.queues import BROKER_NAMES
from labctl.clients.prometheus import Prometheus
from labctl.config import Opt
from labctl.errors import EXIT_FAILED, EXIT_OK, LabError, ParamError
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load
from labctl.platform.lab import Lab
from labctl.platform.swarm import Swarm
from labctl.polling import wait_until
from labctl.records.run import Platform, RunRecord, ServiceLimits
from labctl.records.scale import ScaleParams, ScaleRecord, ScaleRun, count_figures
from labctl.records.store import Store
from labctl.render import scale_page
from labctl.render.console import Console

SCRAPE_WAIT_S = 60
# Three runs a count are the fewest whose interval is of use: two give the t quantile of one
# degree of freedom (12.7), whose interval holds almost any ratio (docs/swarm.md, "Scaling").
DEFAULT_REPS = 3


# -- Each count -----------------------------------------------------------------------------
def wait_scraped(prom: Prometheus, worker: str, replicas: int, since: float) -> None:
    """Until Prometheus scrapes exactly `replicas` targets of the worker's job, each
    up and scraped after `since` (a removed replica's target goes with its DNS record)."""
    fresh = (0, 0)

    def scraped() -> bool:
        nonlocal fresh
        fresh = prom.fresh_targets(worker, since)
        return fresh == (replicas, replicas)

    if not wait_until(scraped, timeout_s=SCRAPE_WAIT_S):
        raise LabError(f"Prometheus scrapes {fresh[0]} {worker} target(s) ({fresh[1]} fresh), not {replicas}")


def step_queries(worker: str, window: str) -> dict[str, str]:
    """The PromQL of a count's figures over its run's window."""
    return {
        "redis_cpu_mean": (
            f"sum(rate(redis_cpu_sys_seconds_total[{window}])) + sum(rate(redis_cpu_user_seconds_total[{window}]))"
        ),
        # the highest 6 s rate (three scrapes) in the window, every 2 s
        "redis_cpu_peak": (
            "max_over_time((sum(rate(redis_cpu_sys_seconds_total[6s])) + sum(rate(redis_cpu_user_seconds_total[6s])))"
            f"[{window}:2s])"
        ),
        "workers_cpu": f'sum(rate(lab_cpu_seconds_total{{service="{worker}"}}[{window}]))',
        "busy_replicas": (
            f'count(sum by (instance) (increase(lab_task_completed_total{{job="{worker}", queue="{worker}"}}'
            f"[{window}])) > 0)"
        ),
    }


def step_row(replicas: int, record: RunRecord | dict[str, Any], prom: Prometheus | None, worker: str) -> dict[str, Any]:
    """One count's row, from its run's record and Prometheus."""
    record = record.as_json() if isinstance(record, RunRecord) else record
    tasks = record.get("tasks") or {}
    done_s = tasks.get("time_to_execute_all_s")
    row = {
        "replicas": replicas,
        "run": record["run"],
        "rps": record.get("rps"),
        "median_ms": record.get("median_ms"),
        "p95_ms": record.get("p95_ms"),
        "all_done_s": done_s,
        "drain_rate": round(tasks["completed"] / done_s, 1) if done_s else None,
        **{k: tasks.get(k) for k in ("enqueued", "completed", "failed", "duplicates", "lost")},
        "exact": exact(record),
        "warnings": record.get("warnings", []),
    }
    start, end = record.get("load_started_at"), tasks.get("last_settled_at") or record.get("load_ended_at")
    if prom is None or not start or not end:
        return row
    time.sleep(max(0.0, end + 4 - time.time()))  # the scrape after the last completion
    window = f"{max(10, math.ceil(end - start))}s"
    for key, expr in step_queries(worker, window).items():
        values = list(prom.by("", expr, at=min(end + 4, time.time())).values())
        row[key] = round(values[0], 3) if values else (0 if key == "busy_replicas" else None)
    return row


def exact(record: dict[str, Any]) -> bool:
    """Every request answered 202 was enqueued once and completed once (the record's JSON)."""
    tasks = record.get("tasks") or {}
    accepted = (record.get("status_codes") or {}).get("202")
    return bool(
        tasks.get("settled")
        and tasks.get("enqueued") == tasks.get("completed") == accepted
        and not tasks.get("failed")
        and not tasks.get("duplicates")
        and not tasks.get("lost")
    )


def run_step(
    options: LoadOptions, lab: Lab, replicas: int, run: str, ui: Console, nodes: list[str] | None = None, rep: int = 1
) -> tuple[ScaleRun, RunRecord]:
    """Scale (or spread over `nodes`), wait until scraped, run the load to its last task;
    the run's row and its record."""
    on = f" on {len(nodes)} node(s), {', '.join(nodes)}" if nodes else ""
    ui.say(f"\n== {options.worker}: {replicas} replica(s){on}, repetition {rep}")
    since = time.time()
    if nodes and isinstance(lab, Swarm):
        lab.spread(options.worker, nodes, replicas // len(nodes))
    else:
        lab.scale(options.worker, replicas)
    prom_addr = lab.port("prometheus", 9090)
    prom = Prometheus(prom_addr) if prom_addr else None
    if prom is not None:
        wait_scraped(prom, options.worker, replicas, since)
    record = run_load(options.but(run=run, wait=True), lab, ui)
    row = {"rep": rep, **step_row(replicas, record, prom, options.worker)}
    if nodes:
        row = {"nodes": len(nodes), **row, "node_names": nodes}
    if record.unsettled() or not row["exact"]:
        row["warnings"] = [*row["warnings"], "the run did not settle exactly"]
    return ScaleRun.model_validate(row), record


def parse_counts(replicas: str, name: str = "replicas") -> list[int]:
    counts = [int(n) for n in replicas.split() if n.isdigit() and int(n) > 0]
    if not counts or len(counts) != len(replicas.split()) or len(set(counts)) != len(counts):
        raise ParamError(f'{name}="{replicas}": whole numbers above 0, each once, e.g. "1 2 4 8"')
    return counts


def run_order(counts: list[int], reps: int, seed: int) -> list[list[int]]:
    """Each repetition's counts, shuffled by a generator seeded with `seed`: the same seed, the same order."""
    rng = random.Random(seed)
    return [rng.sample(counts, len(counts)) for _ in range(reps)]


def worker_nodes(lab: Lab, counts: list[int]) -> list[str]:
    """The nodes a queue's workers may be spread over, in order: those labelled
    `worker`, else `lab`; as many as the largest count."""
    if not isinstance(lab, Swarm):
        raise ParamError(
            "nodes= spreads the workers over the nodes of a Swarm: make stack-up (or make cluster-up) first"
        )
    nodes = lab.nodes_with_role("worker") or lab.nodes_with_role("lab")
    if len(nodes) < max(counts):
        raise ParamError(
            f"nodes={max(counts)}: only {len(nodes)} node(s) labelled worker (or lab): {nodes} (make cluster-up nodes=6)"
        )
    return nodes


def write_outputs(summary: ScaleRecord, directory: Path) -> list[Path]:
    store = Store(directory)
    return [
        store.save(summary),
        store.write_text(summary.base, ".md", scale_page.markdown(summary)),
        store.write_text(summary.base, ".html", scale_page.html_page(summary)),
    ]


@dataclass
class ScaleOptions:
    """make scale's own options."""

    replicas: Annotated[str, Opt('replica counts, e.g. "1 2 4 8"')] = "1 2 4 8"
    nodes: Annotated[str, Opt('or node counts to spread the workers over, e.g. "1 2 3" (a Swarm)')] = ""
    per_node: Annotated[int, Opt("with nodes: the workers' replicas on each node", min=1)] = 1
    reps: Annotated[int, Opt("runs of each count, the counts in a random order in each", min=1)] = DEFAULT_REPS
    seed: Annotated[int | None, Opt("the seed of that order (default: drawn, and recorded)")] = None


def scale(options: LoadOptions, plan: ScaleOptions, lab: Lab, ui: Console) -> int:
    nodes, per_node, reps = plan.nodes, plan.per_node, plan.reps
    if options.worker not in BROKER_NAMES:
        raise ParamError(f"worker={options.worker or '?'}: one broker queue ({', '.join(BROKER_NAMES)})")
    if reps < 1:
        raise ParamError(f"reps={reps}: a whole number above 0")
    counts = parse_counts(nodes, "nodes") if nodes else parse_counts(plan.replicas)
    spread = worker_nodes(lab, counts) if nodes else []
    params = options.parse()  # fail before scaling anything
    base = options.run or f"scale-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{options.worker}"
    seed = random.SystemRandom().randrange(2**31) if plan.seed is None else plan.seed
    summary = ScaleRecord(
        base=base,
        worker=options.worker,
        params=ScaleParams(
            requests=params.iterations,
            duration_s=params.duration_s,
            endpoint=params.endpoint_label,
            users=params.users,
        ),
        platform=Platform.model_validate(lab.describe()),
        axis="nodes" if spread else "replicas",
        per_node=per_node if spread else None,
        counts=counts,
        reps=reps,
        seed=seed,
        order=run_order(counts, reps, seed),
    )
    ui.say(f"{reps} repetition(s) of {len(counts)} count(s), each in its own order (seed {seed}):")
    for rep, order in enumerate(summary.order, 1):
        ui.say(f"  repetition {rep}: {' '.join(map(str, order))}")
    before = lab.replicas(options.worker)
    first: RunRecord | None = None
    try:
        for rep, order in enumerate(summary.order, 1):
            for n in order:
                if spread:
                    row, record = run_step(options, lab, n * per_node, f"{base}-{n}n-rep{rep}", ui, spread[:n], rep=rep)
                else:
                    row, record = run_step(options, lab, n, f"{base}-{n}r-rep{rep}", ui, rep=rep)
                summary.rows.append(row)
                first = first or record
    except LabError as exc:
        ui.say(f"\nmake scale: {exc}")
    finally:
        if spread and isinstance(lab, Swarm):
            ui.say(f"\n{options.worker} back to {before} replica(s), placed as the stack file says")
            lab.unspread(options.worker, before)
        elif before:
            ui.say(f"\nscaling {options.worker} back to {before} replica(s)")
            lab.scale(options.worker, before)
    if first is None:
        return EXIT_FAILED
    api = first.limits.api or ServiceLimits()
    worker = first.limits.workers.get(options.worker) or ServiceLimits()
    summary.api_limits = f"{api.cpus}cpu/{api.memory}"
    summary.worker_limits = f"{worker.cpus}cpu/{worker.memory} each"
    summary.by_count = [figures.as_json() for figures in count_figures(summary)]
    paths = write_outputs(summary, Path(options.results_dir))
    ui.say("\n" + scale_page.markdown(summary))
    ui.say("written: " + ", ".join(str(p) for p in paths))
    done = len(summary.rows) == len(counts) * reps
    return EXIT_OK if done and all(r.exact for r in summary.rows) else EXIT_FAILED
