"""Security defaults, checked on the files that set them: nothing published
beyond 127.0.0.1, no admin API open, non-root images without secrets, and no
Grafana admin password unless the user has one (the live side of these checks
runs in tests/compose/test_security_live.py; the published ports' loopback
binding and the Grafana entrypoint's password guard are checked on the rendered
compose file, in tests/unit/test_compose_static.py)."""

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def dockerfile_stages() -> dict[str, list[str]]:
    stages: dict[str, list[str]] = {}
    current = None
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        line = line.strip()
        if m := re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.I):
            current = m.group(1) or f"stage{len(stages)}"
            stages[current] = []
        elif current and line and not line.startswith("#"):
            stages[current].append(line)
    return stages


@pytest.mark.parametrize("target", ["app", "load"])
def test_images_run_as_a_non_root_user(target):
    users = [line.split()[1] for line in dockerfile_stages()[target] if line.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), f"target {target} runs as {users[-1:] or 'root'}"


def test_no_secret_in_the_dockerfile_or_the_build_context():
    text = (ROOT / "Dockerfile").read_text()
    assert not re.search(r"^\s*(ENV|ARG)\s+[^#\n]*(PASSWORD|SECRET|TOKEN)", text, re.I | re.M)
    ignore = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "*", "the build context is an allow-list"
    assert not any(".env" in rule for rule in ignore if rule.startswith("!")), ".env must never reach an image"


def test_redis_is_not_published_and_prometheus_admin_api_is_off():
    assert not SERVICES["redis"].get("ports"), "Redis (no password) must stay inside the compose network"
    flags = " ".join(SERVICES["prometheus"].get("command", []))
    assert "--web.enable-admin-api" not in flags and "--web.enable-lifecycle" not in flags


def test_grafana_password_comes_from_the_environment_and_anonymous_is_viewer():
    grafana = SERVICES["grafana"]
    env = grafana["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "${GRAFANA_ADMIN_PASSWORD}"  # no default in the clear
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true" and env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert str(env.get("GF_USERS_ALLOW_SIGN_UP")).lower() == "false"
    assert not any("admin" == str(v) for k, v in env.items() if "PASSWORD" in k)


def test_make_generates_private_grafana_and_rabbitmq_passwords_once(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin"}

    def generate() -> str:
        proc = subprocess.run(
            ["make", "-s", "grafana-password"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    printed = generate()
    dotenv = tmp_path / ".env"
    written = dict(re.fullmatch(r"(\w+)=([A-Za-z0-9]{16,})", line).groups() for line in dotenv.read_text().splitlines())
    assert set(written) == {"GRAFANA_ADMIN_PASSWORD", "RABBITMQ_PASSWORD", "POSTGRES_PASSWORD"}
    assert len(set(written.values())) == len(written) and "admin" not in written.values()
    assert all(password in printed for password in written.values())
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    assert generate() == "" and all(p in dotenv.read_text() for p in written.values())  # kept, not regenerated
    env.update(
        GRAFANA_ADMIN_PASSWORD="from-the-environment",
        RABBITMQ_PASSWORD="from-the-environment",
        POSTGRES_PASSWORD="from-the-environment",
    )
    dotenv.unlink()
    assert generate() == "" and not dotenv.exists()  # the environment's wins; nothing written
