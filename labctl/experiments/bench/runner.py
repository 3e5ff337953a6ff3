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

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from lab.queues import BY_NAME
from labctl.clients.grafana import Grafana, annotation
from labctl.errors import EXIT_OK, LabError, LabNotRunning, ParamError
from labctl.experiments.bench.api_rounds import ApiRounds
from labctl.experiments.bench.client import BenchClient
from labctl.experiments.bench.drains import Drains, settled_count
from labctl.experiments.bench.options import LIMIT_KNOBS, QUEUES, BenchOptions
from labctl.experiments.bench.paired_windows import Counter
from labctl.load_run.backlog import wait_for_empty
from labctl.platform import containers as C
from labctl.platform.compose import Compose
from labctl.queues import running_brokers
from labctl.records.bench import BenchRecord, BenchRow, row_ratios
from labctl.records.run import limit_text
from labctl.records.store import Store
from labctl.render import bench_table
from labctl.render.console import Console
from services.bare.queues import BARE, KEYS, done_key


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
        self.client = BenchClient(compose, self.stamp, self.env, args.users)
        self.apis = ApiRounds(args, compose, self.client, self.env, say)
        self.drains = Drains(args, compose, self.client, self.env, say, self.stamp)

    def worker_limits(self, queue: str) -> dict[str, Any]:
        containers = self.compose.inspect(queue)
        if not containers:
            raise LabError(f"the lab's {queue} worker is not running: make up first")
        self.workers[queue] = containers
        limits = C.limits_of(containers, queue)
        prefix = LIMIT_KNOBS[queue]
        self.env.update({f"{prefix}_CPUS": str(limits["cpus"] or 0), f"{prefix}_MEM": str(limits["memory_bytes"] or 0)})
        env = C.env_of(containers[0])  # the bare worker gets the lab worker's settings
        self.env.update({knob: env[knob] for knob in C.KNOBS.get(queue, ()) if knob in env})
        return limits

    def wait_for_empty(self, queue: str) -> None:
        """The lab's queue must start empty: its worker would drain what an
        earlier run left there before this run's tasks, and its drain figure
        would be wrong without a word. The worker, still running, gets
        --backlog-wait-s to empty it (read from Redis, in the bench's client)."""
        wait_for_empty(
            lambda: {queue: self.client.drain_tool("--backlog", queue)["depth"]},
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
        apis = self.apis.run(queue, run)  # the APIs' rounds, each API's as one result (api_rounds.py)
        row["bare"], row["lab"] = apis["bare"], apis["lab"]
        row["run"] = run
        bare_target = row["bare"]["enqueued"]
        lab_target = row["lab"]["enqueued"]
        if queue == "background":  # ran inside the APIs; nothing to drain
            c.remove("bench-api")
            return row
        if self.mode == "after-response":  # a 202 came before its publish: count what was published
            lab_target = row["lab"]["published"] = settled_count(
                lambda: self.client.drain_tool("--published", run)["enqueued"], lab_target
            )
            bare_target = row["bare"]["published"] = settled_count(
                lambda: self.client.drain_tool("--bare-backlog", queue)["depth"], bare_target
            )
        counter = Counter(self.client.name, done_key(queue), run)
        try:
            self.drains.drain_queue(queue, row, counter, bare_target, lab_target)
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
            self.client.drain_tool("--purge-bare", queue)

    def run(self, queues: list[str]) -> BenchRecord:
        rows = []
        self.client.up()
        try:
            for queue in queues:
                row = self.bench_queue(queue)
                # As judged now; a reader derives them again from the pairs' figures the row keeps.
                row["judged"] = {
                    name: ratio.as_json() for name, ratio in row_ratios(BenchRow.model_validate(row)).items()
                }
                rows.append(row)
        finally:
            self.client.down()
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
