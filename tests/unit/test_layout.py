"""The code's floors stand on the ones below: lab/ (the shared core) <
workers/ (the queue adapters) < services/ (the processes) < scripts/ (the
commands). A module imports from its own floor or a lower one, never from a
higher one; locust/ (the locustfiles, mounted into an image that holds lab/
only) imports lab/ alone; tests/ may import anything, and scripts/ may use the
tests' harness of real processes (scripts/drain_rate.py). The imports are read
from the source with `ast`, function-level ones included, so nothing is run."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOORS = {"lab": 0, "workers": 1, "services": 2, "scripts": 3}
OURS = {*FLOORS, "tests"}  # `locust` is the library's name; locust/ is no package
LOCUST_MAY_IMPORT = {"lab"}
SKIP_DIRS = {".venv", "node_modules", ".git", "results"}


def imported_packages(source: str, path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import of ours in `source` (the file at
    `path`, relative to the repository), relative imports resolved."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from .x import y / from .. import x: from the file's package up
                base = list(path.parent.parts)[: len(path.parent.parts) - (node.level - 1)]
                if node.module:
                    names = [".".join([*base, node.module])]
                else:
                    names = [".".join([*base, alias.name]) for alias in node.names]
            else:
                names = [node.module or ""]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in OURS]
    return found


def violations(source: str, path: Path) -> list[str]:
    """Every import in `source` that runs against the floors, as `path:line imports name`."""
    top = path.parts[0]
    bad = []
    for line, name in imported_packages(source, path):
        target = name.split(".")[0]
        if top == "tests":
            continue
        if top == "locust":
            ok = target in LOCUST_MAY_IMPORT
        elif target == "tests":
            ok = top == "scripts"
        elif top in FLOORS:
            ok = FLOORS[target] <= FLOORS[top]
        else:  # any other tooling (a generator beside its config, say) stands on top of everything
            ok = True
        if not ok:
            bad.append(f"{path}:{line} imports {name}")
    return bad


def python_files() -> list[Path]:
    return sorted(p.relative_to(ROOT) for p in ROOT.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(ROOT).parts))


def test_no_import_runs_from_a_lower_floor_to_a_higher_one():
    files = python_files()
    assert {f.parts[0] for f in files} >= {*FLOORS, "locust", "tests"}, "the floors were not found"
    bad = [v for f in files for v in violations((ROOT / f).read_text(), f)]
    assert not bad, "imports against the floors (lab < workers < services < scripts):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        (
            "lab/protocol.py",
            "from workers.registry import BROKER_NAMES\n",
            ["lab/protocol.py:1 imports workers.registry"],
        ),
        ("lab/x.py", "def f():\n    import services.api.app\n", ["lab/x.py:2 imports services.api.app"]),
        (
            "workers/arq_queue.py",
            "from services.bare import queues\n",
            ["workers/arq_queue.py:1 imports services.bare"],
        ),
        ("services/bare/queues.py", "from scripts import bench\n", ["services/bare/queues.py:1 imports scripts"]),
        ("services/api/app.py", "from ..probe import app\n", []),
        ("services/api/routes.py", "from . import deps\n", []),
        ("workers/x.py", "from .. import services\n", ["workers/x.py:1 imports services"]),
        ("workers/a/x.py", "from ...services import probe\n", ["workers/a/x.py:1 imports services"]),
        ("locust/locustfile.py", "from lab.cgroup import read_cgroup\nimport locust.runners\n", []),
        (
            "locust/load_params.py",
            "from workers.registry import BROKERS\n",
            ["locust/load_params.py:1 imports workers.registry"],
        ),
        ("services/probe.py", "from tests.lab import RedisServer\n", ["services/probe.py:1 imports tests.lab"]),
        ("scripts/drain_rate.py", "from tests.lab import RedisServer\nfrom services.bare.queues import BARE\n", []),
        ("tests/test_x.py", "from scripts import load\n", []),
        ("services/queue_monitor.py", "from lab.queues import adapter\nfrom workers import arq_queue\n", []),
    ],
)
def test_the_floor_check_names_each_upward_import(path, source, expected):
    assert violations(source, Path(path)) == expected
