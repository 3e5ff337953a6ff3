"""The Swarm stack file (labctl/platform/stack.py, docker-stack.override.yml) against the
compose file, rendered by compose itself: no Docker engine needed. One definition
of the lab: the stack and `docker compose config` must agree on every service,
image, command, healthcheck, init, stop grace period, limit, replica count and
environment variable, at the defaults and with knobs set. The stack's own choices (dnsrr, host-mode ports, placement,
configs for the bind mounts, tasks.<service> for Prometheus) are checked here
too, and `docker stack config` (the CLI's own loader, offline) accepts the file."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess

import pytest
import yaml

from lab.queues import BROKER_NAMES, BROKER_PROFILES
from labctl.platform import stack as S
from tests.compose.helpers import compose_command

LOAD_PROFILE = ("locust-master", "locust-worker", "probe")
# What a service is, beside its limits, replicas and environment: the same in both files.
DEFINED = ("image", "command", "entrypoint", "healthcheck", "init", "stop_grace_period")
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    """config(**variables): `docker compose --profile load config` for exactly these
    variables: not the caller's environment, not the developer's .env."""
    compose_command()  # fails with how to install compose when there is none
    empty = tmp_path_factory.mktemp("stack") / "empty.env"
    empty.write_text("")
    names = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", (S.ROOT / "docker-compose.yml").read_text()))
    base = {k: v for k, v in os.environ.items() if k not in names and not k.startswith("COMPOSE_")}

    rendered: dict[tuple, dict] = {}

    def _config(**variables: str) -> dict:
        key = tuple(sorted(variables.items()))
        if key not in rendered:
            rendered[key] = S.compose_config(
                {**base, "COMPOSE_ENV_FILES": str(empty), **variables}, profiles=("load", *BROKER_PROFILES)
            )
        return copy.deepcopy(rendered[key])

    return _config


def everything(config: dict) -> list[str]:
    """What make stack-up deploys (every service outside a profile, and the
    brokers' profiles given) and what make load adds."""
    return [
        name
        for name, s in config["services"].items()
        if not s.get("profiles") or set(s["profiles"]) & set(BROKER_PROFILES)
    ] + list(LOAD_PROFILE)


def memory_bytes(text) -> int:
    """A memory size as Docker reads it: bytes, or k/m/g (1024-based), an optional b."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)b?", str(text).strip().lower())
    assert match, f"not a memory size: {text!r}"
    return int(float(match.group(1)) * 1024 ** " kmg".index(match.group(2) or " "))


def cpus_memory(deploy: dict | None) -> tuple[float | None, int | None]:
    limits = ((deploy or {}).get("resources") or {}).get("limits") or {}
    cpus, memory = limits.get("cpus"), limits.get("memory")
    return (float(cpus) if cpus is not None else None, memory_bytes(memory) if memory is not None else None)


def without_retries(healthcheck: dict | None) -> dict | None:
    return None if healthcheck is None else {k: v for k, v in healthcheck.items() if k != "retries"}


def disagreements(config: dict, stack: dict) -> list[str]:
    """Where the stack and the compose file disagree on a service, image, command,
    healthcheck, init, stop grace period, limit, replica count or environment variable."""
    problems = []
    missing = set(everything(config)) - set(stack["services"])
    problems += [f"{name}: in docker-compose.yml, not in the stack" for name in sorted(missing)]
    for name, ours in stack["services"].items():
        theirs = config["services"].get(name)
        if theirs is None:
            problems.append(f"{name}: in the stack, not in docker-compose.yml")
            continue
        for key in DEFINED:
            if key == "healthcheck":  # its retries differ on purpose: see the test of the patient probe below
                if without_retries(ours.get(key)) != without_retries(theirs.get(key)):
                    problems.append(f"{name}: {key} {ours.get(key)!r} != compose's {theirs.get(key)!r}")
            elif ours.get(key) != theirs.get(key):
                problems.append(f"{name}: {key} {ours.get(key)!r} != compose's {theirs.get(key)!r}")
        if cpus_memory(ours["deploy"]) != cpus_memory(theirs.get("deploy")):
            problems.append(
                f"{name}: limits (cpus, memory) {cpus_memory(ours['deploy'])} != compose's "
                f"{cpus_memory(theirs.get('deploy'))}"
            )
        replicas = ((theirs.get("deploy") or {}).get("replicas", 1), ours["deploy"].get("replicas", 1))
        if replicas[0] != replicas[1]:
            problems.append(f"{name}: {replicas[1]} replicas != compose's {replicas[0]}")
        env, their_env = ours.get("environment") or {}, theirs.get("environment") or {}
        for key in sorted(set(env) | set(their_env)):
            if env.get(key) != their_env.get(key):
                problems.append(f"{name}: environment {key}={env.get(key)!r} != compose's {their_env.get(key)!r}")
    return problems


def build(config: dict, override: dict | None = None, **kwargs) -> dict:
    return S.stack_file(config, S.load_override() if override is None else override, everything(config), **kwargs)


# -- One definition of the lab ----------------------------------------------------------------
def test_the_stack_and_the_compose_file_agree_at_the_defaults(config):
    rendered = config()
    stack = build(rendered)
    assert set(stack["services"]) == set(everything(rendered)) and len(stack["services"]) >= 18
    assert disagreements(rendered, stack) == []
    assert cpus_memory(stack["services"]["arq"]["deploy"]) == (0.2, 200 * MiB)


def test_the_knobs_reach_the_stack_as_they_reach_compose(config):
    rendered = config(WORKER_CPUS="0.5", CELERY_MEM="300M", ARQ_REPLICAS="3", CONCURRENCY="7", LOCUST_WORKERS="4")
    stack = build(rendered)
    assert disagreements(rendered, stack) == []
    services = stack["services"]
    assert cpus_memory(services["celery"]["deploy"]) == (0.5, 300 * MiB)
    assert services["arq"]["deploy"]["replicas"] == 3 and services["locust-worker"]["deploy"]["replicas"] == 4
    assert services["saq"]["environment"]["SAQ_CONCURRENCY"] == "7"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"arq": {"deploy": {"resources": {"limits": {"cpus": "0.5"}}}}}, "arq: limits (cpus, memory) (0.5,"),
        ({"api": {"deploy": {"resources": {"limits": {"memory": "300M"}}}}}, "api: limits (cpus, memory)"),
        ({"celery": {"deploy": {"replicas": 2}}}, "celery: 2 replicas != compose's 1"),
        ({"saq": {"environment": {"CONCURRENCY": "10"}}}, "saq: environment CONCURRENCY='10'"),
        ({"redis": {"image": "redis:7"}}, "redis: image 'redis:7'"),
        ({"arq": {"healthcheck": {"interval": "60s"}}}, "arq: healthcheck "),
        ({"api": {"init": False}}, "api: init False != compose's True"),
        ({"celery": {"stop_grace_period": "1s"}}, "celery: stop_grace_period '1s' != compose's"),
    ],
)
def test_the_drift_check_fails_on_an_override_that_changes_the_lab(config, change, expected):
    """The override may say where and how a service runs, never what it is: a limit,
    a replica count, a variable or an image set there makes the two disagree."""
    override = S.merged(S.load_override(), {"services": change})
    problems = disagreements(config(), build(config(), override))
    assert any(p.startswith(expected) for p in problems), problems


# -- What the stack does its own way ------------------------------------------------------------
def test_every_service_is_reached_by_dns_round_robin_and_restarts_as_compose_says(config):
    rendered = config()
    stack = build(rendered)
    for name, service in stack["services"].items():
        deploy = service["deploy"]
        assert deploy["endpoint_mode"] == "dnsrr", name
        expected = "none" if name == "locust-master" else S.RESTART[rendered["services"][name].get("restart", "no")]
        assert deploy["restart_policy"]["condition"] == expected, name
        assert not {"build", "depends_on", "profiles", "pull_policy", "restart"} & set(service), name


def test_only_the_api_and_grafana_are_published_in_host_mode(config):
    stack = build(config(API_PORT="18000", GRAFANA_PORT="13000"))
    published = {name: s["ports"] for name, s in stack["services"].items() if s.get("ports")}
    assert published == {
        "api": [{"target": 8000, "published": 18000, "protocol": "tcp", "mode": "host"}],
        "grafana": [{"target": 3000, "published": 13000, "protocol": "tcp", "mode": "host"}],
    }
    assert not stack["services"]["redis"].get("ports")


def test_what_compose_publishes_and_the_stack_does_not_is_forwarded_on_loopback(config):
    forwards = S.forwarded_ports(config(PROMETHEUS_PORT="19090"), S.load_override())
    assert forwards == [("flower", 5555, 5555), ("prometheus", 19090, 9090), ("saq-ui", 8082, 8082)]


def test_bind_mounts_become_configs_named_after_their_content(config):
    stack = build(config())
    mounts = {s: {c["target"]: c["source"] for c in svc.get("configs", [])} for s, svc in stack["services"].items()}
    assert set(mounts["prometheus"]) == {"/etc/prometheus/prometheus.yml"} | {
        f"/etc/prometheus/rules/{p.name}" for p in (S.ROOT / "prometheus" / "rules").glob("*.yml")
    }
    assert "/var/lib/grafana/dashboards/queues.json" in mounts["grafana"]
    assert set(mounts["locust-master"]) == set(mounts["locust-worker"]) == {"/app/locust/locustfile.py"}
    for name, spec in stack["configs"].items():
        path = S.ROOT / spec["file"]
        assert path.is_file() and name == S.config_name(path), name
    assert stack["services"]["prometheus"]["volumes"] == ["prometheus-data:/prometheus"]
    assert stack["services"]["rabbitmq"]["volumes"] == ["rabbitmq-data:/var/lib/rabbitmq"]
    assert stack["services"]["postgres"]["volumes"] == ["postgres-data:/var/lib/postgresql/data"]
    brokers = ("prometheus", "rabbitmq", "postgres")
    assert not any("volumes" in s for n, s in stack["services"].items() if n not in brokers)


def test_placement_follows_the_roles_the_nodes_carry():
    assert S.placement("broker", set(), None) == []
    assert S.placement("broker", {"broker", "load"}, None) == ["node.labels.lab.role == broker"]
    assert S.placement("lab", {"load"}, None) == ["node.labels.lab.role != load"]  # never beside the generator
    assert S.placement("load", {"broker"}, None) == []
    assert S.placement("here", {"load"}, "n0d3") == ["node.id == n0d3"]
    # The queues' workers: on nodes of their own when some carry `worker`, else where the API goes.
    assert S.placement("worker", {"lab", "worker"}, None) == ["node.labels.lab.role == worker"]
    assert S.placement("worker", {"lab", "load"}, None) == ["node.labels.lab.role == lab"]
    assert S.placement("worker", {"load"}, None) == ["node.labels.lab.role != load"]
    # ... and nothing else runs on the workers' nodes (or the load generator's).
    assert S.placement("lab", {"worker"}, None) == ["node.labels.lab.role != worker"]
    assert S.placement("monitor", {"broker", "load", "worker"}, None) == [
        "node.labels.lab.role != load",
        "node.labels.lab.role != worker",
    ]
    assert S.placement("load", {"lab", "worker"}, None) == ["node.labels.lab.role != worker"]


def test_the_override_names_compose_services_and_known_roles(config):
    rendered = config()
    for name, service in S.load_override()["services"].items():
        assert name in rendered["services"], f"{S.OVERRIDE.name}: {name} is no compose service"
        assert service.get("x-role", S.DEFAULT_ROLE) in S.ROLES, name
    stack = build(rendered, node_roles={"load", "broker", "monitor"}, here="n0d3")
    constraints = {n: s["deploy"].get("placement", {}).get("constraints") for n, s in stack["services"].items()}
    assert constraints["redis"] == ["node.labels.lab.role == broker"]
    assert constraints["locust-worker"] == ["node.labels.lab.role == load"]
    assert constraints["locust-master"] == ["node.id == n0d3"]
    assert constraints["prometheus"] == ["node.labels.lab.role == monitor"]
    for worker in ("api", *BROKER_NAMES):
        assert constraints[worker] == ["node.labels.lab.role != load"], worker
    apart = build(rendered, node_roles={"load", "broker", "lab", "worker"}, here="n0d3")["services"]
    assert apart["api"]["deploy"]["placement"]["constraints"] == ["node.labels.lab.role == lab"]
    for worker in BROKER_NAMES:
        assert apart[worker]["deploy"]["placement"]["constraints"] == ["node.labels.lab.role == worker"], worker


def test_prometheus_on_the_stack_looks_up_every_replica_and_keeps_the_job_names():
    compose_jobs = yaml.safe_load(S.PROMETHEUS_CONFIG.read_text())["scrape_configs"]
    stack_jobs = S.prometheus_for_stack(S.PROMETHEUS_CONFIG.read_text())["scrape_configs"]
    assert [j["job_name"] for j in stack_jobs] == [j["job_name"] for j in compose_jobs]
    for job in stack_jobs:
        (sd,) = job["dns_sd_configs"]
        assert sd["names"] == [f"tasks.{job['job_name']}"]
        (rule,) = [r for r in job["relabel_configs"] if r["target_label"] == "job"]
        # Prometheus anchors a relabel regex; the job label is the first group.
        match = re.fullmatch(rule["regex"], sd["names"][0])
        assert match and match.group(1) == job["job_name"]


def test_the_docker_cli_accepts_the_stack_file(config, tmp_path):
    if not shutil.which("docker"):
        pytest.skip("no docker CLI here to load the stack file with `docker stack config`")
    path = tmp_path / "lab.yml"
    S.write_yaml(path, build(config()), "")
    proc = subprocess.run(["docker", "stack", "config", "-c", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = yaml.safe_load(proc.stdout)
    assert loaded["services"]["api"]["deploy"]["endpoint_mode"] == "dnsrr"
    assert loaded["networks"]["default"] == {"driver": "overlay", "attachable": True}


def test_the_stack_file_is_private_and_never_committed(tmp_path):
    """It holds the environment, Grafana's admin password included."""
    path = tmp_path / "lab.yml"
    S.write_yaml(path, {"services": {}}, "# x\n")
    assert path.stat().st_mode & 0o777 == 0o600
    ignored = subprocess.run(["git", "check-ignore", "-q", ".stack/lab.yml"], cwd=S.ROOT, capture_output=True)
    assert ignored.returncode == 0, ".stack/ must be in .gitignore"


def test_the_api_and_workers_outlast_a_saturating_load_before_swarm_replaces_them(config):
    """Swarm replaces a task whose healthcheck fails; compose only reports it. An API
    saturated by a load at its CPU limit answers its probe late, and a replacement would
    cut the run: the stack gives the API and the workers 30 probes, the rest compose's."""
    rendered = config()
    stack = build(rendered)
    for name, service in stack["services"].items():
        theirs = rendered["services"][name].get("healthcheck")
        if name in ("api", *BROKER_NAMES):
            assert service["healthcheck"] == {**theirs, "retries": 30}, name
        else:
            assert service.get("healthcheck") == theirs, name
