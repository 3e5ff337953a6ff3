"""Every suite runs in a random order (pytest-randomly), so a test that needs
another to run first fails somewhere instead of passing by its place in the
file. pytest's header prints the seed that replays an order
(`make test args="-p randomly --randomly-seed=N"`); only the mutant runs switch
the shuffle off, each for the one test it judges (tests/mutants.py)."""

import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_suite_runs_in_a_random_order():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev = pyproject["dependency-groups"]["dev"]
    assert any(re.match(r"pytest-randomly\b", dep) for dep in dev), dev
    assert importlib.metadata.version("pytest-randomly")  # installed, so pytest loads it
    # Nothing the suites are started with turns it off.
    assert "no:randomly" not in pyproject["tool"]["pytest"]["ini_options"]["addopts"]
    for name in ("Makefile", ".ci/run", "tests/conftest.py", "tests/compose/conftest.py"):
        assert "no:randomly" not in (ROOT / name).read_text(), name
