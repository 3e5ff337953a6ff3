"""Every PromQL expression of the lab parses under the pinned Prometheus's own parser.

prometheus/promql-check/ is a small Go program built against the
github.com/prometheus/prometheus module of the version docker-compose.yml's
`prom/prometheus:v3.X.Y` image runs (Prometheus 3.X.Y is the Go module
v0.3XX.Y: 3.13.3 is v0.313.3). It reads {"name", "expr"} objects and prints
the parser's error for each expression that fails. The expressions: every
dashboard target's `expr`, with the Grafana variables replaced the way Grafana
would for Prometheus (tests/compose/panels.py: a custom variable set to All
becomes its allValue, $__rate_interval 1m, $__range 600s, ...), and every rule
`expr` of prometheus/rules/*.yml. The server's parser-related
--enable-feature flags from docker-compose.yml are passed on.

The binary is built once into prometheus/promql-check/bin/ (gitignored) and
rebuilt when go.mod, go.sum or main.go change. Needs go (Debian: golang-go;
.ci/run installs it): without it the test fails, unless LAB_SKIP_PROMQL_CHECK=1.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.compose import panels as panels_mod  # Grafana's variable substitution, reused

ROOT = Path(__file__).resolve().parents[2]
CHECK_DIR = ROOT / "prometheus" / "promql-check"
BIN_DIR = CHECK_DIR / "bin"
BINARY = BIN_DIR / "promql-check"
STAMP = BIN_DIR / ".source-sha256"  # hash of the sources and flags the binary was built from
SOURCES = ("go.mod", "go.sum", "main.go")
# A cold build compiles a good part of the standard library (the parser pulls
# in client_golang, hence net/http): without cgo and without optimisation
# (-N -l: the parser's speed does not matter here) it costs about a quarter less.
BUILD_FLAGS = ("-mod=readonly", "-buildvcs=false", "-trimpath", "-gcflags=all=-N -l", "-ldflags=-s -w")
DASHBOARD_DIR = ROOT / "grafana" / "dashboards"
RULES_DIR = ROOT / "prometheus" / "rules"
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
SKIP_ENV = "LAB_SKIP_PROMQL_CHECK"
# Where Go lives when it is installed from go.dev's tarball and not on PATH.
GO_FALLBACK = Path("/usr/local/go/bin/go")


def prometheus_service() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["prometheus"]


def prometheus_version() -> tuple[int, int, int]:
    image = prometheus_service()["image"]
    m = re.fullmatch(r"prom/prometheus:v(\d+)\.(\d+)\.(\d+)", image)
    assert m, f"docker-compose.yml: unexpected prometheus image {image!r}"
    return tuple(int(x) for x in m.groups())


def module_version(major: int, minor: int, patch: int) -> str:
    """The Go module version of a Prometheus release: 3.13.3 -> v0.313.3."""
    assert major == 3, f"the v0.3MM.P module versions are Prometheus 3.x's, not {major}.x's"
    return f"v0.{major * 100 + minor}.{patch}"


def enabled_features() -> list[str]:
    """The server's --enable-feature values, from its compose command."""
    command = prometheus_service().get("command") or []
    if isinstance(command, str):
        command = command.split()
    features = []
    for arg in command:
        if arg.startswith("--enable-feature="):
            features += [f for f in arg.split("=", 1)[1].split(",") if f]
    return features


def test_promql_check_pins_the_prometheus_image_version():
    expected = module_version(*prometheus_version())
    go_mod = (CHECK_DIR / "go.mod").read_text()
    pinned = re.search(rf"^\s*(?:require\s+)?{re.escape(PROMETHEUS_MODULE)}\s+(\S+)", go_mod, re.M)
    assert pinned, f"prometheus/promql-check/go.mod does not require {PROMETHEUS_MODULE}"
    assert pinned.group(1) == expected, (
        f"prometheus/promql-check/go.mod requires {PROMETHEUS_MODULE} {pinned.group(1)}, but docker-compose.yml "
        f"runs Prometheus {'.'.join(map(str, prometheus_version()))}, which is {expected}: "
        f"run `go get {PROMETHEUS_MODULE}@{expected} && go mod tidy` there"
    )


def _source_hash() -> str:
    digest = hashlib.sha256(" ".join(BUILD_FLAGS).encode())
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (CHECK_DIR / name).read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def promql_check() -> Path:
    """prometheus/promql-check/bin/promql-check, built if missing or stale."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: PromQL parse check skipped")
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.is_file() else None)
    if not go:
        pytest.fail(
            "the PromQL parse check needs go, not found on PATH nor at /usr/local/go/bin "
            f"(Debian: apt-get install golang-go; .ci/run installs it), or set {SKIP_ENV}=1 to skip it"
        )
    BIN_DIR.mkdir(exist_ok=True)
    with open(BIN_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time across concurrent test runs
        if not BINARY.is_file() or not STAMP.is_file() or STAMP.read_text().strip() != _source_hash():
            # No cgo (see BUILD_FLAGS). GOTOOLCHAIN=auto unless set: a go older
            # than go.mod's `go` line (but 1.21+) fetches that one.
            env = {**os.environ, "CGO_ENABLED": "0"}
            env.setdefault("GOTOOLCHAIN", "auto")
            proc = subprocess.run(
                [go, "build", *BUILD_FLAGS, "-o", str(BINARY), "."],
                cwd=CHECK_DIR,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, f"building prometheus/promql-check failed:\n{proc.stdout}\n{proc.stderr}"
            STAMP.write_text(_source_hash() + "\n")
    return BINARY


def run_check(binary: Path, exprs: list[dict]) -> subprocess.CompletedProcess:
    args = [str(binary)] + [f"-enable-feature={f}" for f in enabled_features()]
    return subprocess.run(args, input=json.dumps(exprs), capture_output=True, text=True, timeout=60)


def dashboard_exprs() -> list[dict]:
    """Every dashboard target's expr, variables substituted as Grafana would."""
    exprs = []
    for path, dashboard in panels_mod.load_dashboards(DASHBOARD_DIR):
        values = {**panels_mod.builtin_values(), **panels_mod.variable_values(dashboard)}
        for panel in panels_mod.iter_panels(dashboard):
            for target in panel.get("targets", []):
                if not target.get("expr"):
                    continue
                name = f"{path.name} / {panel.get('title', panel.get('id'))} / {target.get('refId', '?')}"
                try:
                    expr = panels_mod.substitute(target["expr"], values)
                except KeyError as err:
                    pytest.fail(f"{name}: variable {err} is neither a dashboard variable nor a Grafana built-in")
                exprs.append({"name": name, "expr": expr})
    return exprs


def rule_exprs() -> list[dict]:
    exprs = []
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in (yaml.safe_load(path.read_text()) or {}).get("groups", []):
            for rule in group.get("rules", []):
                name = rule.get("record") or rule.get("alert")
                exprs.append(
                    {"name": f"{path.relative_to(ROOT)} / {group['name']} / {name}", "expr": str(rule["expr"])}
                )
    return exprs


def test_dashboard_and_rule_exprs_parse(promql_check):
    exprs = dashboard_exprs() + rule_exprs()
    assert len(exprs) > 10, "expected the dashboards' and rules' expressions"
    proc = run_check(promql_check, exprs)
    assert proc.returncode == 0, (
        f"PromQL that Prometheus {'.'.join(map(str, prometheus_version()))} rejects:\n{proc.stdout}{proc.stderr}"
    )
    assert f"{len(exprs)} expressions, 0 failed" in proc.stdout


def test_broken_expression_fails_and_is_named(promql_check):
    good = dashboard_exprs()[0]
    broken = {"name": "injected / unbalanced by()", "expr": "sum by (queue (rate(lab_enqueued_total[1m]))"}
    proc = run_check(promql_check, [good, broken])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'FAIL injected / unbalanced by(): 1:15: parse error: unexpected "(" in grouping opts' in proc.stdout, (
        proc.stdout
    )
    assert f"FAIL {good['name']}" not in proc.stdout
    assert "2 expressions, 1 failed" in proc.stdout
