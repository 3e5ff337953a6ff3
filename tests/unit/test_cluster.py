"""The cluster of make cluster-up (cluster/docker-compose.yml, labctl/platform/cluster.py),
statically: the nodes' roles, the images the registry must hold, where each is found,
and a compose file whose nodes are alike, sized by the knobs and published on loopback
only. Rendered by compose itself; no Docker engine."""

import json
import os
import subprocess

import pytest

from labctl.platform import cluster as C
from labctl.platform import stack as S
from tests.compose.helpers import compose_command


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    empty = tmp_path_factory.mktemp("cluster") / "empty.env"
    empty.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLUSTER_", "COMPOSE_"))}

    def render(**variables: str) -> dict:
        cmd = [*compose_command(), "-f", str(C.COMPOSE_FILE), "--env-file", str(empty), "config", "--format", "json"]
        proc = subprocess.run(cmd, env={**env, **variables}, capture_output=True, text=True, timeout=60, check=True)
        return json.loads(proc.stdout)

    return render


def test_the_nodes_roles_set_redis_the_api_locust_and_the_workers_apart():
    assert C.layout(1) == {"node-1": None}
    assert C.layout(3) == {"node-1": "broker", "node-2": "lab", "node-3": "load"}
    assert C.layout(5) == {
        "node-1": "broker",
        "node-2": "lab",
        "node-3": "load",
        "node-4": "worker",
        "node-5": "worker",
    }
    assert set(C.layout(6).values()) <= set(S.ROLES)
    with pytest.raises(C.ParamError):
        C.layout(0)
    # CLUSTER_ROLES: in order, "-" for none, worker for the nodes it leaves out.
    assert C.layout(3, "broker lab worker") == {"node-1": "broker", "node-2": "lab", "node-3": "worker"}
    assert C.layout(3, "- lab") == {"node-1": None, "node-2": "lab", "node-3": "worker"}
    for wrong in ("broker here", "brokr"):
        with pytest.raises(C.ParamError, match="is no node role"):
            C.layout(2, wrong)


def test_the_registry_holds_every_public_image_the_lab_pulls_or_builds_from(tmp_path):
    (tmp_path / "empty.env").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "LAB_IMAGE"}
    config = S.compose_config({**env, "COMPOSE_ENV_FILES": str(tmp_path / "empty.env")}, profiles=("*",))
    images, bases = C.public_images(config, C.DOCKERFILE.read_text())
    assert {"redis:7.4.7", "prom/prometheus:v3.13.3"} <= set(images)
    assert bases == ["ghcr.io/astral-sh/uv:0.13.9", "python:3.11-slim"]  # the manager builds from these
    assert not any(i.startswith("task-queue-lab") for i in images), images  # the lab's own: make stack-up builds it
    assert C.registry_path("redis:7.4.7") == ("library/redis:7.4.7", True)
    assert C.registry_path("prom/prometheus:v3.13.3") == ("prom/prometheus:v3.13.3", True)
    assert C.registry_path("ghcr.io/astral-sh/uv:0.13.9") == ("ghcr.io/astral-sh/uv:0.13.9", False)


def test_a_docker_host_pointed_at_the_cluster_is_set_aside_for_this_machines_engine(monkeypatch):
    monkeypatch.setenv("CLUSTER_DOCKER_PORT", "23750")
    assert "DOCKER_HOST" not in C.host_env({"DOCKER_HOST": "tcp://127.0.0.1:23750"})
    assert C.host_env({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"})["DOCKER_HOST"].startswith("unix://")
    assert C.host_env({})["CLUSTER_DOCKER_PORT"] == "23750"


def test_every_node_is_alike_sized_by_the_knobs_and_named_as_its_service(rendered):
    config = rendered(CLUSTER_NODE_CPUS="0.5", CLUSTER_NODE_MEM="1g")
    nodes = {n: s for n, s in config["services"].items() if n.startswith("node-")}
    assert sorted(nodes) == [f"node-{i}" for i in range(1, 7)]
    for name, node in nodes.items():
        assert node["hostname"] == name
        limits = node["deploy"]["resources"]["limits"]
        assert (float(limits["cpus"]), int(limits["memory"])) == (0.5, 2**30), name
        assert node["entrypoint"] == ["sh", "/cluster/node-entrypoint.sh"]
        assert "--registry-mirror=http://registry:5000" in node["command"], name
        assert node["restart"] == "no"  # a killed node stays down until started again
    assert (C.COMPOSE_FILE.parent / "node-entrypoint.sh").is_file()


def test_only_the_managers_api_and_the_registry_are_published_on_loopback(rendered):
    config = rendered(CLUSTER_DOCKER_PORT="23750", CLUSTER_REGISTRY_PORT="25000")
    published = {
        name: [(p["host_ip"], p["published"], p["target"]) for p in s.get("ports", [])]
        for name, s in config["services"].items()
        if s.get("ports")
    }
    assert published == {"node-1": [("127.0.0.1", "23750", 2375)], "registry": [("127.0.0.1", "25000", 5000)]}
