"""The compose file, rendered by compose itself, and the Prometheus config: no
Docker engine needed (part of `make test`). The rules' and panels' PromQL is
parsed by the pinned Prometheus's own parser (tests/unit/test_promql_parse.py); the
config itself is loaded by the pinned Prometheus in the compose tests."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter

from lab.queues import BROKER_NAMES, BROKERS
from lab.settings import Settings
from services.bare.queues import BARE
from tests.compose.helpers import compose_command

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
PROMETHEUS_CONFIG = ROOT / "prometheus" / "prometheus.yml"

WORKERS = BROKER_NAMES
# Services run from the lab's own image, so they read lab/settings.py.
LAB_IMAGE_SERVICES = ("api", *WORKERS, "queue-monitor", "flower", "saq-ui", "upstream")
PUBLISHED = {
    "api": 8000,
    "prometheus": 9090,
    "grafana": 3000,
    "flower": 5555,
    "saq-ui": 8082,
    "locust-ui": 8089,
    "rabbitmq": 15672,
}
PORT_VARIABLES = {
    "api": "API_PORT",
    "prometheus": "PROMETHEUS_PORT",
    "grafana": "GRAFANA_PORT",
    "flower": "FLOWER_PORT",
    "saq-ui": "SAQ_WEB_PORT",
    "locust-ui": "LOCUST_UI_PORT",
    "rabbitmq": "RABBITMQ_UI_PORT",
}
# Prometheus job -> port scraped on every replica of the compose service of that name.
SCRAPED = {
    "api": 9000,
    **{name: 9000 for name in WORKERS},
    "queue-monitor": 9000,
    "flower": 5555,
    "redis-exporter": 9121,
    "rabbitmq": 15692,
    "postgres-exporter": 9187,
    "prometheus": 9090,
    # the `load` profile's services: scraped while a load run has them up
    "locust-master": 9000,
    "locust-worker": 9000,
    "probe": 9000,
}
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    """render(**variables): `compose config` as JSON for exactly these variables:
    not the caller's environment, not the developer's .env."""
    cmd = compose_command()
    empty_env = tmp_path_factory.mktemp("compose") / "empty.env"
    empty_env.write_text("")
    names = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE_FILE.read_text()))
    leaks = names | {"COMPOSE_FILE", "COMPOSE_PROFILES", "COMPOSE_PROJECT_NAME", "COMPOSE_ENV_FILES"}
    base_env = {k: v for k, v in os.environ.items() if k not in leaks}

    def _render(**variables: str) -> dict:
        proc = subprocess.run(
            [
                *cmd,
                "-f",
                str(COMPOSE_FILE),
                "--env-file",
                str(empty_env),
                "--profile",
                "*",
                "config",
                "--format",
                "json",
            ],
            cwd=ROOT,
            env={**base_env, **variables},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, f"compose config {variables} failed:\n{proc.stderr}"
        return json.loads(proc.stdout)

    return _render


def limits(config: dict, service: str) -> tuple[float, int, int]:
    deploy = config["services"][service]["deploy"]
    lim = deploy["resources"]["limits"]
    return float(lim["cpus"]), int(lim["memory"]), deploy.get("replicas", 1)


def test_default_limits_and_replicas(render):
    config = render()
    for service in ("api", *WORKERS):
        assert limits(config, service) == (0.2, 200 * MiB, 1), service


def test_worker_variables_override_every_worker_and_only_the_workers(render):
    config = render(WORKER_CPUS="0.5", WORKER_MEM="500M", ARQ_REPLICAS="2")
    assert limits(config, "arq") == (0.5, 500 * MiB, 2)
    for service in WORKERS:
        if service != "arq":
            assert limits(config, service) == (0.5, 500 * MiB, 1), service
    assert limits(config, "api") == (0.2, 200 * MiB, 1)


def test_per_queue_variables_win_over_the_worker_ones(render):
    """Every queue of lab/queues.py but the first gets its own <PREFIX>_CPUS,
    _MEM and _REPLICAS; the first keeps the WORKER_ ones."""
    first, *others = BROKERS
    own = {b.name: (1.0 + (i + 1) / 10, (600 + i) * MiB, i % 3 + 1) for i, b in enumerate(others)}
    variables = {"WORKER_CPUS": "0.5", "WORKER_MEM": "500M", "API_CPUS": "1", "API_MEM": "300M"}
    for b in others:
        cpus, mem, replicas = own[b.name]
        variables |= {
            f"{b.limits_prefix}_CPUS": str(cpus),
            f"{b.limits_prefix}_MEM": f"{mem // MiB}M",
            f"{b.limits_prefix}_REPLICAS": str(replicas),
        }
    config = render(**variables)
    assert {b.name: limits(config, b.name) for b in others} == own
    assert limits(config, first.name) == (0.5, 500 * MiB, 1)
    assert limits(config, "api") == (1.0, 300 * MiB, 1)


def test_every_service_has_a_healthcheck_restart_policy_and_waits_for_healthy_dependencies(render):
    config = render()
    assert set(config["services"]) >= {
        "redis",
        "api",
        *WORKERS,
        "queue-monitor",
        "flower",
        "prometheus",
        "grafana",
        "redis-exporter",
    }
    for name, service in config["services"].items():
        if service.get("profiles") == ["bench"]:
            # One-offs that `make bench` starts and removes: a restart would skew a
            # drain, or hide a bare API killed at its memory limit.
            assert service.get("restart") == "no", name
            if name == "bench-api":  # `make bench` starts it with --wait
                assert service.get("healthcheck", {}).get("test"), name
            continue
        check = service.get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
        assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
        for dependency, how in service.get("depends_on", {}).items():
            # Locust's workers retry their connection to the master (locust.runners.WorkerRunner).
            started = (name, dependency) == ("locust-worker", "locust-master")
            assert how["condition"] == ("service_started" if started else "service_healthy"), (name, dependency)
    for name in ("api", *WORKERS, "queue-monitor", "flower", "saq-ui", "redis-exporter"):
        assert "redis" in config["services"][name].get("depends_on", {}), name


def test_each_bare_worker_is_probed_as_often_as_the_lab_worker_beside_it(render):
    """A probe is a `docker exec`, whose CPU the container pays: a bare worker
    without one would drain at a larger share of the same quota."""
    services = render()["services"]
    for name in BARE:
        lab, bare = services[name]["healthcheck"], services[f"bench-{name}"].get("healthcheck", {})
        assert bare.get("test") and not bare.get("disable"), f"bench-{name} has no probe"
        assert bare.get("interval") == lab.get("interval"), name


def test_workers_outlive_their_shutdown_grace(render):
    config = render()
    grace = Settings.model_fields["shutdown_grace_s"].default
    for name in ("api", *WORKERS):
        period = config["services"][name].get("stop_grace_period", "10s")
        seconds = sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in re.findall(r"(\d+)([hms])", period))
        assert seconds >= grace + 5, (name, period)


def test_ports_bind_loopback_only_and_are_overridable(render):
    config = render()
    published = {}
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", (name, port)
            published[name] = (int(port["published"]), port["target"])
    assert published == {name: (port, port) for name, port in PUBLISHED.items()}

    moved = {name: 20000 + i for i, name in enumerate(PUBLISHED)}
    config = render(**{PORT_VARIABLES[name]: str(port) for name, port in moved.items()})
    for name, port in moved.items():
        (spec,) = config["services"][name]["ports"]
        assert (int(spec["published"]), spec["target"], spec["host_ip"]) == (port, PUBLISHED[name], "127.0.0.1")


def test_workers_can_scale(render):
    config = render()
    for name in WORKERS:
        service = config["services"][name]
        assert "container_name" not in service and not service.get("ports"), name
    assert not any("container_name" in s for s in config["services"].values())


def test_images_are_pinned_by_tag(render):
    config = render()
    for name, service in config["services"].items():
        if "build" in service:
            continue
        image = service["image"]
        assert "@" not in image, f"{name}: pin by tag, not digest (no local stand-in can match a digest)"
        if image == config["services"]["api"]["image"]:
            continue  # the lab's own image, built by the api service
        repo, _, tag = image.rpartition(":")
        assert repo and "/" not in tag and tag not in ("", "latest"), f"{name}: image {image} is not pinned"
    build = config["services"]["api"]["build"]
    assert build.get("target") == "app"


def test_every_settings_knob_reaches_the_lab_services_with_its_default(render):
    """Each field of lab/settings.py is an environment variable of every
    service running the lab's image, with settings.py's own default."""
    config = render()
    # Addresses inside the stack, not settings.py's localhost ones.
    fixed = {
        "redis_url": "redis://redis:6379/0",
        "rabbitmq_url": "amqp://lab:@rabbitmq:5672/%2F",  # RABBITMQ_PASSWORD, generated into .env, is not set here
        "postgres_url": "postgresql://lab:@postgres:5432/lab",  # as POSTGRES_PASSWORD
        "upstream_url": "http://upstream:8001/",
        "probe_target": "http://api:8000/healthz",
    }
    concurrency = Settings.model_fields["concurrency"].default
    for name in LAB_IMAGE_SERVICES:
        env = config["services"][name]["environment"]
        assert env.get("SERVICE_NAME") == name
        for field, info in Settings.model_fields.items():
            if field in ("service_name", "saq_web"):  # per service / the UI is the saq-ui service
                continue
            key = field.upper()
            assert key in env, f"{name}: {key} is not passed to the container"
            if field in fixed:
                assert env[key] == fixed[field]
                continue
            default = concurrency if info.default is None else info.default  # per-queue: CONCURRENCY
            assert TypeAdapter(info.annotation).validate_python(env[key]) == default, (name, key, env[key])


def test_knobs_pass_through_and_per_queue_concurrency_defaults_to_concurrency(render):
    env = render(CONCURRENCY="7", ARQ_MAX_JOBS="50", CELERY_POOL="threads", IO_LATENCY_MS="25")["services"]["arq"][
        "environment"
    ]
    assert (
        env["CONCURRENCY"],
        env["ARQ_MAX_JOBS"],
        env["SAQ_CONCURRENCY"],
        env["FASTSTREAM_MAX_WORKERS"],
        env["CELERY_CONCURRENCY"],
    ) == ("7", "50", "7", "7", "7")
    assert (env["CELERY_POOL"], env["IO_LATENCY_MS"]) == ("threads", "25")


def test_redis_is_private_and_keeps_nothing(render):
    redis = render()["services"]["redis"]
    assert not redis.get("ports") and not redis.get("volumes")
    command = redis["command"]
    assert command[command.index("--save") + 1] == "" and command[command.index("--appendonly") + 1] == "no"


def test_prometheus_reads_the_repo_config_and_keeps_its_data(render):
    prometheus = render()["services"]["prometheus"]
    mounts = {(v["type"], v["target"]): v["source"] for v in prometheus["volumes"]}
    assert Path(mounts[("bind", "/etc/prometheus")]) == ROOT / "prometheus"
    assert ("volume", "/prometheus") in mounts
    assert not any("--web.enable-admin-api" in arg for arg in prometheus["command"])


def test_grafana_has_no_default_password_and_refuses_an_empty_one(render, tmp_path):
    grafana = render()["services"]["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == ""
    assert (
        render(GRAFANA_ADMIN_PASSWORD="s3cret")["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
        == "s3cret"
    )
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    mounts = {v["target"]: Path(v["source"]) for v in grafana["volumes"] if v["type"] == "bind"}
    assert mounts == {
        "/etc/grafana/provisioning": ROOT / "grafana" / "provisioning",
        "/var/lib/grafana/dashboards": ROOT / "grafana" / "dashboards",
    }
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / "grafana" / "dashboards" / Path(home).relative_to("/var/lib/grafana/dashboards")).is_file()
    # The entrypoint guard, run by a real shell ($$ is compose's escape for $).
    shell, flag, script = grafana["entrypoint"]
    script = script.replace("$$", "$")
    empty = subprocess.run(
        ["sh", "-c", script],
        env={"GF_SECURITY_ADMIN_PASSWORD": "", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert (shell, flag, empty.returncode) == ("/bin/sh", "-c", 1) and "GRAFANA_ADMIN_PASSWORD" in empty.stderr
    set_ = subprocess.run(
        ["sh", "-c", script],
        env={"GF_SECURITY_ADMIN_PASSWORD": "x", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert set_.returncode != 1 and "GRAFANA_ADMIN_PASSWORD" not in set_.stderr  # went on to exec /run.sh


def test_prometheus_scrapes_every_replica_of_every_service(render):
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    services = set(render()["services"])
    interval = config["global"]["scrape_interval"]
    assert re.fullmatch(r"[1-5]s", interval), interval
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(SCRAPED)
    for name, job in jobs.items():
        (sd,) = job["dns_sd_configs"]
        assert (sd["names"], sd["type"], sd["port"]) == ([name], "A", SCRAPED[name]), name
        assert name in services, f"job {name} looks up a name that is no compose service"
        relabel = {(tuple(r["source_labels"]), r["target_label"]) for r in job["relabel_configs"]}
        assert {(("__meta_dns_name",), "job"), (("__address__",), "instance")} <= relabel, name
