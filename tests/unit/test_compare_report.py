"""`make compare`'s figures and report, and `make results`' short table, from
records built by the same functions a real run uses (labctl/records/run_build.py's
build_run_record): the spread over reps, the markdown twin, the self-contained
page, the published experiment's rows only for its setting, the queues and
parameters it takes. The real run and the browser: tests/compose/test_compare.py."""

import math
import re
import statistics

import pytest

from lab.queues import BROKERS
from labctl import stats
from labctl.errors import LabError, ParamError
from labctl.experiments import compare
from labctl.experiments.compare import agree
from labctl.queues import QUEUES, service_of
from labctl.records import compare as compare_record
from labctl.records import compare_agreement, compare_figures, compare_run, published
from labctl.records.run import RunRecord
from labctl.records.run_build import RunInputs, build_run_record
from labctl.records.store import Store
from labctl.render import compare_charts, compare_page, compare_table, compare_text, run_table
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
        rows.append(compare_run.run_row(record, queue, rep, {queue: 0.5, "api": 0.4}))
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
        "params": params, "summary": compare_figures.summarise(rows, ["saq", "dramatiq"]),
        "runs": [row.as_json() for row in rows],
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
    row = compare_run.run_row(record, "saq", 1, {"saq": 0.95, "api": 0.4})
    assert (row.cpu_ms_per_task, row.api_cpu_ms_per_request) == (5.0, 2.0)


def test_background_is_measured_on_the_api():
    record = load_record("r", "background", 100.0, 200.0, 3.0)
    row = compare_run.run_row(record, "background", 1, {"api": 0.6})
    assert row.cpu_ms_per_task == 3.0 and row.worker_peak_mb == 90.0 and row.throttled_periods_pct == 20.0


def test_each_figure_is_the_median_of_its_queues_runs_with_its_interval():
    record = compare_record.CompareRecord.model_validate(comparison())
    saq = record.figure("saq", "rps")
    # saq's own two runs, 150 and 130: their median, and the t interval of their mean log.
    assert (saq.median, saq.n) == (140.0, 2)
    assert (saq.low, saq.high) == pytest.approx(
        (
            math.exp(statistics.fmean([math.log(150), math.log(130)]) - 12.7062047 * statistics.stdev([math.log(150), math.log(130)]) / math.sqrt(2)),
            math.exp(statistics.fmean([math.log(150), math.log(130)]) + 12.7062047 * statistics.stdev([math.log(150), math.log(130)]) / math.sqrt(2)),
        ),
        rel=1e-6,
    )  # fmt: skip
    # dramatiq's runs agree: an interval of no width, shown as the figure alone.
    dramatiq = record.figure("dramatiq", "rps")
    assert (dramatiq.median, dramatiq.low, dramatiq.high, dramatiq.n) == pytest.approx((160.0, 160.0, 160.0, 2))
    assert stats.text(record.figure("dramatiq", "rps")) == "160 (n=2)"
    assert compare_text.figure(record, "saq", "all_done_s").startswith("10 [")
    assert compare_figures.summarise([], ["saq"]) == {}
    assert [compare_text.num(x) for x in (0, 0.25, 3.5, 12.345, 250.4, 2000)] == [
        "0",
        "0.25",
        "3.5",
        "12.3",
        "250",
        "2000",
    ]


def test_tasks_per_second_are_the_runs_tasks_over_its_first_enqueue_to_last_completion():
    row = comparison()["runs"][0]  # 200 tasks, 9 s from the first enqueue to the last completion
    assert row["tasks_per_s"] == round(200 / 9.0, 2)
    assert compare_run.tasks_per_s(None, 9.0) is None and compare_run.tasks_per_s(200, None) is None


def test_the_ranking_shares_a_rank_where_the_runs_cannot_tell_queues_apart():
    rows = [
        compare_run.CompareRun(queue=q, rep=i, run=f"{q}-{i}", rps=v, tasks_per_s=v)
        for q, values in {"a": [200, 202, 198, 201], "b": [199, 204, 195, 200], "c": [150, 151, 149, 150]}.items()
        for i, v in enumerate(values)
    ]
    ranked = {e.queue: e for e in compare_figures.ranking(rows, ["a", "b", "c"])["rps"]}
    assert ranked["a"].rank == ranked["b"].rank == 1
    assert ranked["c"].rank == 3 and sorted(ranked["c"].above) == ["a", "b"]


def test_a_run_off_the_machines_speed_is_marked():
    speeds = [1000, 1010, 990, 940, 1060]
    rows = [compare_run.CompareRun(queue="a", rep=i, run=f"r{i}", machine_speed=s) for i, s in enumerate(speeds)]
    assert compare_figures.off_speed(rows) == ["r3", "r4"]  # 0.94 and 1.06 of the median
    assert compare_figures.off_speed(rows[:2]) == []  # too few runs to call one off


def test_two_comparisons_agree_where_no_pair_flips_and_the_medians_are_near():
    def record(figures: dict[str, list[float]]) -> compare_record.CompareRecord:
        runs = [
            {"queue": q, "rep": i, "run": f"{q}-{i}", "rps": v} for q, vs in figures.items() for i, v in enumerate(vs)
        ]
        return compare_record.CompareRecord(run="x", runs=runs)

    a = record({"fast": [200, 202, 198], "slow": [100, 101, 99], "mid": [150, 160, 140]})
    b = record({"fast": [190, 192, 188], "slow": [104, 105, 103], "mid": [150, 151, 149]})
    same = compare_agreement.agreement(a, b, within_pct=10)
    assert same.flipped == [] and same.largest_diff_pct == pytest.approx(100 * (200 / 190 - 1))
    c = record({"fast": [100, 101, 99], "slow": [200, 202, 198], "mid": [150, 151, 149]})
    flipped = compare_agreement.agreement(a, c, within_pct=10).flipped
    assert "fast faster than slow" in flipped and "slow slower than fast" in flipped


def test_an_older_record_reads_by_todays_rules():
    old = {**comparison(), "schema": "compare/1"}
    for row in old["runs"]:
        row.pop("tasks_per_s")
    old["summary"] = {"saq": {"rps": {"mean": 140.0, "min": 130.0, "max": 150.0, "n": 2, "spread_pct": 14.3}}}
    record = compare_record.CompareRecord.model_validate(old)
    assert record.schema_version == compare_record.SCHEMA
    assert record.figure("saq", "rps").median == 140.0 and record.runs[0].tasks_per_s == round(200 / 9.0, 2)
    assert {e.queue for e in record.ranking["rps"]} == {"saq", "dramatiq"}
    assert "fixed order" in compare_text.heading(record)


def test_the_markdown_twin_has_the_ranking_and_a_row_per_queue_in_order():
    record = compare_record.CompareRecord.model_validate(comparison())
    lines = compare_table.markdown(record).splitlines()
    assert "API 0.2cpu/200M, workers 0.2cpu/200M" in lines[0]
    ranking = lines.index(next(line for line in lines if line.startswith("| rank | queue | RPS")))
    # dramatiq's two runs (160, 160) against saq's (150, 130): two runs each cannot tell them apart.
    assert lines[ranking + 2].startswith("| 1 | dramatiq | 160 (n=2) | 1 | dramatiq |")
    assert lines[ranking + 3].startswith("| 1 | saq | 140 [")
    header = next(line for line in lines if line.startswith("| queue | n | RPS |"))
    assert header == "| queue | n | RPS | median ms | p95 ms | all tasks done s | errors % |"
    rows = [line for line in lines if line.startswith("| saq | 2 |") or line.startswith("| dramatiq | 2 |")]
    assert rows[0].startswith("| saq | 2 | 140 [") and rows[1].startswith("| dramatiq | 2 | 160 |")
    assert max(len(line) for line in lines if line.startswith("|")) < 200  # a table a terminal shows


def test_the_page_needs_nothing_but_itself_and_carries_every_sample():
    record = compare_record.CompareRecord.model_validate(comparison())
    page = compare_page.page(record)
    # Nothing fetched: no script, no stylesheet or image from elsewhere (url(#id):
    # a chart's clip path, in the page itself).
    assert not re.search(r"<script|<link|<img|<iframe|src=|@import|url\((?!#)", page, re.I)
    dom = ReportPage.read(page)
    assert dom.charts == ["chart-ranking", *(f"chart-{key}" for key, _, _ in compare_charts.CHARTS)]
    for key, _, _ in compare_charts.CHARTS:
        lines = dom.lines_of(key)
        assert [(line["queue"], line["rep"], line["run"]) for line in lines] == [
            (s.queue, s.rep, s.run) for s in sorted(record.series, key=lambda s: record.queues.index(s.queue))
        ]
        for line in lines:
            series = next(s for s in record.series if s.run == line["run"])
            samples = getattr(series, key)
            assert line["values"] == samples and line["samples"] == len(samples)
            assert line["vertices"] == len(samples)  # the path draws every sample
            assert line["colour"] == compare_charts.colour(series.queue)
    cell = dom.cells[("saq", "p95_ms")]
    assert cell["text"].startswith("450[") and float(cell["data-median"]) == 450 and cell["data-n"] == "2"
    assert float(cell["data-low"]) < 400 and float(cell["data-high"]) > 500
    assert "data-rank-of='dramatiq'" in page


def test_a_chart_draws_the_median_of_a_queues_runs_at_each_instant():
    runs = [[[0.0, 10.0], [2.0, 20.0]], [[0.1, 30.0], [2.1, 40.0]], [[0.0, 20.0]]]
    assert compare_charts.median_line(runs, 2.0) == [[0.0, 20.0], [2.0, 30.0]]  # 2.0: two of three runs


def test_a_copy_of_the_page_keeps_one_queues_lines_only():
    page = compare_page.page(compare_record.CompareRecord.model_validate(comparison()))
    only = ReportPage.read(only_lines_of(page, "saq"))
    for key, _, _ in compare_charts.CHARTS:
        assert {line["queue"] for line in only.lines_of(key)} == {"saq"}
    blank = ReportPage.read(only_lines_of(page, None))
    assert not any(blank.lines_of(key) for key, _, _ in compare_charts.CHARTS)
    assert blank.cells == ReportPage.read(page).cells  # the table stays


def test_the_published_rows_only_beside_their_own_setting():
    arq = published.Row(rps=1.0, median_ms=2, p95_ms=3)
    rows = {"0.2cpu/200M": {"arq": arq}}
    beside = published.beside("0.2cpu/200M", "io/simple", 100, rows)
    # The enqueue table's rows, and BackgroundTasks' own table at 0.2 CPU for the same endpoint and users.
    assert beside is not None and beside.rows["arq"] == arq and beside.rows["background"].rps == 319
    assert published.beside("0.5cpu/500M", "io/simple", 100, rows) is None
    assert published.beside("0.2cpu/200M", "io/simple", 50, rows) is None
    thread = published.beside("0.2cpu/200M", "io/thread", 100, rows)
    assert thread is not None and thread.as_json()["rows"] == {
        "background": {"rps": 209, "median_ms": 400, "p95_ms": 600, "all_done_s": 245, "errors_pct": 0.0}
    }
    assert published.beside("0.2cpu/200M", "cpu/simple", 100, rows) is None  # the article ran it with 3 users
    assert set(published.RESULTS) == set(published.SETTINGS) and published.ARTICLE.source.url.startswith("https://habr")
    # The article's tables as it prints them (another machine's figures); a note only where it marks one.
    assert (
        published.RESULTS["0.2cpu/200M"]["arq"].rps == 227 and published.RESULTS["0.5cpu/500M"]["celery"].p95_ms == 59
    )
    assert "note" not in published.RESULTS["0.2cpu/200M"]["arq"].model_dump()
    assert published.RESULTS["0.2cpu/200M"]["saq"].model_dump()["note"].startswith("passed only")
    assert set(published.RESULTS["0.5cpu/500M"]) == set(published.QUEUES)


def test_a_comparison_shows_the_published_rows_of_its_setting_or_says_why_not(monkeypatch):
    """Both ways, whatever labctl/records/published.py holds today: a table transcribed
    for the comparison's setting is shown, one that is not is named."""
    # 0.2cpu/200M for the API and the workers, io/simple, 100 users
    record = compare_record.CompareRecord.model_validate(comparison())
    monkeypatch.setitem(published.RESULTS, "0.2cpu/200M", {})
    monkeypatch.setattr(published, "BACKGROUND", {})
    assert compare.published_beside(record.setting, record.params) == (
        None,
        "its table for 0.2cpu/200M is not transcribed in labctl/records/data/published_article.toml",
    )
    arq = published.Row(rps=1.0, median_ms=2, p95_ms=3)
    monkeypatch.setitem(published.RESULTS, "0.2cpu/200M", {"arq": arq})
    rows, why = compare.published_beside(record.setting, record.params)
    assert rows is not None and rows.rows == {"arq": arq} and why == ""
    other = record.params.model_copy(update={"users": 50})
    assert compare.published_beside(record.setting, other) == (
        None,
        "this comparison ran 0.2cpu/200M, io/simple, 50 users",
    )


def test_the_queues_and_parameters_a_comparison_takes(monkeypatch):
    # `all`: the queues make up started: those on Redis, and those of the broker profiles given.
    monkeypatch.delenv("COMPOSE_PROFILES", raising=False)
    on_redis = ["background", *(b.name for b in BROKERS if b.transport == "redis")]
    assert compare.parse_workers("") == on_redis == compare.parse_workers("all")
    monkeypatch.setenv("COMPOSE_PROFILES", "load,rabbitmq,postgres")
    assert compare.parse_workers("all") == list(QUEUES) and {"celery-rabbitmq", "pgqueuer"} <= set(QUEUES)
    assert compare.parse_workers("saq, arq saq") == ["saq", "arq"]
    with pytest.raises(ParamError, match="unknown kafka"):
        compare.parse_workers("arq kafka")
    # By default a run lasts a time, and its tasks are watched for a bounded time (the rest run by a one-off worker).
    default = compare.run_options(compare.CompareOptions(workers="arq"), "arq", "compare-1-arq-r1")
    assert (default.duration, default.iterations, default.wait, default.drain_watch) == (20.0, None, False, 10.0)
    quick = compare.CompareOptions(quick=True).quickened()
    assert (quick.duration_s, quick.rounds, quick.max_rounds, quick.budget_min) == (12.0, 2, 2, 10.0)
    quick = compare.CompareOptions(quick=True, rounds=4, duration_s=30).quickened()  # given: kept
    assert (quick.duration_s, quick.rounds, quick.max_rounds) == (30, 4, 4)
    options = compare.CompareOptions(workers="arq", requests=200)
    one = compare.run_options(options, "arq", "compare-1-arq-r1")
    assert (one.worker, one.iterations, one.duration, one.endpoint, one.users) == ("arq", 200, None, "io/simple", 100)
    compare.check_params(options, ["arq", "faststream"])
    bad_ones = (
        {"endpoint": "all"},
        {"endpoint": "io/nope"},
        {"rounds": 0},
        {"rounds": 4, "max_rounds": 3},
        {"budget_min": 0},
        {"duration_s": 6},
        {"setting": "other"},
    )
    for bad in bad_ones:
        with pytest.raises(ParamError):
            compare.check_params(compare.CompareOptions(**bad), ["arq"])
    assert compare.command_line(["arq"], compare.CompareOptions(requests=200, seed=7)) == (
        'make compare workers="arq" requests=200 rounds=3 max_rounds=8 budget_min=40 seed=7 users=100 endpoint=io/simple'
    )
    assert compare.command_line(list(QUEUES), compare.CompareOptions(setting="article", seed=1)) == (
        "make compare duration=20 rounds=3 max_rounds=8 budget_min=40 seed=1 users=100 endpoint=io/simple setting=article"
    )


def test_make_results_short_table_keeps_the_articles_columns_and_the_newest_runs():
    records = [load_record(f"r{i}", "saq", 100.0 + i, 300.0, 5.0) for i in range(3)]
    for i, record in enumerate(records):
        record["time"] = f"2026-01-0{i + 1}T00:00:00Z"
    runs = [RunRecord.model_validate(r) for r in records]
    table = run_table.table(runs, run_table.SHORT_COLUMNS, last=2).splitlines()
    assert table[0] == (
        "| worker | RPS | median ms | p95 ms | all tasks done s | errors % | scenario | endpoint "
        "| API / worker limits | notes | run |"
    )
    assert [line.split("|")[-2].strip() for line in table[2:]] == ["r1", "r2"]
    assert "| saq | 102 | 150 | 300 | 5 | 0 | queue | io/simple | 0.2cpu/200M / 0.2cpu/200M |" in table[-1]


def test_make_compare_agree_says_whether_two_comparisons_give_the_same_answer(tmp_path):
    def save(name: str, figures: dict[str, list[float]]) -> None:
        runs = [
            {"queue": q, "rep": i, "run": f"{name}-{q}-{i}", "rps": v}
            for q, vs in figures.items()
            for i, v in enumerate(vs)
        ]
        Store(tmp_path).save(compare_record.CompareRecord(run=name, time=name, runs=runs))

    save("compare-a", {"fast": [200, 202, 198], "slow": [100, 101, 99]})
    # A shift the tight runs show, smaller than within_pct.
    save("compare-b", {"fast": [195, 197, 193], "slow": [103, 104, 102]})
    save("compare-c", {"fast": [100, 101, 99], "slow": [200, 202, 198]})
    # slow's medians farther apart than within_pct (100 over 80), its runs spread so wide that
    # the shift is not shown: more rounds, not another answer.
    save("compare-d", {"fast": [199, 201, 200], "slow": [80, 125, 60]})
    # The same gap, by a shift its runs show.
    save("compare-e", {"fast": [199, 201, 200], "slow": [80, 81, 79]})
    said: list[str] = []
    ui = type("UI", (), {"say": lambda self, text: said.append(text)})()
    assert agree.agree(tmp_path, "compare-a", "compare-b", ui) == 0
    assert "called the other way round by the other: none" in said[-1]
    assert "More than 10 % apart: none" in said[-1]
    assert agree.agree(tmp_path, "compare-a", "compare-c", ui) == 1
    assert "fast faster than slow" in said[-1]
    assert agree.agree(tmp_path, "compare-a", "compare-d", ui) == 0
    assert "More than 10 % apart: slow; of those, by a shift the runs show (its interval excludes 1): none" in said[-1]
    assert (
        "| slow | 100 [97.5–103] (n=3) | 80 [33.7–211] (n=3) | 25.0 | 0.80 [0.34–2.11] no difference shown |"
        in said[-1]
    )
    assert agree.agree(tmp_path, "compare-a", "compare-e", ui) == 1
    assert "of those, by a shift the runs show (its interval excludes 1): slow" in said[-1]
    assert agree.agree(tmp_path, "compare-a", "compare-d", ui, within_pct=25) == 0
    assert agree.agree(tmp_path, "compare-a", "compare-e", ui, within_pct=25) == 0
    with pytest.raises(LabError, match="no comparison compare-x"):
        agree.agree(tmp_path, "compare-a", "compare-x", ui)


def test_the_comparison_shows_each_queues_latest_capacity_with_its_limits(tmp_path):
    """setting.latest_capacity reads the results directory's make capacity records, the
    newest winning per queue; the markdown and the page show them, and say so when none."""
    from labctl.experiments.compare.setting import latest_capacity
    from labctl.records.capacity import CapacityRecord, QueueCapacity

    def capacity(base: str, when: str, saq: float, limits: str) -> CapacityRecord:
        api, worker = limits.split(" / ")
        result = QueueCapacity(
            sustained_rate=stats.estimate([saq, saq * 1.04, saq * 0.97]).as_json(),
            bracket=[saq, saq * 1.08],
            limited_by="worker",
            tasks_per_cpu=saq / 0.2,
        )
        return CapacityRecord(base=base, time=when, queues={"saq": result}, params={"max_wait_s": 5.0},
                              api_limits=api, worker_limits=worker)  # fmt: skip

    store = Store(tmp_path)
    store.save(capacity("capacity-old", "2026-11-28T10:00:00Z", 40.0, "0.5cpu/500M / 0.5cpu/500M"))
    store.save(capacity("capacity-new", "2026-11-29T10:00:00Z", 20.0, "0.2cpu/200M / 0.2cpu/200M"))
    found = latest_capacity(store, ["saq", "dramatiq"])
    assert list(found) == ["saq"] and found["saq"].record == "capacity-new", found
    assert found["saq"].limits == "0.2cpu/200M / 0.2cpu/200M" and found["saq"].bracket == [20.0, 21.6]

    record = compare_record.CompareRecord.model_validate({**comparison(), "capacity": found})
    row = next(line for line in compare_table.markdown(record).splitlines() if line.startswith("| saq | 20 ["))
    assert "| 20 – 21.6 | worker | 100 | 5 | 0.2cpu/200M / 0.2cpu/200M | capacity-new |" in row, row
    assert "<table id='capacity'>" in compare_page.page(record)
    empty = compare_page.page(compare_record.CompareRecord.model_validate(comparison()))
    assert "No <code>make capacity</code> record" in empty and "capacity=1" in empty
