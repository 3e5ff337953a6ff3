"""Comments and docstrings say why, never what was measured: a figure with a
unit (req/s, tasks/s, µs, ms, MB, %, "about N s") in a comment or docstring of
a Python file, the Makefile or a YAML file is a measurement that belongs in
docs/results/, with the way to measure it again. A figure that is no
measurement (a limit, a setting, a constant named in the code, a test's own
data) is allowed by name below, with the file it is in.

Pure file reading: comments by Python's tokenizer, docstrings by `ast`, `#`
comments of the Makefile and YAML by line."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", "node_modules", ".git", "results", ".stack"}
RATE = r"(?:req/s|requests/s|requests a second|tasks/s|tasks a second)"
SIZE = r"(?:µs|ms|MB|MiB|GB|%)"
DURATION = r"(?:s|min|minutes|seconds|ms|µs|%|MB)"
MEASURED = re.compile(
    rf"(?:\b(?:about|around|roughly|nearly|almost|took|takes|drains?|drained|measured|ran at|reached|up to|over)\s*"
    rf"~?\d[\d.,]*\s*(?:{RATE}|{DURATION})\b)"
    rf"|(?:~\d[\d.,]*\s*(?:{RATE}|{DURATION})\b)"
    rf"|(?:\b\d[\d.,]*\s*{RATE})"
    # A share followed by "confidence", "interval" or "CI" is a confidence level, not a measurement.
    rf"|(?:\b\d[\d.,]*\s*{SIZE}(?!\w)(?!\s*(?:confidence|interval|CI\b)))"
)
# (file, the figure as matched): figures that are no measurement.
ALLOWED = {
    ("lab/queues.py", "10 %"),  # what Dramatiq's maintenance chance of 100000 in a million means
    ("workers/dramatiq_queue.py", "10 %"),  # the same setting
    ("workers/dramatiq_queue.py", "0.1 %"),  # Dramatiq's own default
    ("workers/saq_queue.py", "up to 60 s"),  # SAQ's upkeep intervals
    ("workers/taskiq_queue.py", "up to 2 s"),  # taskiq-redis's xread_block
    ("labctl/experiments/bench/runner.py", "120 MB"),  # the budget: records/bench.py's BUDGET_PEAK_MB
    ("labctl/load_run/follow.py", "up to 120 s"),  # the master's --expect-workers-max-wait
    ("labctl/load_run/follow.py", "50 ms"),  # the API's ledger flush interval
    ("labctl/records/published.py", "200 MB"),  # the published experiment's limits
    ("labctl/records/published.py", "500 MB"),
    ("prometheus/prometheus.yml", "over 10 s"),  # the rate window
    ("prometheus/rules/api.yml", "1 ms"),  # the histogram's buckets
    ("prometheus/rules/tasks.yml", "over 10 s"),  # the rate window
    ("lab/cgroup.py", "100 %"),  # what the throttled share's upper bound means
    ("tests/compose/panel_truth.py", "50 %"),  # the instants of a run the panels are read at
    ("tests/compose/panel_truth.py", "80 %"),
    ("tests/compose/panel_truth.py", "up to 4 s"),  # a scrape and a rule evaluation: the intervals
    ("tests/compose/test_load.py", "50 %"),  # the same instants
    ("tests/compose/test_load.py", "80 %"),
    ("tests/unit/test_bench_drain_fill.py", "100 tasks/s"),  # the test's own sides
    ("tests/compose/test_compare.py", "100 %"),  # a drain's end, as the chart draws it
    ("tests/compose/test_load.py", "15 %"),  # the test's tolerance
    ("tests/integration/test_load_tooling.py", "6 tasks/s"),  # the test's own samples
    ("tests/integration/test_load_tooling.py", "80 %"),  # render/bench_table.py's CPU_BOUND_SHARE
    ("tests/integration/test_port_forward.py", "1 MiB"),
    ("labctl/experiments/capacity.py", "5 %"),  # the rule: the backlog's growth as a share of the rate
    ("labctl/experiments/capacity.py", "500ms"),  # a form of max_wait it takes
    ("tests/unit/test_capacity.py", "95 %"),  # records/capacity.py's RATE_KEPT  # the test's payloads
    ("tests/integration/test_port_forward.py", "2 MiB"),
    ("tests/unit/test_metrics.py", "351 ms"),  # the test's own observation
    ("tests/integration/test_worker_stop.py", "300 ms"),  # the test's IO_LATENCY_MS
    ("services/claims/vendor/saq/funcs.py", "500 ms"),  # SAQ's author's comment, vendored verbatim
    ("services/claims/vendor/saq/funcs.py", "25 ms"),
    ("labctl/experiments/claims/lab_path.py", "25 ms"),  # the mean of random()/20 s, the job's own definition
}


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    if path.suffix != ".py":
        return [
            (i, m.group(1)) for i, line in enumerate(text.splitlines(), 1) if (m := re.search(r"(?:^|\s)#(.*)$", line))
        ]
    found = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                found.append((doc.lineno, doc.value.value))
    return found


def measurements(path: Path, texts: list[tuple[int, str]]) -> list[tuple[str, int, str]]:
    """(file, line, figure) of each figure with a unit in the texts."""
    rel = str(path.relative_to(ROOT)) if path.is_absolute() else str(path)
    return [(rel, line, m.group(0).strip()) for line, text in texts for m in MEASURED.finditer(text)]


def scanned_files() -> list[Path]:
    return sorted(
        p
        for p in ROOT.rglob("*")
        if p.is_file()
        and not SKIP_DIRS & set(p.relative_to(ROOT).parts)
        and (p.suffix in (".py", ".yml", ".yaml") or p.name == "Makefile")
    )


def test_no_comment_or_docstring_holds_a_measurement():
    files = scanned_files()
    assert any(f.name == "Makefile" for f in files) and any(f.suffix == ".yml" for f in files)
    found = [m for f in files for m in measurements(f, comments_and_docstrings(f))]
    bad = [f"{path}:{line}: {figure!r}" for path, line, figure in found if (path, figure) not in ALLOWED]
    assert not bad, (
        "measurements in comments (move each to docs/results/ with how to measure it again, "
        "or allow a non-measurement in tests/unit/test_comments.py):\n" + "\n".join(bad)
    )


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        ("# SAQ drains about 110 tasks/s at 0.2 CPU", ["about 110 tasks/s"]),
        ("# an API start then costs about 2 s of CPU, not 6", ["about 2 s"]),
        ("# the defaults take ~15 min at 0.2 CPU", ["~15 min"]),
        ("# 40 000 clients hold 100 MB", ["100 MB"]),
        ("# each probe took 25 ms, 9-12 µs a request, +3.2 %", ["took 25 ms", "12 µs", "3.2 %"]),
        ("# the 10 s rates trail the run; WORKER_MEM=200M; 0.2 CPU; retries 5 times", []),
    ],
)
def test_the_scan_finds_figures_with_units(text, figures):
    assert [figure for _, _, figure in measurements(Path("x.py"), [(1, text)])] == figures
