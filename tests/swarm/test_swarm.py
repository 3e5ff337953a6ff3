"""The lab as a stack on a single-node Docker Swarm of this machine's engine
(`make test-swarm`): `make stack-up` deploys it and waits until every service
runs healthy, Prometheus scrapes every replica by tasks.<service>, a `make load`
on the stack keeps an exact ledger and says where it ran, a scaled worker's
replicas are each scraped and each run tasks; then `make stack-down`, the swarm
is left and the engine restarted, and a new container must resolve names again
(labctl/platform/stack_deploy.py says why). About 4-5 minutes on a 2-core machine.

Needs a Docker engine in no swarm (it fails otherwise, saying so: it would
have to leave a swarm it did not make) and the images the compose file names
(Redis, Prometheus, ...); it builds the lab's own image itself. Restarting
the engine stops and restarts every container it runs: run it with the lab's
compose project down. The stack runs under its own name (LAB_TEST_STACK,
default labtest), image tag and free ports, ignoring the developer's .env.
"""

import json
import os
import re
import secrets
import subprocess
import tempfile
import time

import httpx
import pytest

from labctl.config import ROOT
from labctl.platform.compose import Compose
from labctl.platform.stack_deploy import leave
from labctl.platform.swarm import Swarm, docker, swarm_state
from tests.compose.conftest import compose_variables, free_ports, require_engine
from tests.compose.helpers import WORKERS, by_label, make, parse_time, post_tasks, wait_settled, wait_until

PORTS = ("API_PORT", "GRAFANA_PORT", "PROMETHEUS_PORT", "FLOWER_PORT", "SAQ_WEB_PORT")
SCRAPED_JOBS = ("api", *WORKERS, "queue-monitor", "flower", "redis-exporter", "prometheus")


@pytest.fixture(scope="module")
def swarm_env():
    """A single-node swarm on this engine and the environment of the make commands; the
    engine is handed back in no swarm, restarted, resolving names."""
    if os.environ.get("LAB_SWARM_TEST") != "1":
        pytest.skip("makes a swarm of this engine and restarts the engine: `make test-swarm` runs it")
    require_engine()
    state = swarm_state()
    if state != "inactive":
        # Not skipped: `make test-swarm` would pass having tested nothing. Not
        # left either: leaving a swarm this test did not make removes whatever
        # runs on it.
        pytest.fail(
            f"THIS ENGINE IS ALREADY IN A SWARM ({state}): the test makes a swarm of its own and leaves it, "
            "so it needs an engine in none. Leave that swarm yourself (`docker swarm leave --force`, "
            "which removes its services) or run the test on another engine.",
            pytrace=False,
        )
    leaks = compose_variables() | {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    empty = tempfile.NamedTemporaryFile("w", prefix="lab-swarm-", suffix=".env", delete=False)
    empty.close()
    env = {k: v for k, v in os.environ.items() if k not in leaks and not k.startswith("COMPOSE_")}
    env.update(
        COMPOSE_ENV_FILES=empty.name,
        STACK_NAME=os.environ.get("LAB_TEST_STACK", "labtest"),
        LAB_IMAGE=os.environ.get("LAB_TEST_IMAGE", "task-queue-lab:test"),
        LAB_ORCHESTRATOR="swarm",
        GRAFANA_ADMIN_PASSWORD=secrets.token_urlsafe(16),
        **{name: str(port) for name, port in zip(PORTS, free_ports(len(PORTS)))},
    )
    Compose(env)("build", "api", "locust-master", timeout=1800)  # the image of the witness and the probes
    # A network and a container from before the swarm, as a compose project's: after a
    # swarm was left, new containers there resolved no names until the engine restarted.
    witness = f"lab-swarm-witness-{secrets.token_hex(3)}"
    docker("network", "create", witness)
    docker("run", "--detach", "--restart", "unless-stopped", "--name", witness, "--network", witness,
           env["LAB_IMAGE"], "sleep", "infinity")  # fmt: skip
    docker("swarm", "init", "--advertise-addr", "127.0.0.1")
    try:
        yield env
    finally:
        subprocess.run(["make", "-C", str(ROOT), "stack-down"], env=env, capture_output=True, timeout=300)
        try:
            leave(env["LAB_IMAGE"])  # raises when a name does not resolve afterwards
            code = f"import socket; socket.gethostbyname({witness!r})"
            probe = docker("run", "--rm", "--network", witness, env["LAB_IMAGE"], "python", "-c", code, check=False)
            assert probe.returncode == 0, f"after the swarm, a new container does not resolve {witness}: {probe.stderr}"
        finally:
            docker("rm", "--force", witness, check=False)
            docker("network", "rm", witness, check=False)
            os.unlink(empty.name)


@pytest.fixture(scope="module")
def stack(swarm_env):
    """`make stack-up` of every service but Grafana (no offline image); (env, Swarm, its output)."""
    services = make(swarm_env, "-s", "compose-services", timeout=60).stdout.split()
    started = time.monotonic()
    out = make(swarm_env, "stack-up", f"services={' '.join(services)}").stdout
    print(f"make stack-up: {time.monotonic() - started:.0f} s")
    return swarm_env, Swarm(swarm_env), out, services


def test_every_service_runs_its_replicas_healthy(stack):
    env, swarm, out, services = stack
    assert swarm.deployed() == sorted(services)
    listed = docker("service", "ls", "--filter", f"label=com.docker.stack.namespace={swarm.stack}").stdout
    print(listed)
    replicas = dict(re.findall(rf"{swarm.stack}_(\S+)\s+replicated\s+(\d+/\d+)", listed))
    assert replicas == dict.fromkeys(services, "1/1"), listed
    # Every service has a healthcheck (tests/unit/test_stack.py: the stack keeps
    # compose's), and make stack-up waits for it: each container is healthy.
    for service in services:
        (container,) = swarm.ids(service)
        state = json.loads(docker("inspect", "--format", "{{json .State}}", container).stdout)
        assert (state.get("Health") or {}).get("Status") == "healthy", (service, state.get("Health"))
    assert re.search(r"api\s+http://127\.0\.0\.1:\d+/", out) and "prometheus  http://127.0.0.1:" in out, out


def test_prometheus_scrapes_every_service_by_its_tasks_name(stack):
    env, swarm, _, _ = stack
    prom = f"http://{swarm.port('prometheus', 9090)}"
    assert prom.endswith(f":{env['PROMETHEUS_PORT']}")  # the forwarder, on 127.0.0.1

    def all_up():
        targets = httpx.get(f"{prom}/api/v1/targets", params={"state": "active"}, timeout=10).json()["data"]
        ours = [t for t in targets["activeTargets"] if t["labels"]["job"] in SCRAPED_JOBS]
        jobs = [t["labels"]["job"] for t in ours]
        return ours if sorted(jobs) == sorted(SCRAPED_JOBS) and all(t["health"] == "up" for t in ours) else None

    for target in wait_until(all_up, timeout=90, interval=2, what="one target up per job"):
        assert target["discoveredLabels"]["__meta_dns_name"] == f"tasks.{target['labels']['job']}", target


def test_a_load_on_the_stack_keeps_an_exact_ledger_and_says_where_it_ran(stack, tmp_path):
    env, swarm, _, _ = stack
    n, run = 400, f"swarm-{secrets.token_hex(4)}"
    out = make(env, "load", "worker=celery", f"iterations={n}", "users=20", "wait=1", f"run={run}",
               f"results_dir={tmp_path}").stdout  # fmt: skip
    record = json.loads((tmp_path / f"{run}.json").read_text())
    # Said when it starts, and in the summary's notes at its end.
    assert "on the Swarm stack" in out and "\n  notes    swarm, 1 node(s)" in out, out
    platform = record["platform"]
    assert {k: platform[k] for k in ("orchestrator", "stack", "nodes", "node_roles")} == {
        "orchestrator": "swarm", "stack": swarm.stack, "nodes": 1, "node_roles": ["-"],
    }  # fmt: skip
    (node,) = {n for nodes in platform["placement"].values() for n in nodes}
    assert len(platform["placement"]["celery"]) == 1 and "api" in platform["placement"], platform
    assert (record["requests"], record["status_codes"]) == (n, {"202": n}), record["warnings"]
    tasks = record["tasks"]
    assert (tasks["enqueued"], tasks["completed"], tasks["failed"], tasks["duplicates"], tasks["lost"]) == (
        n, n, 0, 0, 0,
    )  # fmt: skip
    celery = record["limits"]["workers"]["celery"]
    assert (celery["cpus"], celery["memory"], celery["replicas"]) == (0.2, "200M", 1)
    assert record["resources"]["celery"]["cpu_limit_cores"] == pytest.approx(0.2)
    assert not swarm.ids("locust-master", include_stopped=True)  # removed with its service
    assert "locust-master" not in swarm.deployed()


def test_scaled_replicas_are_each_scraped_and_each_run_tasks(stack):
    env, swarm, _, _ = stack
    api, prom = f"http://{swarm.port('api', 8000)}", f"http://{swarm.port('prometheus', 9090)}"
    completed = 'sum by (instance) (lab_task_completed_total{job="saq", queue="saq"})'

    def query(expr):
        return httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10).json()["data"]["result"]

    try:
        since = time.time()
        swarm.scale("saq", 2)

        def two_fresh():
            targets = httpx.get(f"{prom}/api/v1/targets", params={"state": "active"}, timeout=10).json()["data"]
            saq = [t for t in targets["activeTargets"] if t["labels"]["job"] == "saq"]
            fresh = [t for t in saq if t["health"] == "up" and parse_time(t["lastScrape"]) > since]
            return {t["labels"]["instance"] for t in saq} if len(saq) == len(fresh) == 2 else None

        instances = wait_until(two_fresh, timeout=60, interval=2, what="2 saq targets scraped")
        before = by_label(query(completed), "instance")
        for batch in range(3):  # a replica just started may find a batch taken by the other
            run = f"swarm-saq2-{secrets.token_hex(4)}"
            post_tasks(api, run, {"saq": 200})
            wait_settled(api, run, total=200, timeout=120)

            def counted(sent: int = 200 * (batch + 1)):
                after = by_label(query(completed), "instance")
                done = {i: after.get(i, 0) - before.get(i, 0) for i in instances}
                return done if sum(done.values()) == sent else None

            done = wait_until(counted, timeout=30, interval=2, what="Prometheus counting the saq tasks")
            if all(v > 0 for v in done.values()):
                break
        assert all(v > 0 for v in done.values()), f"one saq replica ran nothing: {done}"
    finally:
        swarm.scale("saq", 1)
