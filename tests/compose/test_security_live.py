"""Security defaults of the running stack, seen from the host: containers run
as non-root, Redis is reachable only inside the compose network, what is
published is published on 127.0.0.1 only, Prometheus' admin API is off, no
secret is baked into the lab's image."""

import json
import subprocess

import httpx
import pytest

from tests.compose.helpers import WORKERS

pytestmark = pytest.mark.compose

LAB_SERVICES = ("api", *WORKERS, "queue-monitor", "flower", "saq-ui", "upstream")


@pytest.mark.parametrize("service", LAB_SERVICES)
def test_lab_containers_run_as_non_root(stack, service):
    uid = stack.compose("exec", "-T", service, "id", "-u").stdout.strip()
    assert uid and uid != "0", f"{service} runs as uid {uid!r}"


def test_redis_is_published_nowhere(stack):
    out = stack.compose("port", "redis", "6379", check=False)
    # compose prints ":0" for a port that is not published on the host
    assert out.returncode != 0 or out.stdout.strip() in ("", ":0"), f"redis published: {out.stdout}"


# What the stack publishes on the host (service -> its container port), as the engine bound it.
PUBLISHED = {"api": "8000/tcp", "prometheus": "9090/tcp", "flower": "5555/tcp", "saq-ui": "8082/tcp"}


def test_only_the_uis_and_the_api_are_published_and_on_127_0_0_1_only(stack):
    ids = stack.compose("ps", "-q").stdout.split()
    inspected = json.loads(
        subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, check=True, timeout=60).stdout
    )
    bound = {
        (c["Config"]["Labels"]["com.docker.compose.service"], port, b["HostIp"])
        for c in inspected
        for port, bindings in (c["NetworkSettings"]["Ports"] or {}).items()
        for b in bindings or ()
    }
    assert bound == {(service, port, "127.0.0.1") for service, port in PUBLISHED.items()}, bound


def test_prometheus_admin_api_is_disabled(stack):
    r = httpx.post(f"{stack.prometheus_url}/api/v1/admin/tsdb/snapshot", timeout=10)
    assert r.status_code != 200 and "admin APIs disabled" in r.text


def test_no_secret_in_the_image(stack):
    image = stack.env["LAB_IMAGE"]
    inspect = json.loads(
        subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True, check=True).stdout
    )[0]
    env = " ".join(inspect["Config"]["Env"]).upper()
    assert "PASSWORD" not in env and "SECRET" not in env and "TOKEN" not in env
    listing = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "sh",
            image,
            "-c",
            "ls -a /app; test ! -e /app/.env && echo no-dotenv",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "no-dotenv" in listing.stdout, listing.stdout + listing.stderr
