"""The net holds: one deliberate fault at a time, in a copy of the tree, and the
tests that cover it must fail. `make mutants` (python -m tests.mutants [NAME ...]).

For each fault: copy the working tree (the files git tracks or would track) to
a temporary folder, apply the fault (each replacement must match exactly once,
so a fault that no longer applies is an error, not a pass), run the named
non-compose tests there with -x, and record the first failing test. Prints a
table (fault, the test that caught it, caught yes/no) and exits 1 when a fault
went uncaught (2 when one could not be applied).

The panel fault is caught without a compose stack: the dashboards are
regenerated in the copy and the static check of every panel's metrics
(tests/unit/test_dashboards_static.py) must name the metric that does not exist.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    fault: str  # what the fault does, for the table
    edits: tuple[tuple[str, str, str], ...]  # (file, regex matching once, replacement)
    tests: tuple[str, ...]  # pytest arguments: the tests that must catch it
    after: tuple[str, ...] = ()  # a command run in the copy after the edits (python args)
    env: dict[str, str] = field(default_factory=dict)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "settle-never-written",
        "a task's settle is never written to the ledger",
        (
            (
                "lab/ledger/ledger.py",
                r"return await self\._execution_batch\.submit\(item\) == 1\n(\s+)except REDIS_DOWN:\n\s+if not retry_s:",
                "return True\n\\1except REDIS_DOWN:\n\\1    if not retry_s:",
            ),
        ),
        ("tests/integration/test_ledger.py", "-k", "settle"),
    ),
    Mutant(
        "task-dropped-on-sigterm",
        "taskiq acknowledges a task on receipt and does not wait for it on SIGTERM",
        (
            ("workers/taskiq_queue.py", r"AcknowledgeType\.WHEN_EXECUTED", "AcknowledgeType.WHEN_RECEIVED"),
            ("workers/taskiq_queue.py", r"wait_tasks_timeout=settings\.shutdown_grace_s", "wait_tasks_timeout=0"),
        ),
        ("tests/integration/test_worker_stop.py", "-k", "sigterm and taskiq"),
    ),
    Mutant(
        "200-not-202",
        "the enqueue route answers 200 instead of 202",
        (
            (
                "services/api/routes/tasks.py",
                r"Response\(answer\.encode\(\), status_code=202",
                "Response(answer.encode(), status_code=200",
            ),
        ),
        ("tests/integration/test_api_input.py",),
    ),
    Mutant(
        "queue-missing",
        "the streaq row is missing from lab/queues.py",
        (("lab/queues.py", r"\n    Broker\(\"streaq\",[^\n]*\n", "\n"),),
        ("tests/unit/test_settings.py", "tests/unit/test_api_routes.py"),
    ),
    Mutant(
        "panel-metric-missing",
        "a Queues panel query names lab_task_completed_totl (no such metric)",
        (
            (
                "grafana/generate.py",
                r"per_queue\(\"lab_task_completed_total\"\)",
                'per_queue("lab_task_completed_totl")',
            ),
        ),
        ("tests/unit/test_dashboards_static.py",),
        after=("grafana/generate.py",),
    ),
    Mutant(
        "duplicate-not-counted",
        "a second execution of a settled task is not counted as a duplicate",
        (("lab/ledger/executions.py", r"    redis\.call\('HINCRBY', KEYS\[2\], f \.\. ':duplicates', 1\)\n", ""),),
        ("tests/integration/test_ledger.py", "-k", "duplicate"),
    ),
)


def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def apply(mutant: Mutant, tree: Path) -> None:
    for name, pattern, replacement in mutant.edits:
        path = tree / name
        text = path.read_text()
        new, count = re.subn(pattern, replacement, text)
        if count != 1:
            raise ValueError(f"{mutant.name}: {pattern!r} matches {count} times in {name}, not once")
        path.write_text(new)
    if mutant.after:
        subprocess.run([sys.executable, *mutant.after], cwd=tree, check=True, capture_output=True)


def first_failure(output: str) -> str | None:
    m = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
    return m.group(1) if m else None


def run(mutant: Mutant, keep: bool) -> tuple[str, bool, float, str]:
    """(first failing test or why none, caught, seconds, pytest's output tail)."""
    tree = Path(tempfile.mkdtemp(prefix=f"lab-mutant-{mutant.name}-"))
    started = time.monotonic()
    try:
        copy_tree(tree)
        apply(mutant, tree)
        env = {**os.environ, "PYTHONPATH": str(tree), "LAB_TEST_LOGS": str(tree / ".test-logs"), **mutant.env}
        env.pop("PYTEST_XDIST_WORKER", None)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", *mutant.tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        out = proc.stdout + proc.stderr
        failing = first_failure(out)
        caught = proc.returncode != 0 and failing is not None
        return failing or f"none (pytest exit {proc.returncode})", caught, time.monotonic() - started, out[-3000:]
    finally:
        if not keep:
            shutil.rmtree(tree, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all): " + ", ".join(m.name for m in MUTANTS))
    parser.add_argument("--keep", action="store_true", help="keep each mutated copy (its path is printed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's output for each mutant")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]

    rows, status = [], 0
    for mutant in chosen:
        print(f"== {mutant.name}: {mutant.fault}", flush=True)
        try:
            failing, caught, seconds, out = run(mutant, args.keep)
        except (ValueError, subprocess.CalledProcessError) as exc:
            rows.append((mutant, f"could not apply: {exc}", "ERROR", 0.0))
            status = max(status, 2)
            continue
        if args.verbose or not caught:
            print(out)
        rows.append((mutant, failing, "yes" if caught else "NO", seconds))
        if not caught:
            status = max(status, 1)

    print("\n| fault | caught by (first failing test) | caught | s |")
    print("|---|---|---|---|")
    for mutant, failing, caught, seconds in rows:
        print(f"| {mutant.fault} | `{failing}` | {caught} | {seconds:.0f} |")
    return status


if __name__ == "__main__":
    sys.exit(main())
