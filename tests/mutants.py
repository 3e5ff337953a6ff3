"""The net holds: one deliberate fault at a time, in a copy of the tree, and the
tests that cover it must fail. `make mutants` (python -m tests.mutants [NAME ...]).

First every fault is checked to still apply (each replacement must match
exactly once: a fault that no longer applies is an error, not a pass). Then the
clean tree is copied and each distinct test selection runs there once: if one
fails, errors or runs nothing, the check refuses to judge (exit 2, naming the
tests), since a selection that fails anyway would "catch" every fault. Then,
for each fault: copy the tree, apply it, run its selection with -x and read
pytest's JUnit XML.

  caught          a test failed in its call: an assertion or an exception in
                  the test's own body
  NOT caught      every test passed, or the run outlived its time (it is
                  stopped, and the next fault runs)
  could not judge a test errored in its setup or teardown (no redis-server, a
                  port in use, a process that did not start), collection
                  failed, or nothing ran: no verdict either way

Prints a table (fault, the test that caught it, the verdict, seconds) and exits
0 when every fault was caught, 1 when one was not, 2 when one could not be
applied or judged or the clean tree's tests fail.

The dashboard faults are caught without a compose stack: the dashboards are
regenerated in the copy and the static checks (tests/unit/test_dashboards_static.py)
must name the metric or the label that does not exist.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300.0  # per run of a selection, unless a mutant says otherwise
INTERRUPT_GRACE_S = 60.0  # after a timeout: SIGINT lets pytest stop the processes its fixtures started


@dataclass(frozen=True)
class Mutant:
    name: str
    fault: str  # what the fault does, for the table
    edits: tuple[tuple[str, str, str], ...]  # (file, regex matching once, replacement)
    tests: tuple[str, ...]  # pytest arguments: the tests that must catch it
    after: tuple[str, ...] = ()  # a command run in the copy after the edits (python args)
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = TIMEOUT_S

    @property
    def selection(self) -> tuple:
        return self.tests, tuple(sorted(self.env.items()))


SIGKILL_TEST = "tests/integration/test_worker_stop.py::test_sigkill_mid_batch_loses_nothing"
API_INPUT = ("tests/integration/test_api_input.py",)
OUTAGE = ("tests/integration/test_outage.py",)
DASHBOARDS_STATIC = ("tests/unit/test_dashboards_static.py",)
LOAD_TOOLING = "tests/integration/test_load_tooling.py"

MUTANTS: tuple[Mutant, ...] = (
    # -- The ledger: every task accounted for ------------------------------------------------
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
        "duplicate-not-counted",
        "a second execution of a settled task is not counted as a duplicate",
        (("lab/ledger/executions.py", r"    redis\.call\('HINCRBY', KEYS\[2\], f \.\. ':duplicates', 1\)\n", ""),),
        ("tests/integration/test_ledger.py", "-k", "duplicate"),
    ),
    # -- A stopped or killed worker loses nothing -------------------------------------------
    Mutant(
        "task-dropped-on-sigterm",
        "taskiq acknowledges a task on receipt and does not wait for it on SIGTERM",
        (
            ("workers/taskiq_queue.py", r"AcknowledgeType\.WHEN_EXECUTED", "AcknowledgeType.WHEN_RECEIVED"),
            ("workers/taskiq_queue.py", r"wait_tasks_timeout=settings\.shutdown_grace_s", "wait_tasks_timeout=0"),
        ),
        ("tests/integration/test_worker_stop.py::test_sigterm_mid_batch_loses_nothing[taskiq]",),
    ),
    Mutant(
        "celery-acks-on-receipt",
        "Celery acknowledges a task as it starts it (acks_late off): a killed worker's running tasks are lost",
        (("workers/celery_queue.py", r"task_acks_late=True,", "task_acks_late=False,"),),
        (f"{SIGKILL_TEST}[celery]",),
    ),
    Mutant(
        "faststream-acks-first",
        "FastStream acknowledges a stream entry on receipt (AckPolicy.ACK_FIRST): a killed worker's are lost",
        (
            (
                "workers/faststream_queue.py",
                r"ack_policy=AckPolicy\.ACK\)\(handle\)\n(\s+)broker\.subscriber\(stream=reclaim",
                "ack_policy=AckPolicy.ACK_FIRST)(handle)\n\\1broker.subscriber(stream=reclaim",
            ),
        ),
        (f"{SIGKILL_TEST}[faststream]",),
    ),
    # -- The API: 202 once the broker has it, a clear 4xx that enqueues nothing, a fast 503 --
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
        API_INPUT,
    ),
    Mutant(
        "unknown-field-accepted",
        "the task body takes fields it does not know (extra='ignore'): a mistyped request is enqueued",
        (
            (
                "services/api/routes/tasks.py",
                r'model_config = ConfigDict\(extra="forbid"\)',
                'model_config = ConfigDict(extra="ignore")',
            ),
        ),
        API_INPUT,
    ),
    Mutant(
        "body-size-unchecked",
        "the API reads a request body of any size (no 413)",
        (
            (
                "services/api/app.py",
                r"\n    app\.add_middleware\(errors\.BodySizeLimit, limit=settings\.max_body_bytes\)",
                "",
            ),
        ),
        API_INPUT,
    ),
    Mutant(
        "validated-after-enqueue",
        "an unknown task shape is refused (404) only after the task was enqueued",
        (
            (
                "services/api/routes/tasks.py",
                r"(?s)(    if \(task_kind, task_variant\) not in ENDPOINTS:\n.*?\n        \)\n)"
                r"(.*?await enqueue\(state, msg, background\)\n)",
                "\\2\\1",
            ),
        ),
        API_INPUT,
    ),
    Mutant(
        "outage-not-503",
        "a broker outage is answered 500, not 503",
        (
            (
                "services/api/errors.py",
                r'status_code=503,\n(\s+)headers=\{"Retry-After": "1"\}',
                'status_code=500,\n\\1headers={"Retry-After": "1"}',
            ),
        ),
        OUTAGE,
    ),
    Mutant(
        "outage-slow",
        "the Redis clients' timeout is 5 s: a frozen Redis gets its 503 after the 2 s the API promises",
        (
            (
                "lab/settings.py",
                r"redis_timeout_s: float = Field\(1\.0, gt=0\)",
                "redis_timeout_s: float = Field(5.0, gt=0)",
            ),
        ),
        OUTAGE,
    ),
    # -- The queue table, the backlog and the dashboards --------------------------------------
    Mutant(
        "queue-missing",
        "the streaq row is missing from lab/queues.py",
        (("lab/queues.py", r"\n    Broker\(\"streaq\",[^\n]*\n", "\n"),),
        ("tests/unit/test_settings.py", "tests/unit/test_api_routes.py"),
    ),
    Mutant(
        "backlog-is-stream-length",
        "the monitor reads a stream queue's backlog as the stream's length (entries stay once acknowledged)",
        (
            (
                "lab/stream_groups.py",
                r'return found\["lag"\] if found\.get\("lag"\) is not None else float\("nan"\)',
                "return await redis.xlen(stream)",
            ),
        ),
        ("tests/integration/test_queue_monitor.py",),
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
        DASHBOARDS_STATIC,
        after=("grafana/generate.py",),
    ),
    Mutant(
        "panel-wrong-label",
        "the Backlog panel filters on queues= (no such label: it matches every series)",
        (
            (
                "grafana/generate.py",
                r'lab_queue_depth\{queue=~"\$queue", queue!="background"\}',
                'lab_queue_depth{queues=~"$queue", queue!="background"}',
            ),
        ),
        DASHBOARDS_STATIC,
        after=("grafana/generate.py",),
    ),
    # -- The run record, the drain, the comparison and the bench (labctl) -----------------------
    Mutant(
        "lost-hidden-by-totals",
        "a run's backlog (its lost tasks) is read from the totals, where a cell with extra settles hides another's",
        (
            (
                "labctl/records/run.py",
                r'return sum\(max\(0, c\.get\("pending", 0\)\) for c in cells\)',
                'return max(0, sum(c.get("pending", 0) for c in cells))',
            ),
        ),
        ("tests/unit/test_drain_backlog.py",),
    ),
    Mutant(
        "settled-later-with-a-backlog",
        "a draining run is filled in as settled while its ledger still has tasks pending",
        (
            (
                "labctl/records/run.py",
                r'if not self\.is_draining\(\) or not ledger\.get\("totals"\) or backlog_of\(ledger\) > 0:',
                'if not self.is_draining() or not ledger.get("totals"):',
            ),
        ),
        (f"{LOAD_TOOLING}::test_a_draining_run_is_not_called_lost_and_settles_when_its_ledger_does",),
    ),
    Mutant(
        "drain-projection-from-settled",
        "the drain's projected time to empty divides the tasks settled, not the backlog, by the rate",
        (
            (
                "labctl/load_run/task_wait.py",
                r"return self\.backlog / self\.rate_per_s if self\.rate_per_s else None",
                "return settled_count(self.totals) / self.rate_per_s if self.rate_per_s else None",
            ),
        ),
        (f"{LOAD_TOOLING}::test_a_watch_that_ends_with_a_backlog_says_what_it_saw",),
    ),
    Mutant(
        "summary-mixes-queues",
        "the comparison's summary spreads each figure over every queue's runs, not the queue's own",
        (
            (
                "labctl/records/compare.py",
                r'stats\(r\[key\] for r in rows if r\["queue"\] == q\)',
                "stats(r[key] for r in rows)",
            ),
        ),
        ("tests/unit/test_compare_report.py",),
    ),
    Mutant(
        "cpu-per-request-not-task",
        "the comparison's worker CPU per task divides by the requests, not the tasks the worker ran",
        (
            (
                "labctl/records/compare.py",
                r'done_in_window if done_in_window is not None else tasks\.get\("completed"\)',
                'record.get("requests")',
            ),
        ),
        ("tests/unit/test_compare_report.py",),
    ),
    Mutant(
        "bench-ratio-rounded",
        "the bench's lab/bare ratio is rounded, not rounded down: 0.899 shows as a 0.9 that meets the budget",
        (
            (
                "labctl/records/bench.py",
                r"return math\.floor\(lab / bare \* 100 \+ 1e-9\) / 100 if lab and bare else None",
                "return round(lab / bare, 2) if lab and bare else None",
            ),
        ),
        (f"{LOAD_TOOLING}::test_bench_table_judges_the_ratio_it_shows",),
    ),
)


# -- What pytest did ------------------------------------------------------------------------
@dataclass
class Outcome:
    """One run of a selection, from pytest's JUnit XML (junit_family=xunit1,
    which names each test's file)."""

    failed: list[tuple[str, str]] = field(default_factory=list)  # (test, message): failed in the test's call
    errors: list[tuple[str, str]] = field(default_factory=list)  # (test, message): setup, teardown, collection
    passed: int = 0
    skipped: int = 0
    timed_out_s: float | None = None  # stopped after this long
    exit_code: int | None = None
    output: str = ""  # the tail of pytest's output


CAUGHT, NOT_CAUGHT, NO_VERDICT = "caught", "NOT caught", "could not judge"


def read_junit(text: str) -> Outcome:
    """Each test case's result: a <failure> is a failure in the test's call; an
    <error> is one in its setup or teardown, or a collection failure. A test
    that failed and then errored in teardown has both (two test cases)."""
    outcome = Outcome()
    for case in ET.fromstring(text).iter("testcase"):
        test = test_id(case)
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if failure is not None:
            outcome.failed.append((test, first_line(failure.get("message", ""))))
        elif error is not None:
            outcome.errors.append((test, first_line(error.get("message", ""))))
        elif skipped is not None:
            outcome.skipped += 1
        else:
            outcome.passed += 1
    return outcome


def test_id(case: ET.Element) -> str:
    """pytest's id of a JUnit test case: file::[class::]name."""
    name, classname, path = case.get("name", ""), case.get("classname", ""), case.get("file")
    if not path:  # a collection failure: the module's dotted name
        return classname or name
    module = path.removesuffix(".py").replace("/", ".")
    inner = classname.removeprefix(module).lstrip(".")
    return "::".join(part for part in (path, *inner.split("."), name) if part)


def first_line(message: str) -> str:
    return message.strip().splitlines()[0][:200] if message.strip() else ""


def verdict(outcome: Outcome) -> tuple[str, str]:
    """(CAUGHT, NOT_CAUGHT or NO_VERDICT; the test that caught it, or why not)."""
    if outcome.timed_out_s is not None:
        return NOT_CAUGHT, f"none: not caught in {outcome.timed_out_s:.0f} s (stopped)"
    if outcome.failed:
        return CAUGHT, outcome.failed[0][0]
    if outcome.errors:
        test, message = outcome.errors[0]
        return NO_VERDICT, f"{test} errored ({message})"
    if not outcome.passed:
        return NO_VERDICT, f"no test ran (pytest exit {outcome.exit_code})"
    return NOT_CAUGHT, f"none: {outcome.passed} passed"


def baseline_problems(outcome: Outcome) -> list[str]:
    """Why a selection's run on the clean tree cannot stand as the control."""
    if outcome.timed_out_s is not None:
        return [f"did not finish in {outcome.timed_out_s:.0f} s"]
    problems = [f"{test} failed: {message}" for test, message in outcome.failed]
    problems += [f"{test} errored: {message}" for test, message in outcome.errors]
    if not problems and not outcome.passed:
        problems.append(f"no test ran (pytest exit {outcome.exit_code})")
    return problems


# -- Trees and runs ---------------------------------------------------------------------------
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


def mutated(mutant: Mutant, read) -> dict[str, str]:
    """The files the mutant changes, changed; `read(name)` gives a file's text.
    ValueError when a replacement does not match exactly once."""
    files: dict[str, str] = {}
    for name, pattern, replacement in mutant.edits:
        text = files[name] if name in files else read(name)
        new, count = re.subn(pattern, replacement, text)
        if count != 1:
            raise ValueError(f"{pattern!r} matches {count} times in {name}, not once")
        files[name] = new
    return files


def apply(mutant: Mutant, tree: Path) -> None:
    for name, text in mutated(mutant, lambda n: (tree / n).read_text()).items():
        (tree / name).write_text(text)
    if mutant.after:
        subprocess.run([sys.executable, *mutant.after], cwd=tree, check=True, capture_output=True)


def run_tests(tree: Path, tests: Iterable[str], env: dict[str, str], timeout_s: float) -> Outcome:
    """pytest -x on `tests` in `tree`; its outcome. A run past `timeout_s` is
    interrupted (SIGINT: pytest's fixtures stop what they started), then killed."""
    report = tree / ".mutants-junit.xml"
    report.unlink(missing_ok=True)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    run_env.update(PYTHONPATH=str(tree), LAB_TEST_LOGS=str(tree / ".test-logs"), **env)
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider"]
    argv += ["-o", "junit_family=xunit1", f"--junitxml={report}", *tests]
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            argv,
            cwd=tree,
            env=run_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=hears_sigint,
        )
        timed_out = None
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = time.monotonic() - started
            stop(proc)
        stop_leftovers(tree)
        log.seek(0)
        output = log.read()[-4000:]
    outcome = read_junit(report.read_text()) if report.exists() and timed_out is None else Outcome()
    outcome.timed_out_s, outcome.exit_code, outcome.output = timed_out, proc.returncode, output
    return outcome


def hears_sigint() -> None:
    """In the child before pytest starts: SIGINT back to its default. A shell's background
    job (`make mutants &`, nohup) starts with SIGINT ignored, and a Python started so
    installs no KeyboardInterrupt handler: the stop's SIGINT would go unheard."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stop_leftovers(tree: Path, wait_s: float = 10.0) -> None:
    """Kill, by pid, what a run left running in `tree` (the lab's processes run
    in sessions of their own, with the tree as their working directory), and
    wait until they are gone: the next run must not share the CPU with them."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == tree or tree in cwd.parents:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + wait_s
    while any(alive(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Running still: neither gone nor a zombie waiting for its parent."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def fresh_tree(label: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix=f"lab-mutant-{label}-"))
    copy_tree(tree)
    return tree


# -- The check ---------------------------------------------------------------------------------
def check_applies(mutants: list[Mutant]) -> dict[str, str]:
    """Each mutant that no longer applies to the working tree, and why."""
    broken = {}
    for mutant in mutants:
        try:
            mutated(mutant, lambda n: (ROOT / n).read_text())
        except (OSError, ValueError) as exc:
            broken[mutant.name] = str(exc)
    return broken


def run_baseline(mutants: list[Mutant], keep: bool, say) -> list[str]:
    """Each distinct selection on a copy of the clean tree (with the mutants'
    `after` commands run there too, as in their copies); what failed."""
    tree = fresh_tree("baseline")
    problems: list[str] = []
    try:
        for command in dict.fromkeys(m.after for m in mutants if m.after):
            subprocess.run([sys.executable, *command], cwd=tree, check=True, capture_output=True)
        selections: dict[tuple, list[Mutant]] = {}
        for mutant in mutants:
            selections.setdefault(mutant.selection, []).append(mutant)
        for (tests, env), sharing in selections.items():
            started = time.monotonic()
            outcome = run_tests(tree, tests, dict(env), max(m.timeout_s for m in sharing))
            found = baseline_problems(outcome)
            say(
                f"   clean tree: {' '.join(tests)}: {'FAILS' if found else 'passes'} ({time.monotonic() - started:.0f} s)"
            )
            if found:
                problems += [f"{' '.join(tests)}: {p}" for p in found]
                say(outcome.output)
                break  # one is enough to refuse
    finally:
        if keep:
            say(f"   kept {tree}")
        else:
            shutil.rmtree(tree, ignore_errors=True)
    return problems


def run_mutant(mutant: Mutant, keep: bool, say) -> tuple[str, str, float, Outcome]:
    tree = fresh_tree(mutant.name)
    started = time.monotonic()
    try:
        apply(mutant, tree)
        outcome = run_tests(tree, mutant.tests, mutant.env, mutant.timeout_s)
        state, detail = verdict(outcome)
        return state, detail, time.monotonic() - started, outcome
    finally:
        if keep:
            say(f"   kept {tree}")
        else:
            shutil.rmtree(tree, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all): " + ", ".join(m.name for m in MUTANTS))
    parser.add_argument("--keep", action="store_true", help="keep each copy of the tree (its path is printed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's output for each mutant")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]

    def say(text: str) -> None:
        print(text, flush=True)

    started = time.monotonic()
    rows: list[tuple[Mutant, str, str, float]] = []
    broken = check_applies(chosen)
    for mutant in chosen:
        if mutant.name in broken:
            say(f"== {mutant.name}: COULD NOT APPLY: {broken[mutant.name]}")
            rows.append((mutant, f"could not apply: {broken[mutant.name]}", "ERROR", 0.0))
    runnable = [m for m in chosen if m.name not in broken]

    if runnable:
        say(f"== the clean tree first: {len({m.selection for m in runnable})} selection(s)")
        problems = run_baseline(runnable, args.keep, say)
        if problems:
            say(
                "\nREFUSING TO JUDGE: the tests fail on the clean tree, so a fault would be 'caught' by what already fails:"
            )
            for problem in problems:
                say(f"  {problem}")
            return 2

    for mutant in runnable:
        say(f"== {mutant.name}: {mutant.fault}")
        try:
            state, detail, seconds, outcome = run_mutant(mutant, args.keep, say)
        except subprocess.CalledProcessError as exc:
            rows.append((mutant, f"could not apply: {exc}", "ERROR", 0.0))
            continue
        say(f"   {state}: {detail} ({seconds:.0f} s)")
        if args.verbose or state != CAUGHT:
            say(outcome.output)
        rows.append((mutant, detail, state, seconds))

    say("\n| fault | caught by (first failing test) | verdict | s |")
    say("|---|---|---|---|")
    for mutant, detail, state, seconds in rows:
        say(f"| {mutant.fault} | `{detail}` | {state} | {seconds:.0f} |")
    say(f"\n{sum(s == CAUGHT for _, _, s, _ in rows)} of {len(rows)} caught in {time.monotonic() - started:.0f} s")
    states = {state for _, _, state, _ in rows}
    if states & {"ERROR", NO_VERDICT}:
        return 2
    return 1 if NOT_CAUGHT in states else 0


if __name__ == "__main__":
    sys.exit(main())
