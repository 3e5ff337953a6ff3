"""`make compare`'s figures and report, and `make results`' short table, from
records built by the same functions a real run uses (labctl/records/run.py's
build_run_record): the spread over reps, the markdown twin, the self-contained
page, the published experiment's rows only for its setting, the queues and
parameters it takes. The real run and the browser: tests/compose/test_compare.py."""

import re

import pytest

from labctl.errors import ParamError
from labctl.experiments import compare
from labctl.queues import QUEUES, service_of
from labctl.records import compare as compare_record
from labctl.records import published
from labctl.records.run import RunInputs, build_run_record
from labctl.render import compare_page as compare_report
from labctl.render import run_table
from tests.compose.report_page import ReportPage, only_lines_of

MiB = 1 << 20


def load_record(run: str, queue: str, rps: float, p95: float, done_s: float) -> dict:
    """A settled io/simple run of 200 requests, as a load run records it."""
    limits = {"cpus": 0.2, "memory": "200M", "memory_bytes": 200 * MiB, "replicas": 1}
    service = service_of(queue)
    record = build_run_record(RunInputs(
        params={"run": run, "scenario": "queue", "worker": queue, "endpoint": "io/simple", "users": 100,
                "spawn_rate": 100, "iterations": 200},
        locust={"requests": 200, "failures": 0, "first_request_at": 1000.0, "last_response_at": 1000 + 200 / rps,
                "status_codes": {"202": 200}, "median_ms": p95 / 2, "p95_ms": p95},
        ledger={"totals": {"enqueued": 200, "completed": 200, "failed": 0, "duplicates": 0, "pending": 0},
                "first_enqueued_at": 1000.0, "last_settled_at": 1000.0 + done_s},
        settled=True,
        limits={"api": limits, "workers": {queue: {**limits, "concurrency": 3}}},
        knobs={"api": {"ENQUEUE_MODE": "await"}},
        resources={service: {"peak_memory_bytes": 80 * MiB, "cpu_throttled_periods_pct": 12.5},
                   "api": {"peak_memory_bytes": 90 * MiB, "cpu_throttled_periods_pct": 20.0}},
        probe=None,
        locust_workers=2,
        subjects=[service],
        extra={"window_end": 1000.0 + done_s},
    )).as_json()  # fmt: skip
    return record


def comparison() -> dict:
    """Two queues, two reps each, as Comparison.record() puts them together."""
    figures = {("saq", 1): (150.0, 400.0, 9.0), ("saq", 2): (130.0, 500.0, 11.0), ("dramatiq", 1): (160.0, 300.0, 2.0)}
    figures[("dramatiq", 2)] = (160.0, 300.0, 2.0)
    rows, records, series = [], [], []
    for (queue, rep), (rps, p95, done) in figures.items():
        record = load_record(f"compare-x-{queue}-r{rep}", queue, rps, p95, done)
        records.append(record)
        rows.append(compare_record.run_row(record, queue, rep, {queue: 0.5, "api": 0.4}))
        samples = [[float(t), float(10 * t)] for t in range(-4, int(done) + 4, 2)]
        series.append({"queue": queue, "rep": rep, "run": record["run"], "requests": samples[2:], "throughput": samples,
                       "backlog": samples[:3], "done_pct": samples[1:]})  # fmt: skip
    setting = {"limits": {"api": records[0]["limits"]["api"], "workers": {}}, "knobs": {}, "versions": {"saq": "1"}}
    for record in records:
        setting["limits"]["workers"].setdefault(record["worker"], record["limits"]["workers"][record["worker"]])
    setting["machine"] = {"cores": "2"}
    params = {"workers": ["saq", "dramatiq"], "requests": 200, "reps": 2, "users": 100, "endpoint": "io/simple"}
    return {
        "schema": compare_record.SCHEMA, "run": "compare-x", "time": "t", "command": "make compare", "wall_s": 60.0,
        "params": params, "summary": compare_record.summarise(rows, ["saq", "dramatiq"]), "runs": rows,
        "series": series, "series_step_s": 2, "setting": setting, "bench": {}, "chaos": [], "published": None,
        "published_note": "not transcribed", "notes": [],
    }  # fmt: skip


def test_a_run_row_holds_the_articles_figures_and_the_cost_per_task():
    row = comparison()["runs"][0]
    assert (row["queue"], row["rep"], row["rps"], row["p95_ms"], row["all_done_s"], row["errors_pct"]) == (
        "saq", 1, 150.0, 400.0, 9.0, 0.0
    )  # fmt: skip
    # 0.5 CPU seconds over 200 tasks; the API's 0.4 s over 200 requests.
    assert (row["cpu_ms_per_task"], row["api_cpu_ms_per_request"]) == (2.5, 2.0)
    assert (row["worker_peak_mb"], row["api_peak_mb"], row["throttled_periods_pct"]) == (80.0, 90.0, 12.5)
    assert (row["lost"], row["duplicates"], row["settled"]) == (0, 0, True)


def test_cpu_per_task_is_shared_by_the_tasks_run_and_the_apis_by_the_requests():
    """10 of 200 requests got a 503: the worker's CPU went to the 190 tasks it
    ran, the API's to the 200 requests it answered."""
    record = load_record("r", "saq", 100.0, 200.0, 3.0)
    record["tasks"] = {**record["tasks"], "enqueued": 190, "completed": 190}
    row = compare_record.run_row(record, "saq", 1, {"saq": 0.95, "api": 0.4})
    assert (row["cpu_ms_per_task"], row["api_cpu_ms_per_request"]) == (5.0, 2.0)


def test_background_is_measured_on_the_api():
    record = load_record("r", "background", 100.0, 200.0, 3.0)
    row = compare_record.run_row(record, "background", 1, {"api": 0.6})
    assert row["cpu_ms_per_task"] == 3.0 and row["worker_peak_mb"] == 90.0 and row["throttled_periods_pct"] == 20.0


def test_the_spread_is_the_mean_and_range_over_reps():
    summary = comparison()["summary"]
    # The spread: (max - min) / median, in %.
    assert summary["saq"]["rps"] == {"mean": 140.0, "min": 130.0, "max": 150.0, "n": 2, "spread_pct": 14.3}
    assert summary["dramatiq"]["rps"]["spread_pct"] == 0.0 and compare_record.stats([5])["spread_pct"] is None
    assert compare_report.spread(summary["saq"]["rps"]) == "140 (130–150)"
    assert compare_report.spread(summary["dramatiq"]["rps"]) == "160"  # the reps agree
    assert compare_report.spread(summary["saq"]["all_done_s"]) == "10 (9–11)"
    assert compare_record.stats([None, None]) is None and compare_report.spread(None) == "-"
    assert [compare_report.num(x) for x in (0, 0.25, 3.5, 12.345, 250.4, 2000)] == [
        "0",
        "0.25",
        "3.5",
        "12.3",
        "250",
        "2000",
    ]


def test_the_markdown_twin_has_a_row_per_queue_in_order():
    text = compare_report.markdown(comparison())
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| queue |"))
    assert header.startswith("| queue | RPS | median ms | p95 ms | all tasks done s | errors % | worker CPU ms/task")
    rows = [line for line in lines if line.startswith("| saq") or line.startswith("| dramatiq")]
    assert rows[0].startswith("| saq | 140 (130–150) |") and rows[1].startswith("| dramatiq | 160 |")
    assert "API 0.2cpu/200M, workers 0.2cpu/200M" in lines[0]


def test_the_page_needs_nothing_but_itself_and_carries_every_sample():
    record = comparison()
    page = compare_report.page(record)
    # Nothing fetched: no script, no stylesheet or image from elsewhere (url(#id):
    # a chart's clip path, in the page itself).
    assert not re.search(r"<script|<link|<img|<iframe|src=|@import|url\((?!#)", page, re.I)
    dom = ReportPage.read(page)
    assert dom.charts == [f"chart-{key}" for key, _, _ in compare_report.CHARTS]
    for key, _, _ in compare_report.CHARTS:
        lines = dom.lines_of(key)
        assert [(line["queue"], line["rep"], line["run"]) for line in lines] == [
            (s["queue"], s["rep"], s["run"]) for s in record["series"]
        ]
        for line, series in zip(lines, record["series"]):
            assert line["values"] == series[key] and line["samples"] == len(series[key])
            assert line["vertices"] == len(series[key])  # the path draws every sample
            assert line["colour"] == compare_report.colour(series["queue"])
    cell = dom.cells[("saq", "p95_ms")]
    assert cell["text"] == "450 (400–500)" and float(cell["data-mean"]) == 450 and cell["data-n"] == "2"


def test_a_copy_of_the_page_keeps_one_queues_lines_only():
    page = compare_report.page(comparison())
    only = ReportPage.read(only_lines_of(page, "saq"))
    for key, _, _ in compare_report.CHARTS:
        assert {line["queue"] for line in only.lines_of(key)} == {"saq"}
    blank = ReportPage.read(only_lines_of(page, None))
    assert not any(blank.lines_of(key) for key, _, _ in compare_report.CHARTS)
    assert blank.cells == ReportPage.read(page).cells  # the table stays


def test_the_published_rows_only_beside_their_own_setting():
    rows = {"0.2cpu/200M": {"arq": {"rps": 1.0}}}
    beside = published.beside("0.2cpu/200M", "io/simple", 100, rows)["rows"]
    # The enqueue table's rows, and BackgroundTasks' own table at 0.2 CPU for the same endpoint and users.
    assert beside["arq"] == {"rps": 1.0} and beside["background"]["rps"] == 319
    assert published.beside("0.5cpu/500M", "io/simple", 100, rows) is None
    assert published.beside("0.2cpu/200M", "io/simple", 50, rows) is None
    assert published.beside("0.2cpu/200M", "io/thread", 100, rows)["rows"] == {
        "background": {"rps": 209, "median_ms": 400, "p95_ms": 600, "all_done_s": 245, "errors_pct": 0.0}
    }
    assert published.beside("0.2cpu/200M", "cpu/simple", 100, rows) is None  # the article ran it with 3 users
    assert set(published.RESULTS) == set(published.SETTINGS) and published.SOURCE["url"].startswith("https://habr")
    # The article's tables as it prints them (another machine's figures).
    assert (
        published.RESULTS["0.2cpu/200M"]["arq"]["rps"] == 227
        and published.RESULTS["0.5cpu/500M"]["celery"]["p95_ms"] == 59
    )
    assert set(published.RESULTS["0.5cpu/500M"]) == set(published.QUEUES)


def test_a_comparison_shows_the_published_rows_of_its_setting_or_says_why_not(monkeypatch):
    """Both ways, whatever labctl/records/published.py holds today: a table transcribed
    for the comparison's setting is shown, one that is not is named."""
    record = comparison()  # 0.2cpu/200M for the API and the workers, io/simple, 100 users
    monkeypatch.setitem(published.RESULTS, "0.2cpu/200M", {})
    monkeypatch.setattr(published, "BACKGROUND", {})
    assert compare.published_beside(record["setting"], record["params"]) == (
        None,
        "its table for 0.2cpu/200M is not transcribed in labctl/records/published.py",
    )
    monkeypatch.setitem(published.RESULTS, "0.2cpu/200M", {"arq": {"rps": 1.0}})
    rows, why = compare.published_beside(record["setting"], record["params"])
    assert rows is not None and rows["rows"] == {"arq": {"rps": 1.0}} and why == ""
    other = {**record["params"], "users": 50}
    assert compare.published_beside(record["setting"], other) == (
        None,
        "this comparison ran 0.2cpu/200M, io/simple, 50 users",
    )


def test_the_queues_and_parameters_a_comparison_takes():
    assert compare.parse_workers("") == list(QUEUES) == compare.parse_workers("all")
    assert compare.parse_workers("saq, arq saq") == ["saq", "arq"]
    with pytest.raises(ParamError, match="unknown kafka"):
        compare.parse_workers("arq kafka")
    # By default a run lasts a time, and its tasks are watched for a bounded time (the rest run by a one-off worker).
    default = compare.run_options(compare.CompareOptions(workers="arq"), "arq", "compare-1-arq-r1")
    assert (default.duration, default.iterations, default.wait, default.drain_watch) == ("25s", "", False, 20.0)
    options = compare.CompareOptions(workers="arq", requests=200)
    one = compare.run_options(options, "arq", "compare-1-arq-r1")
    assert (one.worker, one.iterations, one.duration, one.endpoint, one.users) == ("arq", "200", "", "io/simple", "100")
    compare.check_params(options, ["arq", "faststream"])
    bad_ones = ({"endpoint": "all"}, {"endpoint": "io/nope"}, {"reps": 0}, {"duration_s": 6}, {"setting": "other"})
    for bad in bad_ones:
        with pytest.raises(ParamError):
            compare.check_params(compare.CompareOptions(**bad), ["arq"])
    assert (
        compare.command_line(["arq"], options)
        == 'make compare workers="arq" requests=200 reps=2 users=100 endpoint=io/simple'
    )
    assert compare.command_line(list(QUEUES), compare.CompareOptions(setting="article")) == (
        "make compare duration=25 reps=2 users=100 endpoint=io/simple setting=article"
    )


def test_make_results_short_table_keeps_the_articles_columns_and_the_newest_runs():
    records = [load_record(f"r{i}", "saq", 100.0 + i, 300.0, 5.0) for i in range(3)]
    for i, record in enumerate(records):
        record["time"] = f"2026-01-0{i + 1}T00:00:00Z"
    table = run_table.table(records, run_table.SHORT_COLUMNS, last=2).splitlines()
    assert table[0] == (
        "| worker | RPS | median ms | p95 ms | all tasks done s | errors % | scenario | endpoint "
        "| API / worker limits | notes | run |"
    )
    assert [line.split("|")[-2].strip() for line in table[2:]] == ["r1", "r2"]
    assert "| saq | 102 | 150 | 300 | 5 | 0 | queue | io/simple | 0.2cpu/200M / 0.2cpu/200M |" in table[-1]
