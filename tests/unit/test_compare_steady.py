"""`make compare` in steady state: a run's RPS over its steady part from its
ledger timeline, a slow drain's time projected from the rate it held and its
backlog run by another worker with every task still counted, the charts over
the middle of a run, the spread over the reps, and the published experiment's
two settings with the ratios between queues. Records built by the functions a
real run uses (labctl/records/run_build.py); the real runs: tests/compose/test_compare.py."""

import pytest

from labctl.experiments import compare
from labctl.records import compare as compare_record
from labctl.records import compare_figures, compare_run, published
from labctl.records.run import RunRecord
from labctl.records.run_build import RunInputs, build_run_record
from labctl.render import article_page, compare_table, compare_text

MiB = 1 << 20
LIMITS = {"cpus": 0.2, "memory": "200M", "memory_bytes": 200 * MiB, "replicas": 1}


def timeline(start: float, seconds: int, warm_rate: float, rate: float, done_rate: float) -> dict:
    """A ledger once a second: `warm_rate` requests a second for the first 5 s, then `rate`."""
    rows, enqueued = [], 0.0
    for t in range(seconds + 1):
        completed = min(enqueued, done_rate * t)
        rows.append([start + t, enqueued, completed, 0, enqueued - completed])
        enqueued += warm_rate if t < 5 else rate
    return {"fields": ["at", "enqueued", "completed", "failed", "pending"], "rows": rows}


def run_record(queue: str, rate: float, done_rate: float, draining: bool) -> dict:
    """30 s of load from t=1000: a rate of 20 while warming, then `rate`."""
    tl = timeline(1000.0, 30, 20.0, rate, done_rate)
    enqueued = int(tl["rows"][-1][1])
    completed = int(tl["rows"][-1][2])
    ledger = {
        "totals": {"enqueued": enqueued, "completed": completed if draining else enqueued, "failed": 0, "duplicates": 0,
                   "pending": enqueued - completed if draining else 0},
        "first_enqueued_at": 1000.0, "last_settled_at": 1030.0 if draining else 1032.0,
    }  # fmt: skip
    watch = {"backlog": enqueued - completed, "rate_per_s": done_rate, "watch_ended_at": 1060.0}
    return build_run_record(
        RunInputs(
            params={"run": f"c-{queue}", "scenario": "queue", "worker": queue, "endpoint": "io/simple", "users": 100,
                    "spawn_rate": 100, "iterations": None, "duration_target_s": 30.0},
            locust={"requests": enqueued, "failures": 0, "first_request_at": 1000.0, "last_response_at": 1030.0,
                    "status_codes": {"202": enqueued}, "median_ms": 100, "p95_ms": 200},
            ledger=ledger, settled=not draining, draining=watch if draining else None,
            limits={"api": LIMITS, "workers": {queue: {**LIMITS, "concurrency": 3}}}, knobs={},
            resources={queue: {"peak_memory_bytes": 80 * MiB}, "api": {"peak_memory_bytes": 90 * MiB}},
            probe=None, locust_workers=2, subjects=[queue],
            extra={"timeline": tl, "window_end": 1060.0 if draining else 1032.0},
        )
    ).as_json()  # fmt: skip


def test_the_rps_is_the_steady_parts_not_the_warm_ups():
    record = run_record("saq", rate=300.0, done_rate=300.0, draining=False)
    # The whole load's rate carries the slow start; the steady part's is the run's own.
    assert record["rps"] < 280
    assert compare_run.steady_rps(record, warmup_s=5) == 300.0
    row = compare_run.run_row(record, "saq", 1, {"saq": 1.0, "api": 1.0}, warmup_s=5, window_end=1032.0)
    assert (row.rps, row.rps_whole_load, row.all_done_projected) == (300.0, record["rps"], False)
    # A record without a timeline (written before it existed): the whole load's rate.
    del record["timeline"]
    assert compare_run.steady_rps(record, 5) is None
    assert compare_run.run_row(record, "saq", 1, {}, warmup_s=5).rps == record["rps"]


def test_the_rps_is_read_from_the_scraped_counter_where_the_record_has_it():
    record = run_record("saq", rate=300.0, done_rate=300.0, draining=False)
    # The API's counter scraped every 2 s: 20 a second while warming (to t=5), then 330 a second;
    # the ledger's timeline says 300, as if read through a loaded API that answered late.
    scrapes = [[999.0 + t, 0.0] for t in (0,)] + [
        [1000.0 + t, 20.0 * min(t, 5) + 330.0 * max(0, t - 5)] for t in range(1, 34, 2)
    ]
    record["enqueued_scrapes"] = {"source": 'lab_enqueued_total{job="api",queue=~"saq"}', "rows": scrapes}
    # From the first scrape at or after 1005 (t=7) to the last at or before 1029 (t=29).
    assert compare_run.steady_rps(record, warmup_s=5) == 330.0
    assert compare_run.run_row(record, "saq", 1, {}, warmup_s=5).rps == 330.0
    # Fewer than two scrapes in the steady part: no figure, not the timeline's.
    record["enqueued_scrapes"]["rows"] = [r for r in scrapes if not 1005 <= r[0] <= 1028]
    assert compare_run.steady_rps(record, warmup_s=5) is None
    del record["enqueued_scrapes"]
    assert compare_run.steady_rps(record, warmup_s=5) == 300.0  # an older record: its timeline


def test_a_slow_drain_is_projected_and_its_backlog_counted_whole_once_emptied():
    record = RunRecord.model_validate(run_record("arq", rate=300.0, done_rate=10.0, draining=True))
    assert record.is_draining()
    enqueued = record.tasks.enqueued
    ledger = {
        "totals": {"enqueued": enqueued, "completed": enqueued, "failed": 0, "duplicates": 2, "pending": 0},
        "first_enqueued_at": 1000.0, "last_settled_at": 1100.0,
    }  # fmt: skip
    record.emptied(ledger, "a one-off arq worker")
    tasks = record.tasks
    # Every task counted, duplicates too; no time to run them all (it would be the one-off's).
    assert (tasks.completed, tasks.duplicates, tasks.lost, tasks.settled) == (enqueued, 2, 0, True)
    assert tasks.time_to_execute_all_s is None and tasks.emptied_by == "a one-off arq worker"
    assert not record.is_draining() and not record.unsettled()
    data = record.as_json()
    # From the first enqueue: 60 s until the watch ended, then the backlog at the rate it held.
    backlog = data["tasks"]["draining"]["backlog"]
    assert compare_run.projected_all_done(data) == round(60 + backlog / 10.0, 1)
    row = compare_run.run_row(data, "arq", 1, {"arq": 0.3, "api": 1.0}, warmup_s=5, window_end=1030.0)
    assert row.all_done_projected and row.all_done_s == compare_run.projected_all_done(data)
    assert row.drain_rate_per_s == 10.0 and row.lost == 0
    # The worker's CPU up to the end of the watch, over the tasks it had run by then (the timeline's).
    assert row.cpu_ms_per_task == round(0.3 * 1000 / compare_run.completed_by(data, 1030.0), 3)
    record = compare_record.CompareRecord(run="c", runs=[row])
    assert record.summary["arq"]["all_done_s"]["projected"] is True
    shown = compare_text.figure(record, "arq", "all_done_s")
    assert shown.startswith("~") and shown.endswith("projected")


def test_the_machines_speed_is_read_over_the_same_part_of_the_load_as_the_rps():
    record = run_record("saq", rate=300.0, done_rate=300.0, draining=False)
    # A unit timed at 2 (milliseconds) in the warm-up and after the load, at 1 in the steady part
    # (t=1005 to 1029), where two timings also waited for a core (40): the median leaves them out.
    rows = [[1000.0 + t / 5, 2.0 if t < 25 or t > 145 else 1.0] for t in range(0, 175)]
    rows += [[1010.1, 40.0], [1020.1, 40.0]]
    record["machine_speed"] = {"unit": "test", "rows": rows}
    assert RunRecord.model_validate(record).machine_speed.units_per_s(1005.0, 1029.0) == 1000.0
    row = compare_run.run_row(record, "saq", 1, {}, warmup_s=5, window_end=1032.0)
    assert row.machine_speed == 1000.0
    # Over the whole load for a run of a request count, 1000 to 1030, where most timings are 1.
    assert compare_run.run_row(record, "saq", 1, {}).machine_speed == 1000.0
    # With none in the steady part, none; the whole load then holds only the timings of 2.
    record["machine_speed"]["rows"] = [r for r in rows if r[0] < 1005 or r[0] > 1029]
    assert compare_run.run_row(record, "saq", 1, {}, warmup_s=5).machine_speed is None
    assert compare_run.run_row(record, "saq", 1, {}).machine_speed == 500.0
    # Over the runs, in the lab's table: the median of the runs' speeds.
    other = compare_run.run_row(run_record("saq", 330.0, 330.0, False), "saq", 2, {}, warmup_s=5)
    assert other.machine_speed is None  # a record without the probe (written before it)
    runs = [row, other.model_copy(update={"machine_speed": 900.0})]
    params = {"endpoint": "io/simple", "users": 100, "duration_s": 30, "warmup_s": 5}
    record = compare_record.CompareRecord(run="c", params=params, setting={"limits": {}}, runs=runs)
    assert record.figure("saq", "machine_speed").median == 950.0
    lines = compare_table.markdown(record).splitlines()
    header = next(line for line in lines if line.startswith("| queue | worker CPU"))
    saq = lines[lines.index(header) + 2]
    assert header.endswith("| machine speed |") and "| 950 [" in saq


def test_the_charts_are_read_over_the_middle_of_the_load():
    run = RunRecord.model_validate(run_record("saq", 300.0, 300.0, draining=False))
    samples = [[float(t), 0.0 if t < 15 else 300.0] for t in range(-4, 40, 2)]
    # From when the 10 s window lies past the 5 s warm-up (t=15) to the load's end (t=30).
    assert compare.middle_rate(samples, run, warmup_s=5) == 300.0
    assert compare.middle_rate([[1.0, 5.0]], run, warmup_s=5) is None


def test_the_ratios_between_queues_in_the_articles_rows_and_in_the_runs():
    rows = published.RESULTS["0.2cpu/200M"]
    assert compare_figures.ratios_to(rows, "faststream")["celery"] == round(151 / 262, 2)
    assert compare_figures.ratios_to(rows, "faststream", "all_done_s")["celery"] is None  # the article gives none
    assert compare_figures.ratios_to(rows, "kafka") == dict.fromkeys(rows)
    # From the runs: the ratio of the medians with its interval.
    figures = {"faststream": (200, 210, 190), "arq": (100, 98)}
    runs = [
        compare_run.CompareRun(queue=q, rep=i, run=f"{q}-{i}", rps=v)
        for q, values in figures.items()
        for i, v in enumerate(values, 1)
    ]
    ratio = compare_figures.run_ratios_to(runs, "faststream")["arq"]
    assert ratio.value == pytest.approx(99 / 200) and ratio.high < 1 and ratio.verdict == "slower"


def test_the_articles_settings_as_compose_variables():
    env = compare.article_env("0.5cpu/500M")
    assert env == {
        "API_CPUS": "0.5",
        "API_MEM": "500M",
        "WORKER_CPUS": "0.5",
        "WORKER_MEM": "500M",
        "ARQ_MAX_JOBS": "1",
        "SAQ_CONCURRENCY": "1",
        "CELERY_CONCURRENCY": "1",
    }
    assert [compare.article_env(s)["WORKER_CPUS"] for s in published.SETTINGS] == ["0.2", "0.5"]


def test_the_article_page_puts_each_setting_beside_the_articles_table():
    parts = []
    for setting, rps in (("0.2cpu/200M", 500.0), ("0.5cpu/500M", 1200.0)):
        rows = [
            compare_run.run_row(run_record(q, rps * f * noise, rps * f * noise, False), q, rep, {}, warmup_s=5)
            for q, f in (("faststream", 1.0), ("arq", 0.8))
            for rep, noise in ((1, 0.98), (2, 1.0), (3, 1.02))
        ]
        parts.append(
            compare_record.CompareRecord(
                run=f"compare-article-x-{setting.replace('/', '-')}",
                params={"endpoint": "io/simple", "users": 100, "duration_s": 30, "warmup_s": 5},
                setting={"limits": {"api": LIMITS, "workers": {}}},
                published=published.beside(setting, "io/simple", 100),
                runs=rows,
            )
        )
    record = compare_record.ArticleRecord(
        run="compare-article-x", time="t", command="make compare setting=article", parts=parts
    )
    text = article_page.article_markdown(record)
    assert "0.2cpu/200M" in text and "0.5cpu/500M" in text
    arq_row = next(line for line in text.splitlines() if line.startswith("| arq |") and "| 1114 |" in line)
    # The lab's ratio with its interval (0.8 each round), the article's, and whether it lies inside.
    assert "| 0.80 [" in arq_row and f"| {round(1114 / 1178, 2)} | no |" in arq_row
    page = article_page.article_page(record)
    assert page.count("class='article-setting'") == 2 and 'data-article="rps">1114<' in page
