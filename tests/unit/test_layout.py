"""The code's floors stand on the ones below: lab/ (the shared core) <
workers/ (the queue adapters) < services/ (the processes) < labctl/ (the
experiments' command line). A module imports from its own floor or a lower one,
never from a higher one; locust/ (the locustfiles, mounted into an image that
holds lab/ only) imports lab/ alone; tests/ may import anything, and nothing
imports tests/.

labctl/ has floors of its own (LABCTL_FLOORS): the settings and errors, then the
platform (the only code that runs the docker CLI) and the records, then the
clients and the rendering, then the load run, then the experiments and tools,
then the commands and the entry point. No experiment imports another. No two
modules import each other, not even for types alone.

The imports are read from the source with `ast`, function-level ones included,
so nothing is run."""

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOORS = {"lab": 0, "workers": 1, "services": 2, "labctl": 3}
# labctl/'s own floors, by the first name under labctl/.
LABCTL_FLOORS = {
    "__init__": 0,
    "config": 0,
    "errors": 0,
    "polling": 0,
    "queues": 0,
    "stats": 0,
    "platform": 1,
    "records": 1,
    "clients": 2,
    "render": 2,
    "load_run": 3,
    "experiments": 4,
    "views": 4,
    "tools": 4,
    "commands": 5,
    "app": 6,
    "__main__": 6,
}
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
            ok = False
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
    assert not bad, "imports against the floors (lab < workers < services < labctl):\n" + "\n".join(bad)


def labctl_part(parts: tuple[str, ...]) -> str:
    """The floor name of a labctl module: its first name under labctl/ (a file's without .py)."""
    return parts[1].removesuffix(".py") if len(parts) > 1 else "__init__"


def imported_names(source: str, path: Path, tops: frozenset[str] = frozenset({"labctl"})) -> list[tuple[int, str]]:
    """(line, dotted name) of every name under `tops` that `source` imports: `from a.b import c` is a.b.c."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(path.parent.parts)[: len(path.parent.parts) - (node.level - 1)] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in tops]
    return found


def labctl_violations(source: str, path: Path) -> list[str]:
    """Every import in a labctl/ module against labctl's own floors, or from one experiment into another."""
    if path.parts[0] != "labctl":
        return []
    part = labctl_part(path.parts)
    bad = []
    for line, name in imported_names(source, path):
        dotted = name.split(".")
        if dotted[0] != "labctl":
            continue
        target = dotted[1] if len(dotted) > 1 else "__init__"
        if LABCTL_FLOORS[target] > LABCTL_FLOORS[part]:
            bad.append(f"{path}:{line} imports {name} (floor {target} above {part})")
        elif part == "experiments" == target and len(path.parts) > 2 and len(dotted) > 2:
            mine = path.parts[2].removesuffix(".py")
            if dotted[2] != mine:
                bad.append(f"{path}:{line} imports {name} (another experiment)")
    return bad


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or path.is_dir()


def module_graph(tops: frozenset[str] = frozenset({"labctl"})) -> dict[str, set[str]]:
    """The imports between the modules under `tops`, module by module (dotted names, a
    package's modules by their own), those under TYPE_CHECKING and in functions included."""
    graph: dict[str, set[str]] = {}
    for f in python_files():
        if f.parts[0] not in tops:
            continue
        module = ".".join(f.with_suffix("").parts).removesuffix(".__init__")
        names = {n for _, n in imported_names((ROOT / f).read_text(), f, tops)}
        graph[module] = {n if _is_module(n) else n.rsplit(".", 1)[0] for n in names} - {module}
    return graph


def labctl_graph() -> dict[str, set[str]]:
    """labctl's internal imports, module by module."""
    return module_graph()


def test_no_module_of_ours_imports_one_that_imports_it_back():
    """A cycle, even one closed by an import for types alone, puts two modules on one
    floor that each need the other: the one below should not know the one above."""
    graph = module_graph(frozenset(FLOORS))
    assert len(graph) > 100 and "labctl.load_run.steps" in graph["labctl.experiments.load"], "no graph"
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as cycle:
        pytest.fail("modules that import each other: " + " -> ".join(cycle.args[1]))


def test_labctl_stands_on_its_own_floors_and_no_experiment_imports_another():
    files = [f for f in python_files() if f.parts[0] == "labctl"]
    assert {labctl_part(f.parts) for f in files} == set(LABCTL_FLOORS), "a labctl/ name without a floor"
    bad = [v for f in files for v in labctl_violations((ROOT / f).read_text(), f)]
    assert not bad, "imports against labctl's floors:\n" + "\n".join(bad)
    experiments = {m for m in labctl_graph() if m.startswith("labctl.experiments.")}
    assert len({m.split(".")[2] for m in experiments}) >= 7, "the experiments were not found"


def runs_processes(source: str, path: Path) -> list[str]:
    """Calls that start a process (subprocess.run/Popen/call/check_*, os.system) in `source`."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            if (node.func.value.id, node.func.attr) in {
                ("subprocess", "run"),
                ("subprocess", "Popen"),
                ("subprocess", "call"),
                ("subprocess", "check_call"),
                ("subprocess", "check_output"),
                ("os", "system"),
            }:
                found.append(f"{path}:{node.lineno} {node.func.value.id}.{node.func.attr}")
    return found


def test_only_labctl_platform_starts_processes():
    """The docker CLI (and any other program) is run by labctl/platform alone: one
    runner with timeouts and checks, not a private docker() helper per experiment."""
    files = [f for f in python_files() if f.parts[0] == "labctl" and f.parts[1] != "platform"]
    bad = [v for f in files for v in runs_processes((ROOT / f).read_text(), f)]
    assert not bad, "processes started outside labctl/platform:\n" + "\n".join(bad)


# What the docker CLI and compose take first: a call handing one of these to a docker or
# compose runner builds a docker argument list.
DOCKER_VERBS = {
    "build", "cp", "events", "exec", "image", "inspect", "kill", "logs", "network", "node", "pause", "port",
    "ps", "restart", "rm", "run", "scale", "service", "stack", "start", "stats", "stop", "swarm", "unpause",
    "up", "update", "volume", "wait", "compose", "docker", "down", "config", "info", "container",
}  # fmt: skip
# Platform runners the rest of labctl might call with such a list (labctl/platform/docker.py).
RUNNERS = {"run", "docker", "popen"}


def docker_argument_lists(source: str, path: Path) -> list[str]:
    """Docker or compose argument lists in `source`: a list or tuple that starts with "docker",
    a platform runner (`docker.run|docker|popen`) called directly, and a docker or compose
    object called with a verb as its first argument (`compose("up", ...)`, `c("stop", q)`)."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.List | ast.Tuple) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value == "docker":
                found.append(f'{path}:{node.lineno} ["docker", ...]')
        if not isinstance(node, ast.Call):
            continue
        callee = ast.unparse(node.func)
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in RUNNERS
            and callee.split(".")[0] in {"docker", "cli"}
        ):
            found.append(f"{path}:{node.lineno} {callee}(...)")
            continue
        first_arg = node.args[0] if node.args else None
        verb = first_arg.value if isinstance(first_arg, ast.Constant) and isinstance(first_arg.value, str) else None
        named = any(word in callee.lower() for word in ("docker", "compose", "cli")) or callee == "c"
        if verb in DOCKER_VERBS and named:
            found.append(f"{path}:{node.lineno} {callee}({verb!r}, ...)")
    return found


def test_docker_argument_lists_are_built_in_labctl_platform_alone():
    """The rest of labctl reaches the engine through named platform operations
    (platform/docker.py, compose.py, swarm.py, ...), never with an argument list of its own."""
    files = [f for f in python_files() if f.parts[0] == "labctl" and f.parts[1] != "platform"]
    bad = [v for f in files for v in docker_argument_lists((ROOT / f).read_text(), f)]
    assert not bad, "docker argument lists outside labctl/platform:\n" + "\n".join(bad)
    inside = [f for f in python_files() if f.parts[:2] == ("labctl", "platform")]
    assert sum(len(docker_argument_lists((ROOT / f).read_text(), f)) for f in inside) > 20, "the check finds none"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('docker.docker("inspect", cid)\n', ["x.py:1 docker.docker(...)"]),
        ('cli.popen("events")\n', ["x.py:1 cli.popen(...)"]),
        ('self.compose("restart", "api")\n', ["x.py:1 self.compose('restart', ...)"]),
        ('Compose(profile="load")("build", "locust-master")\n', ["x.py:1 Compose(profile='load')('build', ...)"]),
        ('c("stop", queue)\n', ["x.py:1 c('stop', ...)"]),
        ('run(["docker", "build", "."])\n', ['x.py:1 ["docker", ...]']),
        ('docker.inspect(cid)\nself.compose.stop(queue)\nparser.add_argument("run")\n', []),
    ],
)
def test_the_docker_list_check_names_each(source, expected):
    assert docker_argument_lists(source, Path("x.py")) == expected


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        (
            "labctl/records/run.py",
            "from labctl.render import table\n",
            ["labctl/records/run.py:1 imports labctl.render.table (floor render above records)"],
        ),
        (
            "labctl/experiments/compare.py",
            "from labctl.experiments.load import load\n",
            ["labctl/experiments/compare.py:1 imports labctl.experiments.load.load (another experiment)"],
        ),
        ("labctl/experiments/compare.py", "from labctl.load_run.steps import run_load\n", []),
        ("labctl/experiments/bench/runner.py", "from .paired_windows import Side\n", []),
        (
            "labctl/experiments/bench/runner.py",
            "from labctl.experiments import chaos\n",
            ["labctl/experiments/bench/runner.py:1 imports labctl.experiments.chaos (another experiment)"],
        ),
        (
            "labctl/platform/compose.py",
            "def f():\n    from labctl.clients import api\n",
            ["labctl/platform/compose.py:2 imports labctl.clients.api (floor clients above platform)"],
        ),
        ("labctl/commands/load.py", "from labctl.experiments import load\n", []),
    ],
)
def test_labctls_floor_check_names_each_upward_import(path, source, expected):
    assert labctl_violations(source, Path(path)) == expected


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
        ("services/bare/queues.py", "from labctl import queues\n", ["services/bare/queues.py:1 imports labctl"]),
        ("services/api/app.py", "from ..probe import app\n", []),
        ("services/api/routes.py", "from . import deps\n", []),
        ("workers/x.py", "from .. import services\n", ["workers/x.py:1 imports services"]),
        ("workers/a/x.py", "from ...services import probe\n", ["workers/a/x.py:1 imports services"]),
        ("locust/locustfile.py", "from lab.cgroup import read_cgroup\nimport locust.runners\n", []),
        (
            "lab/load_params.py",
            "from workers.registry import BROKERS\n",
            ["lab/load_params.py:1 imports workers.registry"],
        ),
        ("services/probe.py", "from tests.lab import RedisServer\n", ["services/probe.py:1 imports tests.lab"]),
        ("labctl/tools/x.py", "from services.bare.queues import BARE\n", []),
        ("labctl/tools/x.py", "from tests.lab import RedisServer\n", ["labctl/tools/x.py:1 imports tests.lab"]),
        (
            "labctl/experiments/load.py",
            "from tests.lab import RedisServer\n",
            ["labctl/experiments/load.py:1 imports tests.lab"],
        ),
        ("tests/test_x.py", "from labctl import app\n", []),
        ("services/queue_monitor.py", "from lab.queues import adapter\nfrom workers import arq_queue\n", []),
    ],
)
def test_the_floor_check_names_each_upward_import(path, source, expected):
    assert violations(source, Path(path)) == expected
