"""grafana/dashboards/*.json are exactly what grafana/generate.py writes.

The dashboards are edited in the generator, never by hand: a JSON file that
differs from the generator's output, or one the generator does not write, fails
here by name (`make dashboards` rewrites them). The generator runs with `-S`
(no site-packages), so it keeps to the standard library.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "grafana" / "generate.py"
DASHBOARDS = ROOT / "grafana" / "dashboards"


def generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", "-S", str(GENERATOR), *args], capture_output=True, text=True, timeout=60
    )


def differing(generated: Path, committed: Path) -> list[str]:
    """The JSON file names whose bytes differ between two directories, or that only one holds."""
    names = {p.name for p in generated.glob("*.json")} | {p.name for p in committed.glob("*.json")}
    return sorted(
        name
        for name in names
        if not ((generated / name).is_file() and (committed / name).is_file())
        or (generated / name).read_bytes() != (committed / name).read_bytes()
    )


def test_committed_dashboards_are_the_generators_output(tmp_path):
    proc = generate("--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p.name for p in tmp_path.glob("*.json")} >= {"api.json", "load.json", "queues.json", "redis.json"}
    differ = differing(tmp_path, DASHBOARDS)
    assert not differ, (
        f"grafana/dashboards/ {differ} differ from grafana/generate.py's output: edit the generator, "
        "then run `make dashboards`"
    )
    check = generate("--check")
    assert check.returncode == 0, check.stderr


def test_a_hand_edited_or_stray_dashboard_is_named(tmp_path):
    generated, edited = tmp_path / "generated", tmp_path / "edited"
    assert generate("--out", str(generated)).returncode == 0
    shutil.copytree(generated, edited)
    assert differing(generated, edited) == []
    assert generate("--check", "--out", str(edited)).returncode == 0

    queues = json.loads((edited / "queues.json").read_text())
    queues["panels"][1]["targets"][0]["expr"] += " * 2"
    (edited / "queues.json").write_text(json.dumps(queues, indent=2) + "\n")
    (edited / "extra.json").write_text("{}\n")
    assert differing(generated, edited) == ["extra.json", "queues.json"]
    check = generate("--check", "--out", str(edited))
    assert check.returncode == 1
    assert "queues.json" in check.stderr and "extra.json" in check.stderr
    assert "api.json" not in check.stderr
