"""labctl's size, held: the lines the package may hold in all (every .py under
labctl/, comments and the commands' help text included), no module over
MODULE_LINES and no function over FUNCTION_LINES. A change that needs more
lines raises LABCTL_LINES and says in its commit what for; a module or a
function past its limit is split where it does two things."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABCTL_LINES = 14_515
MODULE_LINES = 500
FUNCTION_LINES = 74


def labctl_files() -> list[Path]:
    return sorted((ROOT / "labctl").rglob("*.py"))


def oversized(source: str, name: str) -> list[str]:
    """The module, if it is over MODULE_LINES, and each function over FUNCTION_LINES."""
    found = []
    if (lines := len(source.splitlines())) > MODULE_LINES:
        found.append(f"{name}: {lines} lines")
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_labctl_stays_within_its_line_budget():
    files = labctl_files()
    assert len(files) > 100, "labctl's modules were not found"
    total = sum(len(f.read_text().splitlines()) for f in files)
    assert total <= LABCTL_LINES, f"labctl holds {total} lines, over its budget of {LABCTL_LINES}"


def test_no_labctl_module_or_function_outgrows_its_limit():
    found = [o for f in labctl_files() for o in oversized(f.read_text(), str(f.relative_to(ROOT)))]
    assert not found, "over the limits:\n" + "\n".join(found)


def _function(lines: int) -> str:
    return "def f():\n" + "    x = 1\n" * (lines - 1)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_function(FUNCTION_LINES), []),
        (_function(FUNCTION_LINES + 1), [f"m.py:1 f: {FUNCTION_LINES + 1} lines"]),
        (
            "class C:\n    " + _function(FUNCTION_LINES + 1).replace("\n", "\n    "),
            [f"m.py:2 f: {FUNCTION_LINES + 1} lines"],
        ),
        ("x = 1\n" * (MODULE_LINES + 1), [f"m.py: {MODULE_LINES + 1} lines"]),
    ],
)
def test_the_size_check_names_each_oversized_module_and_function(source, expected):
    assert oversized(source, "m.py") == expected
