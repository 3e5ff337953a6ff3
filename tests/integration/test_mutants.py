"""The mutation check's runs (tests/mutants.py) with real pytest processes: it
refuses to judge when the clean tree's tests cannot run (a redis-server that
cannot start first on the PATH), reads a real JUnit report as a verdict, and
stops a run that outlives its time, with what it started, and calls it not
caught. The verdicts on written reports: tests/unit/test_mutants.py."""

import os
import subprocess
import sys
import time
from pathlib import Path

from tests import mutants as M

ROOT = Path(__file__).resolve().parents[2]


def test_the_check_refuses_to_judge_when_the_clean_tree_cannot_run(tmp_path):
    """Every test errors in its setup: no fault may count as caught."""
    broken = tmp_path / "redis-server"
    broken.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 1\n")
    broken.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.mutants", "settle-never-written", "duplicate-not-counted"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "REFUSING TO JUDGE" in proc.stdout, proc.stdout
    assert "test_ledger_settles_once_and_counts_duplicates errored" in proc.stdout, proc.stdout
    assert "redis-server on" in proc.stdout and "exited with 1" in proc.stdout, proc.stdout
    assert "| caught |" not in proc.stdout and "== settle-never-written" not in proc.stdout, proc.stdout


def write_tests(tree: Path, text: str) -> str:
    tree.mkdir(exist_ok=True)
    (tree / "test_sample.py").write_text(text)
    return "test_sample.py"


def test_a_real_report_tells_a_failure_from_an_error_in_setup(tmp_path):
    failing = write_tests(
        tmp_path / "failing", "def test_ok():\n    pass\n\ndef test_lost():\n    assert 3 == 0, 'lost'\n"
    )
    outcome = M.run_tests(tmp_path / "failing", [failing], {}, timeout_s=120)
    assert M.verdict(outcome) == (M.CAUGHT, "test_sample.py::test_lost"), outcome.output
    erroring = write_tests(
        tmp_path / "erroring",
        "import pytest\n\n@pytest.fixture\ndef server():\n    raise RuntimeError('port in use')\n\n"
        "def test_lost(server):\n    assert False\n",
    )
    outcome = M.run_tests(tmp_path / "erroring", [erroring], {}, timeout_s=120)
    state, why = M.verdict(outcome)
    assert state == M.NO_VERDICT and "test_sample.py::test_lost errored" in why and "port in use" in why, why


def test_a_run_past_its_time_is_stopped_with_what_it_started_and_not_caught(tmp_path):
    tree = tmp_path / "slow"
    pid_file = tree / "child.pid"
    sample = write_tests(
        tree,
        "import subprocess, time\n\n"
        "def test_hangs():\n"
        "    child = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    time.sleep(600)\n",
    )
    # A run of `timeout_s` must reach the test's body for the stop to be tried
    # on what the test started: a run stopped while pytest was still starting
    # (a busy machine) is stopped all the same, and tried again with longer.
    for timeout_s in (20, 60, 180):
        started = time.monotonic()
        outcome = M.run_tests(tree, [sample], {}, timeout_s)
        assert time.monotonic() - started < timeout_s + M.INTERRUPT_GRACE_S + 30  # 30: only a hang
        assert M.verdict(outcome) == (M.NOT_CAUGHT, f"none: not caught in {timeout_s} s (stopped)")
        if pid_file.exists():
            break
    assert pid_file.exists(), f"the test never began: {outcome.output}"
    # A process of its own session, left by the interrupted test, is gone too (a zombie at most).
    assert not M.alive(int(pid_file.read_text()))
