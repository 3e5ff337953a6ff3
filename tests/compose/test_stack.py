"""The compose stack end to end: health, scraping, limits, exact task accounting,
scaling, teardown. Tests run in file order on one session stack (see conftest);
the one that starts it with other limits and replicas after every test that
needs the defaults, the teardown last."""

import json
import re
import subprocess
import time
from collections import Counter

import httpx
import pytest

from tests.compose.helpers import (
    QUEUES,
    TASKS_PER_QUEUE,
    WORKERS,
    by_label,
    parse_time,
    post_tasks,
    wait_settled,
    wait_until,
)
from tests.lab import flower_lists_celery, new_run, saq_ui_lists_a_worker

pytestmark = pytest.mark.compose

# The processes that export the lab's own metrics (cgroup, loop lag).
LAB_SERVICES = ("api", *WORKERS, "queue-monitor")
SCRAPED_JOBS = {"api", *WORKERS, "queue-monitor", "flower", "redis-exporter", "prometheus"}
MiB = 1024 * 1024


def test_every_prometheus_target_is_up(stack):
    def all_up():
        targets = stack.targets()
        jobs = {t["labels"]["job"] for t in targets}
        ours = [t for t in targets if t["labels"]["job"] in SCRAPED_JOBS]
        return targets if SCRAPED_JOBS <= jobs and all(t["health"] == "up" for t in ours) else None

    try:
        targets = wait_until(all_up, timeout=90, interval=2, what="every target up")
    except AssertionError:
        down = [(t["labels"]["job"], t["labels"]["instance"], t["health"], t["lastError"]) for t in stack.targets()]
        pytest.fail(f"not every expected job is scraped and up: {down}")

    per_job = Counter(t["labels"]["job"] for t in targets)
    assert {job: per_job[job] for job in SCRAPED_JOBS} == dict.fromkeys(SCRAPED_JOBS, 1)
    for t in targets:
        # instance = the replica's ip:port, and that is what is scraped
        assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+:\d+", t["labels"]["instance"]), t["labels"]
        assert t["scrapeUrl"].startswith(f"http://{t['labels']['instance']}/"), t


def test_published_services_answer_on_their_ports(stack):
    # Flower sees the Celery worker (task events through Redis), the SAQ UI reads
    # the lab's SAQ queue and its worker, as a user reloading either would.
    wait_until(lambda: flower_lists_celery(stack.flower_url), timeout=60, interval=3, what="Flower listing celery")
    wait_until(lambda: saq_ui_lists_a_worker(stack.saq_ui_url), timeout=60, interval=3, what="the SAQ UI's worker")
    # The API reaches the upstream stand-in by its name.
    r = httpx.post(f"{stack.api_url}/api/v1/upstream/async-native", timeout=15)
    assert (r.status_code, r.json().get("upstream")) == (200, "ok"), r.text
    assert httpx.get(f"{stack.api_url}/docs", timeout=10).status_code == 200


def test_make_limits_shows_the_default_limits(stack):
    rows = stack.limits()
    assert {service for service, _ in rows} == set(stack.services)
    for service in ("api", *WORKERS):
        assert rows[(service, 1)] == ("0.2", "200M"), (service, rows)


def test_every_task_settles_exactly_once(loaded_run):
    n = TASKS_PER_QUEUE
    expected = {"enqueued": n, "completed": n, "failed": 0, "duplicates": 0, "pending": 0, "value": n, "work": n}
    assert set(loaded_run["queues"]) == set(QUEUES)
    for queue in QUEUES:
        row = loaded_run["queues"][queue]["io/simple"]
        assert {k: row[k] for k in expected} == expected, (queue, row)
    total = len(QUEUES) * n
    assert loaded_run["totals"] == {
        "enqueued": total,
        "started": total,
        "completed": total,
        "failed": 0,
        "duplicates": 0,
        "purged": 0,
        "pending": 0,
        "unfinished": 0,
    }


def test_prometheus_counts_a_runs_tasks_on_every_queue(stack):
    """The lab's series as Prometheus scrapes them, for a run of this test's own: each
    queue's enqueue and completion counters rise by its tasks (a process another test
    restarted starts its counters again at 0: only the rise over this run is read), every
    backlog is reported and empty once the run settled, and every process reads the
    limits compose asked for from its own cgroup."""
    n = 5
    enqueued, completed = "sum by (queue) (lab_enqueued_total)", "sum by (queue) (lab_task_completed_total)"
    before = {expr: by_label(stack.query(expr), "queue") for expr in (enqueued, completed)}
    run = new_run("compose-series")
    post_tasks(stack.api_url, run, dict.fromkeys(QUEUES, n))
    wait_settled(stack.api_url, run, total=len(QUEUES) * n, timeout=180)

    def counted(expr):
        def check():
            values = by_label(stack.query(expr), "queue")
            return values if all(values.get(q, 0) >= before[expr].get(q, 0) + n for q in QUEUES) else None

        return check

    wait_until(counted(completed), timeout=30, what=f"{completed} up by {n} per queue")
    wait_until(counted(enqueued), timeout=30, what=f"{enqueued} up by {n} per queue")

    # Every queue's backlog is reported, and is empty once the run settled.
    def drained():
        depth = by_label(stack.query("max by (queue) (lab_queue_depth)"), "queue")
        return depth if set(QUEUES) <= set(depth) and not any(depth[q] for q in QUEUES) else None

    wait_until(drained, timeout=30, what="lab_queue_depth == 0 for every queue")
    sources = {(r["metric"]["queue"], r["metric"]["job"]) for r in stack.query("lab_queue_depth")}
    assert {(q, "queue-monitor") for q in WORKERS} | {("background", "api")} <= sources, sources

    # The limits each process reads from its own cgroup: what compose asked for.
    cpu = by_label(stack.query("lab_cpu_limit_cores"), "service")
    memory = by_label(stack.query("lab_memory_limit_bytes"), "service")
    assert set(LAB_SERVICES) <= set(cpu) and set(LAB_SERVICES) <= set(memory), (cpu, memory)
    for service in ("api", *WORKERS):
        assert cpu[service] == pytest.approx(0.2) and memory[service] == 200 * MiB, (service, cpu, memory)


def test_every_service_has_a_healthcheck_and_is_healthy(stack):
    """`make up` waits for every service to be healthy: each must have a healthcheck of its
    own (a service without one would count as up once started), and pass it. A container
    another test restarted passes it again once its start is done."""
    ids = stack.compose("ps", "-a", "-q").stdout.split()

    def inspected() -> dict[str, dict]:
        out = subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, check=True, timeout=60).stdout
        return {c["Name"].lstrip("/"): c for c in json.loads(out)}

    containers = inspected()
    services = {c["Config"]["Labels"]["com.docker.compose.service"] for c in containers.values()}
    assert services == set(stack.services), (services, stack.services)
    unchecked = [
        name
        for name, c in containers.items()
        if (c["Config"].get("Healthcheck") or {}).get("Test", ["NONE"])[0] == "NONE"
    ]
    assert unchecked == [], f"containers without a healthcheck: {unchecked}"

    def all_healthy():
        health = {name: c["State"].get("Health", {}).get("Status") for name, c in inspected().items()}
        return health if set(health.values()) == {"healthy"} else None

    wait_until(all_healthy, timeout=180, interval=2, what="every container healthy")


@pytest.mark.reconfigures
def test_make_up_with_worker_variables_sets_the_limits_and_arq_replicas_share_the_work(stack):
    """One `make up` with the worker variables and a second arq replica: every
    worker gets the new limits and reads them from its cgroup, the API keeps its
    own; both arq replicas are scraped and run tasks. The stack stays so: only
    the teardown runs after this (conftest's order)."""
    n = 120
    stack.up(WORKER_CPUS="0.5", WORKER_MEM="500M", ARQ_REPLICAS="2")
    up_at = time.time()
    rows = stack.limits()
    for worker in WORKERS:
        assert rows[(worker, 1)] == ("0.5", "500M"), (worker, rows)
    assert rows[("arq", 2)] == ("0.5", "500M"), rows
    assert rows[("api", 1)] == ("0.2", "200M"), rows  # API_* is its own knob

    def seen_inside():
        cpu = by_label(stack.query("lab_cpu_limit_cores"), "service")
        return cpu if all(cpu.get(w) == pytest.approx(0.5) for w in WORKERS) else None

    wait_until(seen_inside, timeout=60, interval=2, what="workers reporting lab_cpu_limit_cores 0.5")

    def two_fresh_targets():
        arq = [t for t in stack.targets() if t["labels"]["job"] == "arq"]
        fresh = [t for t in arq if t["health"] == "up" and parse_time(t["lastScrape"]) > up_at]
        return arq if len(arq) == 2 and len(fresh) == 2 else None

    targets = wait_until(two_fresh_targets, timeout=60, interval=2, what="2 arq targets scraped")
    instances = {t["labels"]["instance"] for t in targets}
    assert len(instances) == 2

    completed = 'sum by (instance) (lab_task_completed_total{job="arq", queue="arq"})'
    before = by_label(stack.query(completed), "instance")

    run = new_run("compose-arq2")
    post_tasks(stack.api_url, run, {"arq": n})
    report = wait_settled(stack.api_url, run, total=n, timeout=180)
    row = report["queues"]["arq"]["io/simple"]
    assert (row["completed"], row["failed"], row["duplicates"], row["pending"]) == (n, 0, 0, 0), row

    def deltas():
        after = by_label(stack.query(completed), "instance")
        d = {i: after.get(i, 0) - before.get(i, 0) for i in instances}
        return d if sum(d.values()) == n else None

    d = wait_until(deltas, timeout=30, interval=2, what=f"Prometheus counting the {n} arq tasks")
    assert all(v > 0 for v in d.values()), f"one arq replica did no work: {d}"


@pytest.mark.stack_down
def test_make_down_removes_every_container_and_keeps_the_volumes(stack):
    stack.make("down", timeout=300)
    label = f"label=com.docker.compose.project={stack.project}"
    containers = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", label], capture_output=True, text=True, check=True
    ).stdout.split()
    assert containers == [], containers
    volumes = subprocess.run(
        ["docker", "volume", "ls", "-q", "--filter", label], capture_output=True, text=True, check=True
    ).stdout.split()
    assert f"{stack.project}_prometheus-data" in volumes, volumes
