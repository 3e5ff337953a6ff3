"""The compose suite's net: one deliberate fault at a time in a copy of the tree,
the copy's compose stack running it, and the test whose name states the promise
must fail. `make mutants suite=compose` (python -m tests.mutants_compose [NAME ...]).

Each fault breaks a promise only the running stack can show: a limit the engine
applies, a port bound on 127.0.0.1 only, a container's user, healthchecks,
Prometheus' scrape of every worker, what a worker's or the API's death loses,
the panels' data, what `make down` keeps.

One copy of the tree and one stack serve every fault (project
task-queue-lab-mutants, image task-queue-lab:mutants, free 127.0.0.1 ports; the
developer's stack and the compose tests' own are left alone). Each fault is
applied to the copy's files and its test runs there (LAB_TEST_REUSE=1): the
session's `make up` recreates only what the fault changed (a service's
settings; every lab service when the Dockerfile or the code in the image
changed; Prometheus reads its configuration again), and the copy's files are
put back before the next fault, whose `make up` undoes it. The copy runs the
checkout's Python environment as it is (UV_PROJECT_ENVIRONMENT, UV_NO_SYNC).

First every fault is checked to still apply (each replacement must match
exactly once), then the clean copy runs every fault's test in one session: if
one fails, the check refuses to judge (exit 2), since a test that fails anyway
would "catch" every fault. The faults that take the stack down come last, each
after its own test on the clean copy. Verdicts and exit codes are those of
tests/mutants.py: caught (a test failed in its call), NOT caught, could not judge.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.mutants import (
    CAUGHT,
    ROOT,
    Mutant,
    Outcome,
    baseline_problems,
    check_applies,
    copy_tree,
    mutated,
    report,
    run_tests,
    verdict,
)

PROJECT = "task-queue-lab-mutants"
IMAGE = "task-queue-lab:mutants"
PORTS = ("API_PORT", "PROMETHEUS_PORT", "GRAFANA_PORT", "FLOWER_PORT", "SAQ_WEB_PORT")
# A session's `make up` on a stack it need not change, then the test; those that
# rebuild the image recreate every lab service, and the chaos and panel tests
# run loads: each run's bound (a hang's), not its expected time.
TIMEOUT_S = 900.0
# The faults whose test takes the stack down: last, each after its own test on the clean copy.
TAKE_THE_STACK_DOWN = {"down-drops-volumes"}

COMPOSE = "docker-compose.yml"
CHAOS = "tests/compose/test_chaos.py"
STACK = "tests/compose/test_stack.py"
SECURITY = "tests/compose/test_security_live.py"
RABBITMQ = "tests/compose/test_rabbitmq.py"


def fault(name: str, what: str, edits: tuple[tuple[str, str, str], ...], test: str) -> Mutant:
    """A fault of the compose suite: one test states its promise."""
    return Mutant(name, what, edits, (test,), timeout_s=TIMEOUT_S)


MUTANTS: tuple[Mutant, ...] = (
    # -- What the engine applies: limits, users, ports, healthchecks -----------------------
    fault(
        "arq-cpu-limit-missing",
        "arq's service has no CPU limit (its `cpus:` line gone): it runs on the whole machine",
        (
            (
                COMPOSE,
                r"(      SERVICE_NAME: arq\n    deploy:\n[^\n]*\n      resources:\n        limits:)\n"
                r'          cpus: "\$\{ARQ_CPUS:-\$\{WORKER_CPUS:-0\.2\}\}"',
                "\\1",
            ),
        ),
        f"{STACK}::test_make_limits_shows_the_default_limits",
    ),
    fault(
        "redis-published",
        "Redis is published on the host (on 127.0.0.1, a free port)",
        (
            (
                COMPOSE,
                r'(    command: \["redis-server", "--save", "", "--appendonly", "\$\{REDIS_APPENDONLY:-no\}"\]\n)',
                '\\1    ports:\n      - "127.0.0.1::6379"\n',
            ),
        ),
        f"{SECURITY}::test_redis_is_published_nowhere",
    ),
    fault(
        "flower-beyond-127-0-0-1",
        # 127.0.0.2 stands in for the usual slip, every address (0.0.0.0), which would
        # publish the port beyond this machine while the fault runs.
        "Flower is published on another address than 127.0.0.1",
        ((COMPOSE, r'"127\.0\.0\.1:\$\{FLOWER_PORT:-5555\}:5555"', '"127.0.0.2:${FLOWER_PORT:-5555}:5555"'),),
        f"{SECURITY}::test_only_the_uis_and_the_api_are_published_and_on_127_0_0_1_only",
    ),
    fault(
        "monitor-without-healthcheck",
        "the queue monitor has no healthcheck: `make up --wait` counts it up once started",
        (
            (
                COMPOSE,
                r"(      SERVICE_NAME: queue-monitor\n)    healthcheck: \*probe-metrics\n",
                "\\1",
            ),
        ),
        f"{STACK}::test_every_service_has_a_healthcheck_and_is_healthy",
    ),
    fault(
        "prometheus-admin-api",
        "Prometheus starts with its admin API on (snapshots, series deletion)",
        (
            (
                COMPOSE,
                r"(      - --storage\.tsdb\.path=/prometheus\n)",
                "\\1      - --web.enable-admin-api\n",
            ),
        ),
        f"{SECURITY}::test_prometheus_admin_api_is_disabled",
    ),
    fault(
        "flower-api-needs-login",
        "Flower's API asks for a login (FLOWER_UNAUTHENTICATED_API unset): nothing lists the Celery worker",
        ((COMPOSE, r'\n      FLOWER_UNAUTHENTICATED_API: "true"', ""),),
        f"{STACK}::test_published_services_answer_on_their_ports",
    ),
    # -- What Prometheus and the panels see -------------------------------------------------
    fault(
        "rq-not-scraped",
        "Prometheus has no job for the rq worker",
        (
            (
                "prometheus/prometheus.yml",
                r"\n  - job_name: rq\n    dns_sd_configs: \[\{names: \[rq\][^\n]*\n    relabel_configs: \*by-service\n",
                "\n",
            ),
        ),
        f"{STACK}::test_every_prometheus_target_is_up",
    ),
    fault(
        "queue-keys-not-exported",
        "the Redis exporter reads no queue's key (--check-keys gone): the key-length panel is empty",
        ((COMPOSE, r"\n      - --check-keys=db0=lab:arq:queue,[^\n]*", ""),),
        "tests/compose/test_panels.py::test_every_panel_query_shows_data_after_a_load",
    ),
    # -- What a death loses ------------------------------------------------------------------
    fault(
        "saq-without-restart-policy",
        "saq's container has no restart policy: the OOM-killed worker stays down until someone starts it",
        ((COMPOSE, r"(  saq:\n    <<: \*worker\n)", '\\1    restart: "no"\n'),),
        f"{CHAOS}::test_make_chaos_oom_kill_loses_nothing_and_shows",
    ),
    fault(
        "background-drops-tasks",
        "the API drops one `background` task in ten unscheduled (answered 202 and counted, never run)",
        (
            (
                "services/api/background.py",
                r"        self\.depth\.inc\(\)\n        tasks\.add_task\(self\._run, msg\)\n",
                "        self.depth.inc()\n        self.seen = getattr(self, 'seen', 0) + 1\n"
                "        if self.seen % 10:\n            tasks.add_task(self._run, msg)\n",
            ),
        ),
        f"{CHAOS}::test_make_chaos_kill_of_the_api_loses_at_most_what_it_held_and_never_a_count",
    ),
    # -- The image ---------------------------------------------------------------------------
    fault(
        "image-runs-as-root",
        "the lab's image runs its processes as root (no USER in its app stage)",
        (("Dockerfile", r"(COPY services \./services\n)USER lab\n", "\\1"),),
        f"{SECURITY}::test_lab_containers_run_as_non_root",
    ),
    fault(
        "secret-in-image",
        "a token is baked into the lab's image (an ENV of its app stage)",
        (
            (
                "Dockerfile",
                r"(COPY services \./services\n)",
                "\\1ENV LAB_API_TOKEN=s3cr3t-baked-in\n",
            ),
        ),
        f"{SECURITY}::test_no_secret_in_the_image",
    ),
    # -- The queues on RabbitMQ (profile rabbitmq) ------------------------------------------
    fault(
        "celery-rabbitmq-depth-zero",
        "the queue monitor reads celery-rabbitmq's backlog as 0 whatever RabbitMQ holds",
        (
            (
                "workers/celery_rabbitmq_queue.py",
                r"depth, purge = rabbitmq\.backlog_functions\(\(QUEUE_NAME,\)\)\n",
                "_, purge = rabbitmq.backlog_functions((QUEUE_NAME,))\n\n\nasync def depth(redis) -> int:\n    return 0\n",
            ),
        ),
        f"{RABBITMQ}::test_its_backlog_is_exported_while_its_worker_is_down",
    ),
    fault(
        "rabbitmq-not-scraped",
        "Prometheus does not scrape RabbitMQ's plugin: the RabbitMQ dashboard reads nothing",
        (
            (
                "prometheus/prometheus.yml",
                r"  - job_name: rabbitmq\n    dns_sd_configs: \[\{names: \[rabbitmq\], type: A, port: 15692",
                "  - job_name: rabbitmq\n    dns_sd_configs: [{names: [rabbitmq], type: A, port: 15691",
            ),
        ),
        f"{RABBITMQ}::test_every_rabbitmq_panel_shows_data_after_a_load",
    ),
    fault(
        "bench-leaves-the-bare-backlog",
        "`make bench` leaves the bare worker's unfinished backlog in the broker after the drains",
        (
            (
                "labctl/experiments/bench/runner.py",
                r'(            c\.remove\("bench-api"\)\n)            self\.empty_bare\(queue\)\n',
                "\\1",
            ),
        ),
        "tests/compose/test_bench.py::test_make_bench_records_bare_beside_lab_and_restores_the_lab",
    ),
    fault(
        # Its test runs the lab's worker past its limit for the rest of the stack's life; only
        # the faults that take the stack down come after it.
        "bench-leaves-the-cpu-limit-lifted",
        "`make bench` lifts the lab worker's CPU limit while it empties its queue and never puts it back",
        (
            (
                "labctl/experiments/bench/paired_windows.py",
                r"            if nano:\n                docker\.set_cpus\(cid, nano / 1e9\)\n",
                "            pass\n",
            ),
        ),
        "tests/compose/test_bench.py::test_make_bench_records_bare_beside_lab_and_restores_the_lab",
    ),
    # -- Taking the stack down (last) --------------------------------------------------------
    fault(
        "down-drops-volumes",
        "`make down` removes the volumes too (Prometheus' data gone with the containers)",
        (
            (
                "Makefile",
                r"(\ndown: [^\n]*\n\t\$\(COMPOSE\) --profile '\*' down) --remove-orphans\n",
                "\\1 --volumes --remove-orphans\n",
            ),
        ),
        f"{STACK}::test_make_down_removes_every_container_and_keeps_the_volumes",
    ),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stack_env() -> dict[str, str]:
    """What every session in the copy shares: the project, the image, the ports and the
    brokers' passwords (the same for every session: the stack and its volumes are
    reused), the checkout's Python environment."""
    return {
        "LAB_TEST_PROJECT": PROJECT,
        "LAB_TEST_RABBITMQ_PASSWORD": secrets.token_hex(12),
        "LAB_TEST_POSTGRES_PASSWORD": secrets.token_hex(12),
        "LAB_TEST_IMAGE": IMAGE,
        "LAB_TEST_REUSE": "1",
        "UV_PROJECT_ENVIRONMENT": str(ROOT / ".venv"),
        "UV_NO_SYNC": "1",
        **{f"LAB_TEST_{name}": str(free_port()) for name in PORTS},
    }


def takes_the_stack_down(mutant: Mutant) -> bool:
    return mutant.name in TAKE_THE_STACK_DOWN


class Faults:
    """The copy's files, changed by one fault at a time and put back."""

    def __init__(self, tree: Path):
        self.tree = tree
        self.saved: dict[str, str] = {}

    def apply(self, mutant: Mutant) -> None:
        changed = mutated(mutant, lambda name: (self.tree / name).read_text())
        for name, text in changed.items():
            self.saved[name] = (self.tree / name).read_text()
            (self.tree / name).write_text(text)

    def undo(self) -> None:
        for name, text in self.saved.items():
            (self.tree / name).write_text(text)
        self.saved.clear()


def remove_stack(tree: Path, env: dict[str, str], say) -> None:
    """The copy's stack, its volumes and its image gone."""
    compose_env = {**os.environ, **env, "COMPOSE_PROJECT_NAME": PROJECT, "LAB_IMAGE": IMAGE}
    down = ["docker", "compose", "--profile", "*", "down", "--volumes", "--remove-orphans", "--timeout", "5"]
    proc = subprocess.run(down, cwd=tree, env=compose_env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        say(f"   could not remove the stack: {proc.stderr.strip()[-500:]}")
    for image in (IMAGE, f"{IMAGE}-load"):
        subprocess.run(["docker", "image", "rm", image], capture_output=True, timeout=120, check=False)


def tests_of(mutants: list[Mutant]) -> list[str]:
    return list(dict.fromkeys(test for m in mutants for test in m.tests))


def run_clean(tree: Path, tests: list[str], env: dict[str, str], say) -> list[str]:
    """The tests on the clean copy; what keeps them from standing as the control."""
    started = time.monotonic()
    outcome = run_tests(tree, tests, env, TIMEOUT_S * max(1, len(tests)) / 2)
    problems = baseline_problems(outcome)
    say(f"   clean copy: {len(tests)} test(s): {'FAIL' if problems else 'pass'} ({time.monotonic() - started:.0f} s)")
    if problems:
        say(outcome.output)
    return problems


def judge(mutant: Mutant, tree: Path, env: dict[str, str], faults: Faults) -> tuple[str, str, float, Outcome]:
    started = time.monotonic()
    faults.apply(mutant)
    try:
        outcome = run_tests(tree, mutant.tests, env, mutant.timeout_s)
    finally:
        faults.undo()
    state, detail = verdict(outcome)
    return state, detail, time.monotonic() - started, outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants_compose", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all): " + ", ".join(m.name for m in MUTANTS))
    parser.add_argument("--keep", action="store_true", help="keep the copy of the tree and its stack (paths printed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's output for each mutant")
    parser.add_argument(
        "--jobs", type=int, default=1, help="1 only: the faults share one stack, so they run one at a time"
    )
    args = parser.parse_args(argv)
    if args.jobs != 1:
        parser.error("--jobs 1 only: every fault runs on the one stack of the copy, one after the other")
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]

    def say(text: str) -> None:
        print(text, flush=True)

    started = time.monotonic()
    rows: list[tuple[Mutant, str, str, float]] = []
    broken = check_applies(chosen)
    for mutant in chosen:
        if mutant.name in broken:
            say(f"== {mutant.name}: COULD NOT APPLY: {broken[mutant.name]}")
            rows.append((mutant, f"could not apply: {broken[mutant.name]}", "ERROR", 0.0))
    runnable = [m for m in chosen if m.name not in broken]
    on_stack = [m for m in runnable if not takes_the_stack_down(m)]
    # The image's faults after the others: each recreates every lab service, and so does its undoing.
    on_stack.sort(key=lambda m: any(name == "Dockerfile" or name.endswith(".py") for name, _, _ in m.edits))
    last = [m for m in runnable if takes_the_stack_down(m)]

    tree = Path(tempfile.mkdtemp(prefix="lab-mutant-compose-"))
    copy_tree(tree)
    env = stack_env()
    faults = Faults(tree)
    try:
        if on_stack:
            say(f"== the clean copy first ({tree}, project {PROJECT})")
            problems = run_clean(tree, tests_of(on_stack), env, say)
            if problems:
                return refuse(problems, say)
        for mutant in on_stack:
            rows.append(run_one(mutant, tree, env, faults, args.verbose, say))
        for mutant in last:
            say(f"== {mutant.name}: its test on the clean copy first")
            problems = run_clean(tree, list(mutant.tests), env, say)
            if problems:
                return refuse(problems, say)
            rows.append(run_one(mutant, tree, env, faults, args.verbose, say))
    finally:
        faults.undo()
        if args.keep:
            say(f"   kept {tree} and the stack {PROJECT}")
        else:
            remove_stack(tree, env, say)
            shutil.rmtree(tree, ignore_errors=True)

    return report(rows, started, say)


def run_one(mutant: Mutant, tree: Path, env: dict[str, str], faults: Faults, verbose: bool, say):
    say(f"== {mutant.name}: {mutant.fault}")
    state, detail, seconds, outcome = judge(mutant, tree, env, faults)
    say(f"   {state}: {detail} ({seconds:.0f} s)")
    if verbose or state != CAUGHT:
        say(outcome.output)
    return mutant, detail, state, seconds


def refuse(problems: list[str], say) -> int:
    say("\nREFUSING TO JUDGE: the tests fail on the clean copy, so a fault would be 'caught' by what already fails:")
    for problem in problems:
        say(f"  {problem}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
