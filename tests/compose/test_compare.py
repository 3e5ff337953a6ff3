"""`make compare` against the real compose stack, small (two queues, two reps
of a few seconds' load), and its report opened in a real headless browser
(Debian's `chromium`; .ci/run installs it). The report's figures are checked
against each run's own evidence, never against the report's own summary:
Locust's CSV beside each run's record, the run's ledger as the API reports it
and the ledger timeline its record keeps. `background` keeps up with its load;
arq, at its default poll, drains slower than its API enqueues, so its time to
run every task is projected from the rate it held while watched, and the rest
of its backlog is run by a one-off worker with every task still counted. No
speed is checked here. The page is read by tests/compose/report_page.py, which
the unit tests run on a page rendered from a fixture record."""

import csv
import json
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from labctl import stats
from labctl.experiments.compare.rounds import Rounds
from labctl.experiments.compare.series import SERIES_STEP_S
from labctl.records.compare import SCHEMA, CompareRecord
from labctl.records.compare_figures import FIELDS, RANKED
from labctl.render import compare_charts, compare_table
from tests.compose.helpers import run_report
from tests.compose.report_page import ReportPage, only_lines_of

pytestmark = pytest.mark.compose

QUEUES = ("background", "arq")  # the API as the worker, which keeps up; a queue that drains slower
# Long enough that the charts' 10 s rates lie wholly past the warm-up from 14 s on, three
# or four samples (2 s apart) before the load ends, whatever the machine's speed (the load
# lasts a time); a watch of 2 s sees arq drain a poll's jobs several times over. Two rounds,
# no more (max_rounds), in the order a fixed seed gives.
DURATION_S, WARMUP_S, DRAIN_WATCH_S, ROUNDS, SEED = 20, 4, 2, 2, 11
# The requests chart over the middle of a run reads Locust's scraped counters within this
# share: a scrape still being written when the recording rule was evaluated is missing from
# the rule's rate and present in the rate recomputed after.
CHART_TOLERANCE = 0.15


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
        f"duration={DURATION_S}",
        f"warmup_s={WARMUP_S}",
        f"drain_watch={DRAIN_WATCH_S}",
        f"rounds={ROUNDS}",
        f"max_rounds={ROUNDS}",
        f"seed={SEED}",
        "backlog_wait_s=180",
        f"results_dir={results}",
        timeout=900,
    )
    stack.timings[f"make compare {len(QUEUES)} queues x {ROUNDS} rounds x {DURATION_S} s"] = time.monotonic() - started
    # compare-<time>.md beside its record; each run's own record is compare-<time>-<queue>-r<rep>.json.
    [table] = [p for p in results.glob("compare-*.md")]
    return proc.stdout, json.loads(table.with_suffix(".json").read_text()), results


def locust_stats(results: Path, run: str) -> dict:
    """Locust's own aggregated figures for the run, from its CSV beside the record."""
    with (results / f"{run}_stats.csv").open() as f:
        return next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")


def steady_rate(points: list, run: dict) -> float:
    """A count's increase a second over the run's load after its warm-up, from its first
    [time, count] point in that part to its last."""
    start, end = run["load_started_at"], run["load_ended_at"]
    inside = [p for p in points if start + WARMUP_S <= p[0] <= end - 1]
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def steady_rps(run: dict) -> float:
    """Requests per second over the steady part, read here from the API's enqueue counter as
    the run's record keeps Prometheus' scrapes of it (a request of a queue run enqueues one task)."""
    return steady_rate(run["enqueued_scrapes"]["rows"], run)


def locust_rate_at(stack, at: float) -> float:
    """Requests a second of every Locust process, as the requests chart's recording rule
    computed them at its evaluation at or before `at`: the rate of their counters over the
    10 s before it, recomputed here from Prometheus' samples of those counters."""
    [evaluated] = stack.prometheus(
        "/api/v1/query", query="max(timestamp(name_method:locust_requests:rate10s))", time=f"{at:.3f}"
    )["result"]
    then = float(evaluated["value"][1])
    [rate] = stack.prometheus("/api/v1/query", query="sum(rate(locust_requests_total[10s]))", time=f"{then:.3f}")[
        "result"
    ]
    return float(rate["value"][1])


def test_each_runs_figures_are_its_own_evidences(stack, compared):
    out, record, results = compared
    assert record["schema"] == SCHEMA and record["params"]["workers"] == list(QUEUES)
    assert record["params"]["duration_s"] == DURATION_S and record["params"]["warmup_s"] == WARMUP_S
    # Rounds in the order the seed gives (the same generator the command uses, driven again here),
    # every queue in each, its runs numbered in turn.
    plan = Rounds(list(QUEUES), SEED, ROUNDS, ROUNDS, 5.0, 3600.0)
    orders = [plan.next({}, {}, 0.0) for _ in range(ROUNDS)]
    assert record["rounds"]["seed"] == SEED and record["rounds"]["orders"] == orders
    assert [(r["queue"], r["round"]) for r in record["runs"]] == [(q, i) for i, o in enumerate(orders, 1) for q in o]
    assert [r["rep"] for r in record["runs"] if r["queue"] == "arq"] == list(range(1, ROUNDS + 1))
    assert f"seed={SEED}" in record["command"]
    # The warm-up run: every queue at once, not counted, its tasks counted by its own ledger.
    warmup = json.loads((results / f"{record['run']}-warmup.json").read_text())
    assert warmup["worker"] == ",".join(QUEUES) and not any(r["run"] == warmup["run"] for r in record["runs"])
    warm = run_report(stack.api_url, warmup["run"])["totals"]
    assert warm["enqueued"] == warm["completed"] + warm["failed"] + warm["pending"] and warm["enqueued"] > 0, warm
    series = {s["run"]: s for s in record["series"]}
    for row in record["runs"]:
        run = json.loads((results / f"{row['run']}.json").read_text())  # make load's own record
        stats = locust_stats(results, row["run"])
        ledger = run_report(stack.api_url, row["run"])
        totals = ledger["totals"]
        # The load lasted its time from Locust's start (its first request follows once its users
        # are spawned, later on a slower machine), then let its requests in flight finish (each
        # within the run's longest response; 2 s for Locust's stop and the clocks' grain), and
        # Locust's CSV counts what the record does.
        start, end = run["load_started_at"], run["load_ended_at"]
        assert run["locust_started_at"] <= start and DURATION_S - 2 <= end - run["locust_started_at"], run
        assert end - start <= DURATION_S + run["max_ms"] / 1000 + 2, run
        # Every request accepted (202, its task in the ledger) or refused with the fast 503 a
        # starved API gives when Redis does not answer in time, which enqueues nothing.
        codes = run["status_codes"]
        assert int(stats["Request Count"]) == run["requests"] == sum(codes.values()), (stats, codes)
        assert set(codes) <= {"202", "503"} and codes.get("202") == totals["enqueued"], (codes, totals)
        assert int(stats["Failure Count"]) == run["failures"] == codes.get("503", 0), (stats, run["errors"])
        # The API's enqueue counter, scraped from before the first request to after the last,
        # rose by exactly the tasks the ledger counts enqueued.
        scrapes = run["enqueued_scrapes"]["rows"]
        assert scrapes[0][0] < start and scrapes[-1][0] > end, scrapes
        assert scrapes[-1][1] - scrapes[0][1] == totals["enqueued"], (scrapes, totals)
        # RPS over the steady part, as this test reads those scrapes. Not against Locust's own
        # history of the same part: its workers report their counts when they can, which on a
        # busy machine is seconds late, so how well the two agree is the machine's speed.
        assert row["rps"] == pytest.approx(steady_rps(run), abs=0.1), row
        assert row["rps_whole_load"] == pytest.approx(
            int(stats["Request Count"]) / (run["load_ended_at"] - run["load_started_at"]), rel=0.01
        )
        assert (row["median_ms"], row["p95_ms"]) == (float(stats["Median Response Time"]), float(stats["95%"]))
        assert row["errors_pct"] == round(100 * int(stats["Failure Count"]) / int(stats["Request Count"]), 3), row
        # Every task counted by the ledger, whichever worker ran it.
        assert (totals["completed"], totals["pending"], totals["failed"]) == (totals["enqueued"], 0, 0), totals
        assert (row["completed"], row["lost"], row["duplicates"]) == (
            totals["completed"],
            0,
            totals["duplicates"],
        )
        if row["queue"] == "background":  # kept up: the time the ledger saw
            assert not row["all_done_projected"]
            assert row["all_done_s"] == pytest.approx(ledger["last_settled_at"] - ledger["first_enqueued_at"], abs=0.01)
        else:  # drained slower: projected from what the watch saw, and the rest run by a one-off worker
            watch = run["tasks"]["draining"]
            assert row["all_done_projected"] and run["tasks"]["emptied_by"].startswith("a one-off arq worker")
            projected = watch["watch_ended_at"] - ledger["first_enqueued_at"] + watch["backlog"] / watch["rate_per_s"]
            assert row["all_done_s"] == pytest.approx(projected, abs=0.1) and watch["rate_per_s"] > 0
            assert row["drain_rate_per_s"] == watch["rate_per_s"]
        assert row["cpu_ms_per_task"] > 0 and row["worker_peak_mb"] > 0 and row["api_peak_mb"] > 0, row
        # The machine's speed over the steady part, as this test reads the probe's timings in the record.
        speed = statistics.median(ms for at, ms in run["machine_speed"]["rows"] if start + WARMUP_S <= at <= end - 1)
        assert row["machine_speed"] == pytest.approx(1000 / speed, abs=0.1) and row["machine_speed"] > 0, row
        # The requests chart over the middle of the load reads Locust's counters as Prometheus
        # scraped them then, this run's and no other's. Not against the table's RPS: where a
        # starved machine answers in bursts, Locust counts its requests seconds after the API
        # enqueued them, and the chart's 10 s windows and the steady part see different rates.
        chart = [(t, v) for t, v in series[row["run"]]["requests"] if WARMUP_S + 10 <= t <= end - start]
        assert chart and row["chart_rps_middle"] == round(sum(v for _, v in chart) / len(chart), 1), (row, chart)
        scraped = statistics.mean(locust_rate_at(stack, start + t) for t, _ in chart)
        assert row["chart_rps_middle"] == pytest.approx(scraped, rel=CHART_TOLERANCE), (row, scraped)
    for queue in QUEUES:
        assert record["setting"]["limits"]["workers"][queue]["cpus"] == 0.2
    assert record["setting"]["versions"]["arq"] and record["setting"]["machine"]["cores"]
    # The stack's default limits and the article's users and endpoint: the article's rows beside the lab's.
    assert record["published"]["setting"] == "0.2cpu/200M" and record["published"]["rows"]["arq"]["rps"] == 227
    # The markdown twin, also printed at the end, and `make results` shows it.
    table = compare_table.markdown(CompareRecord.model_validate(record))
    assert (results / f"{record['run']}.md").read_text() == table + "\n" and table in out
    shown = stack.make("results", f"results_dir={results}", timeout=120).stdout
    assert f"Latest comparison (make compare): {record['run']}" in shown and table in shown


def test_the_report_renders_the_runs_figures_in_a_browser(compared, tmp_path):
    _, record, results = compared
    page = results / f"{record['run']}.html"
    dom = ReportPage.read(browse(page, "--dump-dom").stdout)
    # The tables: a cell per queue and figure, whose numbers are the runs' own (their rows, each
    # checked above against its evidence): their median, and the interval labctl/stats.py gives them.
    for queue in QUEUES:
        rows = [r for r in record["runs"] if r["queue"] == queue]
        for _, key in FIELDS:
            cell = dom.cells[(queue, key)]
            values = [r[key] for r in rows if r[key] is not None]
            if values:
                est = stats.estimate(values)
                assert float(cell["data-median"]) == pytest.approx(statistics.median(values), abs=1e-3), (queue, key)
                assert int(cell["data-n"]) == len(values)
                assert (float(cell["data-low"]), float(cell["data-high"])) == pytest.approx((est.low, est.high))
        assert ("data-projected" in dom.cells[(queue, "all_done_s")]) == (queue == "arq")
    # The ranking, by RPS and by tasks/s, as the runs' figures give it.
    for _, key in RANKED:
        expected = stats.ranking({q: [r[key] for r in record["runs"] if r["queue"] == q] for q in QUEUES})
        assert [(e["queue"], e["rank"]) for e in record["ranking"][key]] == [(r.name, r.rank) for r in expected]
    # The charts: the ranking's bars, then a panel per queue with one line per run on each, carrying
    # its samples and drawing each.
    assert dom.charts == ["chart-ranking", *(f"chart-{key}" for key, _, _ in compare_charts.CHARTS)]
    assert len(dom.lines) == len(compare_charts.CHARTS) * len(record["runs"])
    for series in record["series"]:
        for key, _, _ in compare_charts.CHARTS:
            [line] = [line for line in dom.lines_of(key) if line["run"] == series["run"]]
            assert line["values"] == series[key] and line["vertices"] == len(series[key]), (key, line)
            assert line["colour"] == compare_charts.colour(series["queue"])
        # The drain chart: every task of a run whose queue kept up; a slow queue's own drain
        # until its watch ended (what a one-off worker ran after it is not drawn): its last
        # point is the share the run's ledger timeline shows about then. About: Prometheus
        # read the counter up to a scrape before the point's time, and the ledger writes a
        # settle a moment after it. A bound in time, not in tasks, which the queue's pace sets.
        row = next(r for r in record["runs"] if r["run"] == series["run"])
        run = json.loads((results / f"{row['run']}.json").read_text())
        if row["all_done_projected"]:
            t_last, drawn = series["done_pct"][-1]
            at = run["load_started_at"] + t_last
            rows = [dict(zip(run["timeline"]["fields"], r)) for r in run["timeline"]["rows"]]
            near = [
                100 * r["completed"] / run["tasks"]["enqueued"]
                for r in rows
                if at - 2 * SERIES_STEP_S - 1 <= r["at"] <= at + SERIES_STEP_S
            ]
            assert near and min(near) - 0.5 <= drawn <= max(near) + 0.5, (series["run"], t_last, drawn, near)
            assert drawn == max(v for _, v in series["done_pct"]), series["done_pct"]  # a count only grows
        else:
            assert max(v for _, v in series["done_pct"]) == pytest.approx(100, abs=1), series["run"]
    # Drawn: each queue's lines put its colour on the screen. Measured on a copy
    # of the page with the other queues' lines taken out, against one with no
    # lines at all: a queue whose lines lie under another's (a backlog at 0, a
    # drain at 100 %) is still seen, and the legend swatch counts on both sides.
    html = page.read_text()
    blank = screenshot(only_lines_of(html, None), tmp_path / "none.html")
    for queue in QUEUES:
        assert line_ink(html, blank, tmp_path, queue) >= MIN_LINE_INK, queue


# A queue's median line across one of its panels puts a few hundred pixels' worth of
# ink on the screen; a line under the axis (a backlog at 0) or over part of the panel
# (a short drain) less. The bound asks for 100 a chart: a queue whose lines are drawn
# passes it, one whose lines are missing, white or hidden puts next to none (the
# colour's stray blends elsewhere on the page, text and other lines, cancel out).
MIN_LINE_INK = 100 * len(compare_charts.CHARTS)


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

    hex_colour = compare_charts.colour(queue)
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
