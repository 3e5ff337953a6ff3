"""RQ's pool: a process forked under it dies with its parent (workers/rq_queue.py,
_die_with_parent), as every process of a killed container does. Real
processes: a parent that forks a child, killed with SIGKILL."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The parent prints its child's pid once the child is set up, then waits to be killed.
SCRIPT = """
import os, sys, time
import workers.rq_queue as W
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    if sys.argv[1] == "1":
        W._die_with_parent()
    os.write(write, b"x")
    time.sleep(60)
    os._exit(0)
os.read(read, 1)
print(pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("dies", [True, False])
def test_a_forked_process_dies_with_its_parent(dies):
    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "1" if dies else "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    child = int(parent.stdout.readline())  # type: ignore[union-attr]  # stdout=PIPE
    try:
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Without the call, the child outlives its parent: the check can fail.
        assert _alive(child) is not dies
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
