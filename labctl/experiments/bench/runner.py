"""`make bench`: what the lab costs next to each library on its own.

    uv run python -m labctl bench [--worker arq|...|all] [--requests 3000] [--users 50] [--warmup 200]
                                  [--rounds 8] [--drain-s 30] [--drain-window-s 1]

For each queue, under the limits `make up` applied (read from the running
containers, never changed):
1. waits for the lab's queue to be empty (tasks left by earlier runs would be
   drained first, and spoil its drain), then stops the lab's worker of that
   queue, so both APIs' tasks wait in their queues;
2. drives the bare API (compose service `bench-api`, services/bare/api.py)
   and the lab's API at the same time, round after round, each round on a
   new process of each (both restarted), with the same requests (two
   services/bare/loadgen.py processes in the `bench-client` container), and
   samples each API's working-set memory and CPU from its
   cgroup meanwhile;
3. drains what each API enqueued: the bare worker (services/bare/worker.py)
   under the lab worker's limits and the lab's own worker, both started, run
   in turns of short windows while the other is paused, for --drain-s and
   400 tasks each at least (paired_windows.py); then the lab's worker empties its queue; for arq
   all this once more at ARQ_POLL_DELAY=0.01 s;
4. prints the table, writes results/bench-<time>.json (shown by `make results`)
   and starts the lab's worker again.
The budget (docs/bench.md): lab/bare >= 0.9 for RPS and drain, each ratio the
median over its pairs (the rounds; the drain's pairs of windows) with its
interval and n, `unsure` where the interval holds 0.9 (run more rounds);
and the lab API's peak at most 120 MB.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, cast

from lab.queues import BROKERS, BY_NAME
from labctl.clients.grafana import Grafana, annotation
from labctl.config import RESULTS_DIR, RESULTS_HELP, Opt
from labctl.errors import EXIT_OK, DockerError, LabError, LabNotRunning, ParamError
from labctl.experiments.bench.paired_windows import Counter, PairedDrain, Side, cpu_limit_lifted, paused, sides
from labctl.load_run.backlog import wait_for_empty
from labctl.platform import containers as C
from labctl.platform import docker
from labctl.platform.cgroups import PeakMemory, cpu_seconds
from labctl.platform.compose import Compose
from labctl.platform.lab import answers
from labctl.polling import Progress, wait_until
from labctl.queues import EMPTIER_SETTINGS, running_brokers
from labctl.records.bench import BenchRecord, BenchRow, row_ratios
from labctl.records.run import limit_text
from labctl.records.store import Store
from labctl.render import bench_table
from labctl.render.bench_table import FAST_ARQ_POLL
from labctl.render.console import Console
from services.bare.queues import BARE, KEYS, done_key

QUEUES = ("background", *BARE)
LIMIT_KNOBS = {b.name: b.limits_prefix for b in BROKERS if b.name in BARE}


@dataclass
class BenchOptions:
    worker: Annotated[str, Opt("a queue, or all")] = "all"
    requests: Annotated[int, Opt("requests per API and queue")] = 3000
    users: Annotated[int, Opt("concurrent connections")] = 50
    warmup: Annotated[int, Opt("requests sent first, not measured")] = 200
    # Rounds enough that the RPS ratio's interval can tell most queues from the budget (docs/bench.md).
    rounds: Annotated[
        int, Opt("rounds of the bare and the lab API driven at the same time: the RPS ratio's pairs", min=1)
    ] = 8
    drain_s: Annotated[
        float,
        Opt(
            "how long each worker's drain is measured, in windows taken in turns; the lab's queue is emptied regardless"
        ),
    ] = 30
    drain_window_s: Annotated[float, Opt("the shortest drain window (longer if it would hold under 40 tasks)")] = 1.0
    backlog_wait_s: Annotated[
        float, Opt("how long a lab queue's earlier backlog may take to empty before the bench gives up")
    ] = 120
    results_dir: Annotated[Path, Opt(RESULTS_HELP, "--results-dir")] = RESULTS_DIR


# -- The bench ---------------------------------------------------------------------------
class Bench:
    def __init__(self, args: BenchOptions, compose: Compose, say: Callable[[str], None] = print):
        self.args, self.compose, self.say = args, compose, say
        self.stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        api = compose.inspect("api")
        if not api:
            raise LabNotRunning("the lab is not running: make up first")
        self.api_limits = C.limits_of(api)
        self.api_env = C.env_of(api[0])
        self.mode = self.api_env.get("ENQUEUE_MODE", "await")
        self.workers: dict[str, list[dict[str, Any]]] = {}
        # The bench services get the limits the lab's containers really have.
        self.env = {
            "API_CPUS": str(self.api_limits["cpus"] or 0),
            "API_MEM": str(self.api_limits["memory_bytes"] or 0),
            "ENQUEUE_MODE": self.mode,
        }

    def worker_limits(self, queue: str) -> dict[str, Any]:
        containers = self.compose.inspect(queue)
        if not containers:
            raise LabError(f"the lab's {queue} worker is not running: make up first")
        self.workers[queue] = containers
        limits = C.limits_of(containers, queue)
        prefix = LIMIT_KNOBS[queue]
        self.env.update({f"{prefix}_CPUS": str(limits["cpus"] or 0), f"{prefix}_MEM": str(limits["memory_bytes"] or 0)})
        for knob in C.KNOBS.get(queue, ()):  # the bare worker gets the lab worker's settings
            if knob in C.env_of(containers[0]):
                self.env[knob] = C.env_of(containers[0])[knob]
        return limits

    def client_up(self) -> None:
        """One load-generator container for the whole bench, each drive a `docker
        exec` in it: drives follow each other within a second, where a container
        start apiece put seconds, and the machine's drift, between them."""
        self.client_name = f"bench-client-{self.stamp}"
        self.compose.start_one_off("bench-client", self.client_name, self.env, command=("sleep", "infinity"))

    def client_down(self) -> None:
        docker.remove_container(self.client_name)

    def client(self, *args: str, timeout: float = 600) -> dict[str, Any]:
        try:
            proc = docker.exec_in(self.client_name, *args, timeout=timeout)
        except DockerError:
            raise LabError(f"`{' '.join(args)}` in the bench client did not finish within {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise LabError(f"`{' '.join(args)}` in the bench client exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return cast(dict[str, Any], json.loads(proc.stdout.strip().splitlines()[-1]))

    def drive(self, service: str, queue: str, run: str) -> dict[str, Any]:
        ids = self.compose.ids(service)
        container = ids[0] if ids else None
        memory = PeakMemory(container) if container else None
        if memory:
            memory.start()
        cpu_before = cpu_seconds(container) if container else None
        state_before = docker.state(container) if container else None
        url = f"http://{service}:8000/api/v1/incr/io/simple/{queue}"
        a = self.args
        began = time.time()
        result = self.client(
            "python",
            "-m",
            "services.bare.loadgen",
            url,
            "--requests",
            str(a.requests),
            "--users",
            str(a.users),
            "--warmup",
            str(a.warmup),
            *(["--run", run] if run else []),
        )
        if memory:
            result["api_peak_mb"] = memory.stop()
        if down := api_down(state_before, docker.state(container) if container else None):
            result["api_down"] = down  # its CPU counter went with it: no CPU figure
        # The API's own CPU over the whole drive, warm-up included: what the
        # lab costs per request, read directly, where RPS also carries the
        # quota's scheduling and the machine's other work.
        elif container and cpu_before is not None and (cpu_after := cpu_seconds(container)) is not None:
            result["api_cpu_s"] = round(cpu_after - cpu_before, 4)
        result["window"] = [round(began, 1), round(time.time(), 1)]  # for Prometheus: the event-loop lag meanwhile
        result["api_started"] = (state_before or {}).get("StartedAt")  # a new process each round
        return result

    def wait_for_empty(self, queue: str) -> None:
        """The lab's queue must start empty: its worker would drain what an
        earlier run left there before this run's tasks, and its drain figure
        would be wrong without a word. The worker, still running, gets
        --backlog-wait-s to empty it (read from Redis, in the bench's client)."""
        wait_for_empty(
            lambda: {queue: self.client("python", "-m", "services.bare.drain", "--backlog", queue)["depth"]},
            queue,
            self.args.backlog_wait_s,
            lambda line: self.say(f"[{queue}] the lab's queue is not empty, its worker empties it: {line}"),
            every_s=5,
            still_full=lambda depth: (
                f"the lab's {queue} queue still holds {depth:.0f} tasks from before the bench, and its "
                f"drain would count them first: let its worker empty it (lab_queue_depth), "
                f"then run make bench again"
            ),
        )

    def restart_apis(self, queue: str) -> None:
        """A new process of each API before each round. A process's speed is
        partly a draw (where its memory landed, say) that it keeps for all its
        drives, so one bench with one process of each read the draw as the
        lab's cost. Fresh processes each round make the rounds independent
        draws, and their mean carries that spread halved (docs/bench.md). The lab's
        API is ready once its producer of the queue is (the library imported), as
        the bare API's is at its start."""
        self.compose.restart("bench-api", "api", extra_env=self.env)
        for service, path in (("bench-api", "/healthz"), ("api", f"/readyz?queues={queue}")):
            if not answers(self.compose, service, 8000, path, every_s=0.2):
                raise LabError(f"{service} did not answer within 60 s of its restart: docker compose logs {service}")

    def redis(self, *command: str) -> str:
        return self.compose.redis_cli(*command).stdout.strip()

    def bench_queue(self, queue: str) -> dict[str, Any]:
        say, c = self.say, self.compose
        row: dict[str, Any] = {"queue": queue}
        if queue != "background":
            row["worker_limits"] = self.worker_limits(queue)
            self.wait_for_empty(queue)
            say(f"[{queue}] stopping the lab's {queue} worker: the tasks wait in the queue")
            c.stop(queue)
        self.redis("DEL", done_key(queue))
        self.empty_bare(queue)
        say(f"[{queue}] starting bench-api ({limit_text(self.api_limits)}, ENQUEUE_MODE={self.mode})")
        c.start_service("bench-api", self.env)
        run = f"bench-{self.stamp}-{queue}"
        rounds: dict[str, list[dict[str, Any]]] = {"bare": [], "lab": []}
        apis = {
            "bare": (f"bare API, {self.args.requests} requests at concurrency {self.args.users}", "bench-api", ""),
            "lab": (f"lab API (run {run})", "api", run),
        }
        # Both APIs are driven at the same moment, each by its own client
        # process: both then meet the same machine, and a round's ratio no longer
        # moves with the machine's speed from one drive to the next (docs/bench.md).
        with ThreadPoolExecutor(2) as pool:
            for i in range(self.args.rounds):
                self.restart_apis(queue)
                say(
                    f"[{queue}] round {i + 1}/{self.args.rounds}: {apis['bare'][0]}, and the {apis['lab'][0]}"
                    f" at the same time ..."
                )
                drives = {
                    side: pool.submit(self.drive, service, queue, side_run)
                    for side, (_, service, side_run) in apis.items()
                }
                for side, drive in drives.items():
                    rounds[side].append(drive.result())
        row["bare"], row["lab"] = combine(rounds["bare"]), combine(rounds["lab"])
        row["run"] = run
        bare_target = row["bare"]["enqueued"]
        lab_target = row["lab"]["enqueued"]
        if queue == "background":  # ran inside the APIs; nothing to drain
            c.remove("bench-api")
            return row
        if self.mode == "after-response":  # a 202 came before its publish: count what was published
            drain: Callable[..., dict[str, Any]] = lambda *question: self.client(
                "python", "-m", "services.bare.drain", *question
            )
            lab_target = row["lab"]["published"] = settled_count(
                lambda: drain("--published", run)["enqueued"], lab_target
            )
            bare_target = row["bare"]["published"] = settled_count(
                lambda: drain("--bare-backlog", queue)["depth"], bare_target
            )
        counter = Counter(self.client_name, done_key(queue), run)
        try:
            self.drain_queue(queue, row, counter, bare_target, lab_target)
        finally:
            counter.close()
            # The bare API stays up through the drain: a backlog too short for it is topped up through both APIs.
            c.remove("bench-api")
            self.empty_bare(queue)
        return row

    def empty_bare(self, queue: str) -> None:
        """The bare queues emptied: before a queue's bench, and after it, for the
        drains end with the bare worker's backlog unfinished, and on PostgreSQL
        that backlog lies in the lab's own tables, beside the lab queue's jobs."""
        self.redis("DEL", *KEYS)
        if queue != "background" and BY_NAME[queue].transport != "redis":
            self.client("python", "-m", "services.bare.drain", "--purge-bare", queue)

    def top_up(self, queue: str, run: str, n: int) -> dict[str, int]:
        """n more tasks into each side's queue, through each side's own API at the same time (the workers
        frozen meanwhile); the tasks each API accepted."""
        apis = {"bare": ("bench-api", ""), "lab": ("api", run)}
        with ThreadPoolExecutor(2) as pool:
            drives = {
                side: pool.submit(
                    self.client,
                    "python",
                    "-m",
                    "services.bare.loadgen",
                    f"http://{service}:8000/api/v1/incr/io/simple/{queue}",
                    "--requests",
                    str(n),
                    "--users",
                    str(self.args.users),
                    "--warmup",
                    "0",
                    *(["--run", side_run] if side_run else []),
                )
                for side, (service, side_run) in apis.items()
            }
            return {side: drive.result()["ok"] for side, drive in drives.items()}

    def paired(self, counter: Counter, bare: Side, lab: Side, queue: str, run: str) -> PairedDrain:
        a = self.args
        return PairedDrain(
            counter,
            bare,
            lab,
            cpu_seconds,
            sides,
            a.drain_window_s,
            a.drain_s,
            self.say,
            top_up=lambda n: self.top_up(queue, run, n),
        )

    @contextmanager
    def emptier(self, queue: str) -> Iterator[None]:
        """For the unmeasured emptying of a queue whose own worker is slow at it whatever its
        CPU (RQ forks a work horse per job, docket looks for work DOCKET_CONCURRENCY tasks at a
        time every 0.1 s: every round's tasks would take the bench many minutes), a one-off
        worker of the queue beside it (labctl/queues.py EMPTIER_SETTINGS); none for the others."""
        settings = EMPTIER_SETTINGS.get(queue)
        if not settings:
            yield
            return
        name = f"bench-empty-{queue}-{self.stamp}"
        unlimited = {f"{LIMIT_KNOBS[queue]}_CPUS": str(os.cpu_count() or 1), f"{LIMIT_KNOBS[queue]}_MEM": "1G"}
        self.compose.start_one_off(queue, name, {**self.env, **unlimited}, settings)
        try:
            yield
        finally:
            docker.remove_container(name)

    def drain_queue(self, queue: str, row: dict[str, Any], counter: Counter, bare_target: int, lab_target: int) -> None:
        """The bare worker and the lab's drain in turns (paired_windows.py); then the lab's empties its queue."""
        c, bench_svc = self.compose, f"bench-{queue}"
        bare_start: Callable[..., Callable[[], None]] = lambda *extra: (
            lambda: c.start_service(bench_svc, {**self.env, **dict(extra)}, recreate=True)
        )
        bare: Callable[..., Side] = lambda *extra: Side(
            "bare", bare_target, bare_start(*extra), lambda: c.ids(bench_svc)
        )
        lab = Side(
            "lab",
            lab_target,
            lambda: c.start(queue),
            lambda: c.ids(queue),
        )
        self.say(f"[{queue}] drains: the bare worker and the lab's, in turns ({bare_target} and {lab_target} tasks)")
        drain = self.paired(counter, bare(), lab, queue, row["run"])
        try:
            with paused(c.ids("prometheus")) as pause:  # the whole drain: paired_windows.py
                result = drain.run()
            row["prometheus_paused"] = [round(pause.frozen_at, 1), round(pause.thawed_at, 1)]
        finally:
            c.remove(bench_svc)
        row["drain_window_s"], row["bare_drain"], row["lab_drain"] = result["window_s"], result["bare"], result["lab"]
        row["drain_topped_up"] = result["topped_up"]
        # What each queue now holds in all, top-ups included: the fast arq drain below goes on from there.
        bare_target, lab_target = drain.sides["bare"].target, lab.target
        if queue != "arq":
            self.say(f"[{queue}] the lab's worker empties its queue (not measured; its CPU limit lifted meanwhile) ...")
            with cpu_limit_lifted(c.ids(queue)), self.emptier(queue):
                drain.wait_until_done(lab)
            return
        # arq once more at ARQ_POLL_DELAY=0.01, on what is left of both queues;
        # the lab's at that setting is a one-off container beside the stopped service.
        c.stop(queue)
        say_fast = f"[arq] again at ARQ_POLL_DELAY={FAST_ARQ_POLL}"
        self.say(say_fast)
        name = f"bench-lab-arq-{self.stamp}"
        one_off = lambda: c.start_one_off("arq", name, self.env, {"ARQ_POLL_DELAY": FAST_ARQ_POLL})
        fast_lab = Side("lab", lab_target, one_off, lambda: docker.container_ids(name))
        fast = self.paired(counter, bare(("ARQ_POLL_DELAY", FAST_ARQ_POLL)), fast_lab, queue, row["run"])
        try:
            with paused(c.ids("prometheus")):
                result = fast.run()
            row["drain_window_s_fast"], row["bare_drain_fast"], row["lab_drain_fast"] = (
                result["window_s"],
                result["bare"],
                result["lab"],
            )
            row["drain_topped_up_fast"] = result["topped_up"]
            self.say(f"{say_fast}: the lab's one-off worker empties its queue (not measured) ...")
            fast.wait_until_done(fast_lab)
        finally:
            c.remove(bench_svc)
            docker.remove_container(name)
            c.start(queue, check=False)

    def run(self, queues: list[str]) -> BenchRecord:
        rows = []
        self.client_up()
        try:
            for queue in queues:
                row = self.bench_queue(queue)
                # As judged now; a reader derives them again from the pairs' figures the row keeps.
                row["judged"] = {
                    name: ratio.as_json() for name, ratio in row_ratios(BenchRow.model_validate(row)).items()
                }
                rows.append(row)
        finally:
            self.client_down()
            self.compose.remove("bench-api", *(f"bench-{q}" for q in LIMIT_KNOBS))
            for queue in queues:
                if queue != "background":
                    self.compose.start(queue, check=False)
        return BenchRecord.model_validate(
            {
                "run": f"bench-{self.stamp}",
                "time": datetime.now().isoformat(timespec="seconds"),
                "mode": self.mode,
                "blocking_publish": self.api_env.get("BLOCKING_PUBLISH", "inline"),
                "requests": self.args.requests,
                "users": self.args.users,
                "warmup": self.args.warmup,
                "api_drives": "together",
                "api_limits": self.api_limits,
                "worker_limits": {q: C.limits_of(cs, q) for q, cs in self.workers.items()},
                "knobs": {q: C.knobs_of(cs, q) for q, cs in self.workers.items()},
                "rows": rows,
            }
        )


def api_down(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    """Why an API stopped answering during a drive, or None if it ran throughout.
    The bare API's plain BackgroundTasks keep no bound on the tasks that wait
    to run after their responses: under a small memory limit it has been killed at
    its memory limit. The bench's API does not restart (docker-compose.yml),
    so such a kill shows here and in the record; a container that did restart
    (the lab's API) is a new process whose CPU counter started again at zero."""
    if after is None:
        return "not running"
    if after.get("Running"):
        return "restarted" if before and before.get("StartedAt") != after.get("StartedAt") else None
    if after.get("OOMKilled"):
        return "killed at its memory limit (OOM)"
    return f"exited with code {after.get('ExitCode')}"


def settled_count(read: Callable[[], int], accepted: int, stall_s: float = 5.0, every_s: float = 0.5) -> int:
    """In `after-response` mode a 202 promises nothing (docs/api.md, "Enqueue modes"). A
    lab publish that fails after its answer (a Redis timeout under the CPU
    quota) is counted in lab_enqueue_errors_total, not in the ledger, and left
    the lab's drain waiting for a task that never came; a bare API killed at
    its memory limit takes every publish still waiting in its BackgroundTasks
    with it, and its worker's drain ran dry in windows counted as measured.
    Each side's drain target is therefore what it really published (the lab's
    ledger, the bare queue's length), read once all `accepted` are in or once
    the count has not moved for `stall_s`; the notes show any difference."""
    progress = Progress(stall_s)
    count = 0

    def in_or_still() -> bool:
        nonlocal count
        count = read()
        progress.see(count)
        return count >= accepted or progress.still_for >= stall_s

    wait_until(in_or_still, timeout_s=None, every_s=every_s)
    return count


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Several rounds of one API as one result: RPS over all measured requests,
    latency percentiles as the mean of the rounds', memory at its highest."""
    ok, elapsed = sum(r["ok"] for r in rounds), sum(r["elapsed_s"] for r in rounds)
    mean: Callable[[str], float | None] = lambda key: (
        round(sum(r[key] for r in rounds) / len(rounds), 1) if all(r.get(key) is not None for r in rounds) else None
    )
    peaks = [r["api_peak_mb"] for r in rounds if r.get("api_peak_mb")]
    sent = sum(r["requests"] + r.get("warmup", 0) for r in rounds)
    cpu = sum(r["api_cpu_s"] for r in rounds) if all(r.get("api_cpu_s") is not None for r in rounds) else None
    return {
        "requests": sum(r["requests"] for r in rounds),
        "ok": ok,
        "errors": sum(r["errors"] for r in rounds),
        "statuses": {
            s: sum(r["statuses"].get(s, 0) for r in rounds) for s in {s for r in rounds for s in r["statuses"]}
        },
        "enqueued": ok + sum(r.get("warmup_ok", 0) for r in rounds),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else None,
        "rps_rounds": [r["rps"] for r in rounds],
        "windows": [r["window"] for r in rounds],
        "api_started": [r.get("api_started") for r in rounds],
        "p50_ms": mean("p50_ms"),
        "p95_ms": mean("p95_ms"),
        "api_peak_mb": max(peaks) if peaks else None,
        "api_cpu_us_per_request": round(cpu / sent * 1e6) if cpu is not None and sent else None,
        "generator_cpu": max(r["generator_cpu"] or 0 for r in rounds),
        "generator_bound": any(r["generator_bound"] for r in rounds),
        "api_down": [f"round {i}: {r['api_down']}" for i, r in enumerate(rounds, 1) if r.get("api_down")],
    }


def bench(args: BenchOptions, ui: Console) -> int:
    # all: background and each queue with a bare counterpart that `make up` started
    running = ["background", *(q for q in running_brokers() if q in BARE)]
    queues = running if args.worker == "all" else [args.worker]
    if any(q not in QUEUES for q in queues):
        raise ParamError(f"worker {args.worker}: one of {', '.join(QUEUES)} or all")
    compose = Compose(profile="bench")
    started = time.time()
    record = Bench(args, compose, ui.say).run(queues)
    ended = time.time()
    # The bench in Grafana: one region over its whole window, and the API dashboard there.
    grafana = Grafana(compose)
    body = annotation(
        "end",
        record.run,
        args.worker,
        "io/simple",
        args.users,
        limit_text(record.api_limits),
        "-",
        ended,
        duration_s=ended - started,
        tag="bench",
    )
    if problem := grafana.problem or grafana.annotate(body):
        ui.say(problem)
    path = Store(args.results_dir).save(record)
    ui.say("")
    ui.say(bench_table.table([record]))
    ui.say(f"\nrecorded in {path}")
    if link := grafana.run_link("api", started, ended):
        ui.say(f"Grafana, this bench: {link}")
    return EXIT_OK
