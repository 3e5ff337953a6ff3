"""`make compare` against the real compose stack, small (two queues, 200
requests, two reps), and its report opened in a real headless browser
(Debian's `chromium`; .ci/run installs it): the table shows the record's
figures, every chart has a line per queue and rep carrying its samples and
drawing a vertex per sample, and the page draws them. No speed is checked here.
The page is read by tests/compose/report_page.py, which the unit tests run on a
page rendered from a fixture record."""

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from labctl.records.compare import FIELDS, SCHEMA
from labctl.render import compare_page
from tests.compose.helpers import run_report
from tests.compose.report_page import ReportPage, only_lines_of

pytestmark = pytest.mark.compose

QUEUES = ("background", "dramatiq")  # the API as the worker, and a broker queue that keeps up
REQUESTS, REPS = 200, 2


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no headless browser: `apt-get install -y chromium` (Debian's; .ci/run installs it)")
    return found


def browse(page: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args, page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def compared(stack, tmp_path_factory):
    """One small comparison: (its output, its record, the results directory)."""
    results = tmp_path_factory.mktemp("compare")
    started = time.monotonic()
    proc = stack.make(
        "compare",
        f"workers={' '.join(QUEUES)}",
        f"requests={REQUESTS}",
        f"reps={REPS}",
        "backlog_wait_s=180",
        f"results_dir={results}",
        timeout=900,
    )
    stack.timings[f"make compare {len(QUEUES)} queues x {REPS} reps x {REQUESTS} requests"] = time.monotonic() - started
    # compare-<time>.md beside its record; each run's own record is compare-<time>-<queue>-r<rep>.json.
    [table] = results.glob("compare-*.md")
    return proc.stdout, json.loads(table.with_suffix(".json").read_text()), results


def test_make_compare_runs_each_queue_in_turn_and_records_every_run(stack, compared):
    out, record, results = compared
    assert record["schema"] == SCHEMA and record["params"]["workers"] == list(QUEUES)
    # Interleaved: every queue's first rep before any second one.
    assert [(r["queue"], r["rep"]) for r in record["runs"]] == [(q, rep) for rep in (1, 2) for q in QUEUES]
    for row in record["runs"]:
        run = json.loads((results / f"{row['run']}.json").read_text())  # make load's own record
        assert run["requests"] == REQUESTS and run["tasks"]["settled"], run["warnings"]
        ledger = run_report(stack.api_url, row["run"])["totals"]
        assert (ledger["enqueued"], ledger["completed"], ledger["pending"]) == (REQUESTS, REQUESTS, 0), ledger
        assert row["all_done_s"] == run["tasks"]["time_to_execute_all_s"] and row["rps"] == run["rps"]
        assert row["cpu_ms_per_task"] > 0 and row["worker_peak_mb"] > 0 and row["api_peak_mb"] > 0, row
    for queue in QUEUES:
        assert record["summary"][queue]["rps"]["n"] == REPS
        assert record["setting"]["limits"]["workers"][queue]["cpus"] == 0.2
    assert record["setting"]["versions"]["dramatiq"] and record["setting"]["machine"]["cores"]
    # The stack's default limits and the article's load: the published rows go
    # beside the lab's once they are transcribed, and the page says why not until then.
    assert record["published"] is not None or "0.2cpu/200M" in record["published_note"]
    # The markdown twin, also printed at the end, and `make results` shows it.
    table = compare_page.markdown(record)
    assert (results / f"{record['run']}.md").read_text() == table + "\n" and table in out
    shown = stack.make("results", f"results_dir={results}", timeout=120).stdout
    assert f"Latest comparison (make compare): {record['run']}" in shown and table in shown


def test_the_report_renders_the_runs_figures_in_a_browser(compared, tmp_path):
    _, record, results = compared
    page = results / f"{record['run']}.html"
    dom = ReportPage.read(browse(page, "--dump-dom").stdout)
    # The table: a cell per queue and figure, showing the record's spread over the reps.
    for queue, summary in record["summary"].items():
        for _, key in FIELDS:
            cell, st = dom.cells[(queue, key)], summary[key]
            assert cell["text"] == compare_page.spread(st), (queue, key, cell, st)
            if st is not None:
                assert float(cell["data-mean"]) == st["mean"] and int(cell["data-n"]) == st["n"]
    # The charts: one line per queue and rep on each, carrying its samples and drawing each.
    assert dom.charts == [f"chart-{key}" for key, _, _ in compare_page.CHARTS]
    assert len(dom.lines) == len(compare_page.CHARTS) * len(QUEUES) * REPS
    for series in record["series"]:
        for key, _, _ in compare_page.CHARTS:
            [line] = [line for line in dom.lines_of(key) if line["run"] == series["run"]]
            assert line["values"] == series[key] and line["vertices"] == len(series[key]), (key, line)
            assert line["colour"] == compare_page.colour(series["queue"])
        assert len(series["throughput"]) >= 5 and max(v for _, v in series["done_pct"]) == pytest.approx(100, abs=1)
    # Drawn: each queue's lines put its colour on the screen. Measured on a copy
    # of the page with the other queues' lines taken out, against one with no
    # lines at all: a queue whose lines lie under another's (a backlog at 0, a
    # drain at 100 %) is still seen, and the legend swatch counts on both sides.
    html = page.read_text()
    blank = screenshot(only_lines_of(html, None), tmp_path / "none.html")
    for queue in QUEUES:
        assert line_ink(html, blank, tmp_path, queue) >= MIN_LINE_INK, queue


# One line across a chart puts about a thousand pixels' worth of ink on the screen;
# the colour's stray blends elsewhere on the page (text, other lines) cancel out.
MIN_LINE_INK = 1000


def line_ink(html: str, blank: Path, tmp_path: Path, queue: str) -> float:
    """How much of `queue`'s colour its own lines add to the screenshot of the
    page (`blank`: the page with no lines)."""
    only = only_lines_of(html, queue)
    assert ReportPage.read(only).lines, f"no {queue} line in the page"
    return ink(screenshot(only, tmp_path / f"{queue}.html"), queue) - ink(blank, queue)


def screenshot(html: str, path: Path) -> Path:
    path.write_text(html)
    shot = path.with_suffix(".png")
    browse(path, f"--screenshot={shot}", "--window-size=1200,4000")
    return shot


def ink(png: Path, queue: str) -> float:
    """The pixels of `queue`'s colour in the screenshot, each weighted by how much of
    the colour it holds over the white page (a line's anti-aliased edge half as much)."""
    from PIL import Image  # matplotlib's dependency, in the dev group

    hex_colour = compare_page.colour(queue)
    rgb = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    total = 0.0
    for n, pixel in Image.open(png).convert("RGB").getcolors(maxcolors=1 << 24) or []:
        alphas = [(255 - p) / (255 - c) for p, c in zip(pixel, rgb) if 255 - c >= 48]
        alpha = sum(alphas) / len(alphas) if alphas else 0.0
        if alpha >= 0.25 and all(abs(p - (255 - (255 - c) * alpha)) <= 12 for p, c in zip(pixel, rgb)):
            total += n * min(alpha, 1.0)
    return total


def test_the_report_needs_no_network(compared):
    _, record, results = compared
    page = (results / f"{record['run']}.html").read_text()
    # (url(#id): a chart's clip path, in the page itself)
    assert not re.search(r"<script|<link|<img|<iframe|src=|@import|url\((?!#)", page, re.I)
