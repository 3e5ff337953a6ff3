"""The lab on a Swarm of three Docker engines in containers on this machine
(`make test-cluster`): `make cluster-up nodes=3` with node-1 (the manager) for Redis
and what watches, node-2 for the API and node-3 for the queues' workers alone;
Prometheus scrapes every target by tasks.<service> across the nodes; Flower and the
SAQ UI answer at the addresses `make stack-up` prints, with the workers of another
node listed; a `make load`
of several queues keeps an exact ledger and names the nodes each ran on; a mixed
batch meets the death of the workers' node and loses nothing beyond what each
queue's delivery allows (lab/queues.py: Huey delivers at most once); `make chaos
fault=kill-node` records the node's death and return; then `make cluster-down`,
and this machine's engine still starts compose containers that resolve each
other's names. About a quarter of an hour on a 2-core machine, most of it the
lab's image built on the manager (docs/swarm.md).

Needs a Docker engine with the images of build-standins (the dind node, the
registry, the lab's bases and services). The cluster runs as a compose project of
its own (CLUSTER_PROJECT), on free ports, with the stack LAB_TEST_STACK (labtest)
and shortened task leases (TASK_TIMEOUT_S=20), ignoring the developer's .env; a
cluster of make cluster-up may run beside it.
"""

import json
import os
import secrets
import subprocess
import tempfile
import time

import httpx
import pytest

from lab.queues import BY_NAME
from labctl.platform.cluster import Cluster
from labctl.platform.swarm import Swarm
from tests.compose.conftest import compose_variables, free_ports, require_engine
from tests.compose.helpers import make
from tests.lab import flower_lists_celery, ledger, post_to_queues, saq_ui_lists_a_worker, wait_until

QUEUES = ("celery", "saq", "dramatiq", "rq", "huey")
SERVICES = ("redis", "api", "prometheus", "redis-exporter", "queue-monitor", "flower", "saq-ui", *QUEUES)
TASK_TIMEOUT_S = 20
# RQ gives an abandoned job TASK_TIMEOUT_S + 60 s after it started, then its maintenance pass.
SETTLE_S = 4 * TASK_TIMEOUT_S + 120


def names_resolve_in_new_compose_containers(env: dict) -> subprocess.CompletedProcess:
    """A fresh compose project on this machine's engine: one container looks the other up by name."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "compose.yml")
        image = "python:3.11-slim"
        with open(path, "w") as f:
            f.write(
                "services:\n"
                f"  a:\n    image: {image}\n    command: [sleep, '60']\n"
                f"  b:\n    image: {image}\n    depends_on: [a]\n"
                "    command: [python, -c, \"import socket; print(socket.gethostbyname('a'))\"]\n"
            )
        project = ["docker", "compose", "-p", f"lab-dns-{secrets.token_hex(3)}", "-f", path]
        try:
            return subprocess.run(
                [*project, "up", "--exit-code-from", "b", "--pull", "never"], env=env, capture_output=True, text=True,
                timeout=180,
            )  # fmt: skip
        finally:
            subprocess.run([*project, "down", "--timeout", "1"], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def cluster_env():
    """A three-node cluster with the lab on it; (the make environment, the Swarm, make
    cluster-up's output). Torn down afterwards, and this machine's engine checked."""
    if os.environ.get("LAB_CLUSTER_TEST") != "1":
        pytest.skip("starts a cluster of Docker engines on this machine: `make test-cluster` runs it")
    require_engine()
    leaks = compose_variables() | {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DOCKER_HOST", "LAB_IMAGE", "STACK_PUBLISH_IP"}
    empty = tempfile.NamedTemporaryFile("w", prefix="lab-cluster-", suffix=".env", delete=False)
    empty.close()
    host = {k: v for k, v in os.environ.items() if k not in leaks and not k.startswith(("COMPOSE_", "CLUSTER_"))}
    docker_port, registry_port = free_ports(2)
    host.update(
        COMPOSE_ENV_FILES=empty.name,
        CLUSTER_PROJECT=f"task-queue-lab-cluster-test-{secrets.token_hex(2)}",
        CLUSTER_DOCKER_PORT=str(docker_port),
        CLUSTER_REGISTRY_PORT=str(registry_port),
        CLUSTER_ROLES="broker lab worker",
        STACK_NAME=os.environ.get("LAB_TEST_STACK", "labtest"),
        LAB_IMAGE=os.environ.get("LAB_TEST_IMAGE", "task-queue-lab:test"),
        LAB_ORCHESTRATOR="swarm",
        GRAFANA_ADMIN_PASSWORD=secrets.token_urlsafe(16),
        TASK_TIMEOUT_S=str(TASK_TIMEOUT_S),
    )
    started = time.monotonic()
    try:
        out = make(host, "cluster-up", "nodes=3", f"services={' '.join(SERVICES)}", timeout=1800).stdout
        print(out)
        print(f"make cluster-up nodes=3: {time.monotonic() - started:.0f} s")
        cluster = make(host, "-s", "cluster-env", timeout=60).stdout.strip().removeprefix("export ").split()
        env = {**host, **dict(pair.split("=", 1) for pair in cluster)}
        # labctl's docker calls read the Docker CLI's own environment (DOCKER_HOST), as
        # they do under `eval "$(make -s cluster-env)"`: point this process at node-1 too.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DOCKER_HOST", env["DOCKER_HOST"])
            yield env, Swarm(env), out
    finally:
        down = make(host, "cluster-down", timeout=600, check=False)
        print(f"the whole test, cluster-down included: {time.monotonic() - started:.0f} s")
        assert down.returncode == 0, down.stderr
        project = host["CLUSTER_PROJECT"]
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
            env=host, capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
        volumes = subprocess.run(
            ["docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={project}"],
            env=host, capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
        assert not left.strip() and not volumes.strip(), (left, volumes)
        dns = names_resolve_in_new_compose_containers(host)
        os.unlink(empty.name)  # the host's COMPOSE_ENV_FILES, which the check above reads
        assert dns.returncode == 0, (
            f"after the cluster, new compose containers resolve no names:\n{dns.stdout}{dns.stderr}"
        )


def test_each_role_runs_on_its_node(cluster_env):
    env, swarm, out = cluster_env
    states = swarm.node_states()
    assert states == {"node-1": "ready", "node-2": "ready", "node-3": "ready"}, states
    roles = {n["Description"]["Hostname"]: n["Spec"].get("Labels", {}).get("lab.role") for n in swarm.nodes()}
    assert roles == {"node-1": "broker", "node-2": "lab", "node-3": "worker"}
    placement = swarm.placement()
    assert sorted(placement) == sorted(SERVICES), placement
    assert placement["redis"] == ["node-1"] and placement["api"] == ["node-2"], placement
    for queue in QUEUES:
        assert placement[queue] == ["node-3"], placement
    # Nothing else on the workers' node; what watches goes to the others.
    assert not {s for s, nodes in placement.items() if "node-3" in nodes} - set(QUEUES), placement
    assert "node-3: " in out and "api" in out, out


def test_prometheus_scrapes_every_target_on_every_node(cluster_env):
    env, swarm, _ = cluster_env
    prom = f"http://{swarm.port('prometheus', 9090)}"
    jobs = ("api", *QUEUES, "queue-monitor", "redis-exporter", "prometheus")

    def all_up():
        targets = httpx.get(f"{prom}/api/v1/targets", params={"state": "active"}, timeout=10).json()["data"]
        ours = [t for t in targets["activeTargets"] if t["labels"]["job"] in jobs]
        return (
            ours
            if sorted(t["labels"]["job"] for t in ours) == sorted(jobs) and all(t["health"] == "up" for t in ours)
            else None
        )

    for target in wait_until(all_up, timeout=120, interval=2, what="one target up per job"):
        assert target["discoveredLabels"]["__meta_dns_name"] == f"tasks.{target['labels']['job']}", target


def test_flower_and_the_saq_ui_answer_with_the_workers_of_another_node(cluster_env):
    # What watches runs off the workers' node: Flower hears the celery worker's events
    # and the SAQ UI reads the saq worker's info through Redis, at the addresses
    # `make stack-up` prints.
    env, swarm, out = cluster_env
    placement = swarm.placement()
    assert placement["flower"] != placement["celery"] and placement["saq-ui"] != placement["saq"], placement
    flower, saq_ui = swarm.port("flower", 5555), swarm.port("saq-ui", 8082)
    assert f"http://{flower}/" in out and f"http://{saq_ui}/" in out, out
    wait_until(lambda: flower_lists_celery(f"http://{flower}"), timeout=90, interval=3, what="Flower listing celery")
    wait_until(lambda: saq_ui_lists_a_worker(f"http://{saq_ui}"), timeout=90, interval=3, what="the SAQ UI's worker")


def test_a_load_of_several_queues_keeps_an_exact_ledger_and_names_its_nodes(cluster_env, tmp_path):
    env, swarm, _ = cluster_env
    run, n = f"cluster-{secrets.token_hex(4)}", 500
    out = make(env, "load", f"worker={','.join(QUEUES)}", f"iterations={n}", "users=20", "wait=1", f"run={run}",
               "locust_workers=1", f"results_dir={tmp_path}").stdout  # fmt: skip
    record = json.loads((tmp_path / f"{run}.json").read_text())
    assert "swarm, 3 node(s)" in out, out
    assert (record["requests"], record["status_codes"]) == (n, {"202": n}), record["warnings"]
    tasks = record["tasks"]
    assert (tasks["enqueued"], tasks["completed"], tasks["failed"], tasks["duplicates"], tasks["lost"]) == (
        n, n, 0, 0, 0,
    )  # fmt: skip
    placement = record["platform"]["placement"]
    assert placement["api"] == ["node-2"] and all(placement[q] == ["node-3"] for q in QUEUES), placement


KILLED_ENDPOINT = "cpu/simple"


def rq_keys(swarm: Swarm) -> dict[str, str]:
    """Where RQ keeps its queue's jobs (workers/rq_queue.py), for a wait that ended with one
    of them pending: the queue, the intermediate list, the started registry (its scores,
    when each execution's heartbeat expires), the failed registry, and the maintenance lock."""
    reads = {
        "now": ("TIME",),
        "queued": ("LLEN", "rq:queue:lab"),
        "intermediate": ("LRANGE", "rq:queue:lab:intermediate", "0", "-1"),
        "started": ("ZRANGE", "rq:wip:lab", "0", "-1", "WITHSCORES"),
        "failed": ("ZCARD", "rq:failed:lab"),
        "maintenance_lock_ttl": ("TTL", "rq:clean_registries:lab"),
    }
    out = {}
    for what, args in reads.items():
        done = swarm.exec("redis", "redis-cli", *args)
        out[what] = " ".join(done.stdout.split()) if done.returncode == 0 else f"(not read: {done.stderr.strip()})"
    return out


def test_a_dead_workers_node_loses_nothing_the_queues_deliver(cluster_env):
    """Every queue's worker holds tasks when node-3 dies; 20 s later it is started
    again, and each task is done once, or again when its worker died after the work
    (a duplicate, counted), or lost only where the queue delivers at most once (what
    Huey's worker was running) or takes a message in two steps (the one message
    Celery's worker had popped from Redis and not yet recorded as unacknowledged)."""
    env, swarm, _ = cluster_env
    api = f"http://{swarm.port('api', 8000)}"
    run, per_queue = f"cluster-kill-{secrets.token_hex(4)}", 60
    responses = post_to_queues(api, run, dict.fromkeys(QUEUES, per_queue), endpoint=KILLED_ENDPOINT)
    assert all(r.status_code == 202 for r in responses), {r.status_code for r in responses}
    wait_until(lambda: (ledger(api, run) or {}).get("totals", {}).get("completed", 0) >= 10, 120, "work under way")
    cluster = Cluster(env)
    cluster.kill("node-3")
    killed_at = time.time()
    at_kill = ledger(api, run)["totals"]
    assert at_kill["pending"] > 0, f"the batch was done before the kill: {at_kill}"
    wait_until(lambda: swarm.node_states().get("node-3") == "down", 60, "the Swarm to see node-3 down")
    time.sleep(max(0.0, killed_at + 20 - time.time()))
    cluster.start("node-3")

    # The settle counts from the workers' return: a slow machine takes longer to start them.
    def workers_back() -> bool:
        placement = swarm.placement()
        return all(placement.get(q) == ["node-3"] for q in QUEUES)

    wait_until(workers_back, 300, "every queue's worker running on node-3 again", interval=3)
    total = per_queue * len(QUEUES)

    # What the dead worker may lose: Huey, what it ran (CONCURRENCY, 3); the others, lost_in_fetch.
    may_lose = {q: 3 if BY_NAME[q].at_most_once else BY_NAME[q].lost_in_fetch for q in QUEUES}

    waiting: dict = {}  # the rows still waited on, for the message if the wait ends

    def settled():
        report = ledger(api, run)
        rows = {q: report["queues"][q][KILLED_ENDPOINT] for q in QUEUES}  # the ledger's rows: queue, endpoint
        waiting.clear()
        waiting.update({q: row for q, row in rows.items() if row["pending"] > may_lose[q]})
        return None if waiting else report

    try:
        wait_until(settled, SETTLE_S, "every queue's tasks settled but what its dead worker may lose", interval=2)
    except AssertionError as timed_out:
        where = f"; where RQ keeps its jobs: {rq_keys(swarm)}" if "rq" in waiting else ""
        raise AssertionError(f"{timed_out}; still pending: {waiting}{where}") from None
    time.sleep(10)  # a task still coming would come
    report = ledger(api, run)
    assert report["totals"]["enqueued"] == total, report["totals"]
    for queue in QUEUES:
        q = report["queues"][queue][KILLED_ENDPOINT]
        assert q["enqueued"] == per_queue and q["failed"] == 0, (queue, q)
        assert q["pending"] <= may_lose[queue], (queue, q)
        if BY_NAME[queue].at_most_once:  # nothing runs twice
            assert q["duplicates"] == 0, (queue, q)


def test_make_chaos_kill_node_records_the_death_and_return_of_the_node(cluster_env, tmp_path):
    env, swarm, _ = cluster_env
    # The node the test before killed is back; its saq worker runs again before this fault.
    wait_until(lambda: swarm.placement().get("saq"), 180, "saq's worker running again", interval=3)
    run = f"cluster-chaos-{secrets.token_hex(4)}"
    out = make(env, "chaos", "worker=saq", "fault=kill-node", "node=node-3", "hold=25", "duration=30s",
               "users=10", "locust_workers=1", "wait=1", f"run={run}", f"results_dir={tmp_path}").stdout  # fmt: skip
    record = json.loads((tmp_path / f"{run}.json").read_text())
    chaos = record["chaos"]
    assert "chaos: node-3 killed" in out and "chaos: node-3 started again" in out, out
    assert chaos["node"] == "node-3" and "saq" in chaos["node_services"] and chaos["running"] is True, chaos
    assert 0 < chaos["node_down_s"] < chaos["hold_s"] < chaos["node_ready_s"], chaos
    assert chaos["rescheduled_s"] is not None and chaos["errors"] == [], chaos
    accepted = record["status_codes"].get("202")
    assert (chaos["enqueued"], chaos["completed"], chaos["failed"], chaos["lost"]) == (
        accepted, accepted, 0, 0,
    ), chaos  # fmt: skip
