"""The Grafana dashboards type-check against @grafana/schema of the pinned Grafana.

grafana/typecheck/ pins @grafana/schema at the version of docker-compose.yml's
`grafana/grafana:<tag>` image, and TypeScript. generate.mjs turns each
dashboard into a .ts file whose panels are typed by kind (a timeseries panel's
`options` are the timeseries panel's own Options, its
`fieldConfig.defaults.custom` its FieldConfig, ...), assigned as object
literals, so `tsc --noEmit` rejects an unknown key, a wrong enum value or a
value of the wrong type. The generated files go to grafana/typecheck/build/,
node_modules is installed with `npm ci` when missing or stale (both gitignored).

Needs node and npm (Debian: nodejs npm; .ci/run installs them): without them
the test fails, unless LAB_SKIP_TYPECHECK=1.
"""

import copy
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "grafana" / "dashboards"
TYPECHECK = ROOT / "grafana" / "typecheck"
BUILD = TYPECHECK / "build"
NODE_MODULES = TYPECHECK / "node_modules"
STAMP = NODE_MODULES / ".lab-lock-sha256"  # hash of package.json + package-lock.json at `npm ci`
SCHEMA_PACKAGE = "@grafana/schema"
SKIP_ENV = "LAB_SKIP_TYPECHECK"
DASHBOARD_FILES = sorted(DASHBOARD_DIR.glob("*.json"))
# One tsc diagnostic with --pretty false: `file(line,col): error TSnnnn: message`.
DIAGNOSTIC = re.compile(r"^(?P<file>.+?)\((?P<line>\d+),(?P<col>\d+)\): error (?P<code>TS\d+): (?P<message>.*)$")


def grafana_image_tag() -> str:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    image = compose["services"]["grafana"]["image"]
    name, _, tag = image.partition(":")
    assert name == "grafana/grafana" and tag, f"docker-compose.yml: unexpected grafana image {image!r}"
    return tag


def test_schema_package_pinned_to_the_grafana_image():
    """package.json and package-lock.json pin @grafana/schema at the Grafana image's tag."""
    tag = grafana_image_tag()
    package = json.loads((TYPECHECK / "package.json").read_text())
    deps = {**package.get("dependencies", {}), **package.get("devDependencies", {})}
    assert deps.get(SCHEMA_PACKAGE) == tag, (
        f"grafana/typecheck/package.json pins {SCHEMA_PACKAGE} {deps.get(SCHEMA_PACKAGE)!r}, but "
        f"docker-compose.yml runs grafana/grafana:{tag}: set it to exactly {tag!r} and run "
        "`npm install` in grafana/typecheck to update package-lock.json"
    )
    assert re.fullmatch(r"\d+\.\d+\.\d+", deps.get("typescript", "")), "pin typescript to an exact version"
    lock = json.loads((TYPECHECK / "package-lock.json").read_text())
    locked = lock["packages"].get(f"node_modules/{SCHEMA_PACKAGE}", {}).get("version")
    assert locked == tag, f"grafana/typecheck/package-lock.json locks {SCHEMA_PACKAGE} {locked!r}, not {tag!r}"


def _lock_hash() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((TYPECHECK / name).read_bytes())
    return digest.hexdigest()


@contextmanager
def _build_lock():
    """Serialises `npm ci` between concurrent test runs on one checkout."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def node() -> str:
    """The node binary, with grafana/typecheck/node_modules installed and current."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: dashboard type-check skipped")
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.fail(
            "the dashboard type-check needs node and npm, not found on PATH "
            f"(Debian: apt-get install nodejs npm; .ci/run installs them), or set {SKIP_ENV}=1 to skip it"
        )
    with _build_lock():
        if not STAMP.is_file() or STAMP.read_text().strip() != _lock_hash():
            proc = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=TYPECHECK,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, f"npm ci in grafana/typecheck failed:\n{proc.stdout}\n{proc.stderr}"
            STAMP.write_text(_lock_hash() + "\n")
    installed = json.loads((NODE_MODULES / SCHEMA_PACKAGE / "package.json").read_text())["version"]
    assert installed == grafana_image_tag(), f"node_modules has {SCHEMA_PACKAGE} {installed}, not the Grafana image's"
    return node


class TypeCheck:
    def __init__(self, proc: subprocess.CompletedProcess, out: Path, sources: dict[str, list[str]]):
        self.returncode, self.output, self.out = proc.returncode, proc.stdout + proc.stderr, out
        self.sources = sources  # generated file name -> its lines

    def errors(self) -> list[dict]:
        """Every diagnostic, with the generated source line it points at."""
        found = []
        for line in self.output.splitlines():
            m = DIAGNOSTIC.match(line)
            if m:
                error = m.groupdict()
                lines = self.sources.get(Path(error["file"]).name, [])
                number = int(error["line"])
                error["source"] = lines[number - 1].strip() if 0 < number <= len(lines) else ""
                found.append(error)
        return found

    def report(self) -> str:
        errors = self.errors()
        if not errors:
            return self.output
        return "\n".join(
            f"{Path(e['file']).name}:{e['line']}: {e['code']} {e['message']}\n    at: {e['source']}" for e in errors
        )


def typecheck(node: str, dashboards: list[Path]) -> TypeCheck:
    """Generate the .ts files of these dashboards into a fresh build dir and run tsc on them."""
    out = Path(tempfile.mkdtemp(prefix="run-", dir=BUILD))
    try:
        gen = subprocess.run(
            [node, str(TYPECHECK / "generate.mjs"), "--out", str(out), *map(str, dashboards)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert gen.returncode == 0, f"generate.mjs failed:\n{gen.stdout}\n{gen.stderr}"
        tsc = subprocess.run(
            [
                node,
                str(NODE_MODULES / "typescript" / "bin" / "tsc"),
                "--noEmit",
                "--pretty",
                "false",
                "-p",
                str(out / "tsconfig.json"),
            ],
            cwd=TYPECHECK,
            capture_output=True,
            text=True,
            timeout=120,
        )
        sources = {p.name: p.read_text().splitlines() for p in out.glob("*.ts")}
        return TypeCheck(tsc, out, sources)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_dashboards_type_check(node):
    assert DASHBOARD_FILES, f"no dashboard in {DASHBOARD_DIR}"
    result = typecheck(node, DASHBOARD_FILES)
    assert result.returncode == 0, (
        f"the dashboards do not type-check against {SCHEMA_PACKAGE} {grafana_image_tag()}:\n{result.report()}"
    )


# ---- the check catches what it should: one fault injected into a copy ----------


def _first_timeseries() -> tuple[Path, list[int]]:
    """A dashboard and the index path of its first timeseries panel (rows' panels included)."""
    for path in DASHBOARD_FILES:
        for i, panel in enumerate(json.loads(path.read_text()).get("panels", [])):
            if panel.get("type") == "timeseries":
                return path, [i]
            for j, inner in enumerate(panel.get("panels") or []):
                if inner.get("type") == "timeseries":
                    return path, [i, j]
    pytest.fail("no timeseries panel in grafana/dashboards to inject a fault into")


def _with_fault(tmp_path: Path, mutate) -> Path:
    path, where = _first_timeseries()
    dashboard = json.loads(path.read_text())
    panel = dashboard["panels"][where[0]]
    if len(where) > 1:
        panel = panel["panels"][where[1]]
    mutate(panel)
    copy_path = tmp_path / path.name
    copy_path.write_text(json.dumps(dashboard, indent=2))
    return copy_path


def _set(*keys_and_value):
    *keys, last, value = keys_and_value

    def mutate(panel):
        node = panel
        for key in keys:
            node = node.setdefault(key, {})
        node[last] = copy.deepcopy(value)

    return mutate


FAULTS = {
    # (a) a key the timeseries panel's Options do not have
    "unknown-option-key": (
        _set("options", "labBogusOption", True),
        "TS2353",
        r"'\"labBogusOption\"' does not exist in type",
        '"labBogusOption": true',
    ),
    # (b) enum values that do not exist
    "bad-legend-displayMode": (
        _set("options", "legend", "displayMode", "sideways"),
        "TS2322",
        r"Type '\"sideways\"' is not assignable to type '\"hidden\" \| \"list\" \| \"table\"'",
        '"displayMode": "sideways"',
    ),
    "bad-tooltip-mode": (
        _set("options", "tooltip", "mode", "everything"),
        "TS2322",
        r"Type '\"everything\"' is not assignable to type '\"multi\" \| \"none\" \| \"single\"'",
        '"mode": "everything"',
    ),
    # (c) a number given as a string
    "gridPos-h-string": (
        _set("gridPos", "h", "8"),
        "TS2322",
        r"Type 'string' is not assignable to type 'number'",
        '"h": "8"',
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_injected_fault_fails_the_type_check(node, tmp_path, fault):
    mutate, code, message, source = FAULTS[fault]
    broken = _with_fault(tmp_path, mutate)
    result = typecheck(node, [broken])
    assert result.returncode != 0, f"tsc accepted the fault {fault}:\n{result.output}"
    errors = result.errors()
    assert errors, f"tsc failed without a diagnostic:\n{result.output}"
    hits = [e for e in errors if e["code"] == code and re.search(message, e["message"]) and source in e["source"]]
    assert hits, f"no {code} error naming the fault {fault} ({source}):\n{result.report()}"
