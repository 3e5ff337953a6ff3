"""`make capacity` without a stack (labctl/experiments/capacity.py,
labctl/records/capacity.py, labctl/render/capacity_page.py): a step's verdict
from a run record built as a load run writes it, the search against a queue of
known capacity (a model of one: sustained below it, not above), the result and
its page, and every bad option refused before anything starts."""

import json
import re

import pytest

from labctl.errors import ParamError
from labctl.experiments import capacity as C
from labctl.load_run.options import LoadOptions
from labctl.records.capacity import CapacityParams, CapacityRecord, Step, judge, saturated_rate
from labctl.records.run import RunRecord
from labctl.records.store import parse
from labctl.render import capacity_page

T0 = 1_800_000_000.0


def run_record(
    rate: float, throughput: float, *, seconds: int = 30, p95_wait: float = 0.4, jitter: int = 3, **over
) -> RunRecord:
    """A queue run at `rate` whose worker completes at most `throughput` tasks/s: the
    ledger's timeline once a second, with the jitter of tasks fetched in batches."""
    rows, done = [], 0.0
    for i in range(seconds + 1):
        enqueued = rate * i
        done = min(enqueued, done + throughput)
        shown = max(0.0, done - (jitter if i % 2 else 0))
        rows.append([T0 + i, enqueued, shown, 0, enqueued - shown])
    data = {
        "run": f"cap-{rate:g}",
        "rps": rate,
        "late_sends_pct": 0.0,
        "load_started_at": T0,
        "load_ended_at": T0 + seconds,
        "tasks": {"enqueued": int(rate * seconds), "completed": int(rate * seconds), "settled": True},
        "timeline": {"fields": ["at", "enqueued", "completed", "failed", "pending"], "rows": rows},
        "task_times": {"arq": {"wait": {"p50": p95_wait / 2, "p95": p95_wait}, "latency": {"p95": p95_wait}}},
        "resources": {
            "arq": {"cpu_used_cores": 0.15, "cpu_limit_cores": 0.2},
            "api": {"cpu_used_cores": 0.05, "cpu_limit_cores": 0.2},
        },
        "generator": {"cpu_bound": False},
    }
    data.update(over)
    return RunRecord.model_validate(data)


def test_a_step_the_worker_keeps_up_with_is_sustained_despite_the_jitter():
    step = judge(run_record(8, 10), "arq", 8, 5.0)
    assert step.sustained and step.limited_by is None, step.reasons
    assert step.throughput_half == pytest.approx(8, abs=0.5)
    assert (step.api_cpu, step.worker_cpu, step.worker_cpu_limit) == (0.05, 0.15, 0.2)


def test_a_backlog_that_grows_faster_than_the_bound_is_the_workers_limit():
    step = judge(run_record(12, 10), "arq", 12, 5.0)
    assert not step.sustained and step.limited_by == "worker", step
    assert step.backlog_slope == pytest.approx(2, abs=0.3) and step.backlog_slope_low > step.slope_bound
    assert step.throughput_half == pytest.approx(10, abs=0.5)  # what the worker does, saturated


def test_a_backlog_growing_past_the_bound_is_not_sustained_however_noisy_its_readings():
    """The slope is compared with the bound, not the low end of its interval: a queue a
    tenth short of its rate is not given the benefit of the doubt its jitter would lend."""
    step = judge(run_record(10, 9.0, jitter=12), "arq", 10, 5.0)
    assert step.backlog_slope > step.slope_bound > step.backlog_slope_low, step  # the interval holds the bound
    assert not step.sustained and step.limited_by == "worker", step


def test_the_rate_taken_is_read_over_the_second_half_not_the_users_start():
    """A whole load's rate is short of the rate asked by the seconds its users took to
    start; the API kept up when its second half took the rate asked."""
    step = judge(run_record(200, 400, rps=186.0), "arq", 200, 5.0)
    assert step.sustained and step.sent_half == pytest.approx(200, abs=1), step
    assert judge(run_record(180, 400, rps=186.0), "arq", 200, 5.0).limited_by == "api"


def scrapes(rate: float, seconds: int = 30) -> dict:
    """The API's enqueue counter as Prometheus scraped it every 2 s, taking `rate` a second."""
    return {"source": "lab_enqueued_total", "rows": [[T0 + i, rate * i] for i in range(0, seconds + 1, 2)]}


def test_the_rate_taken_is_the_scraped_counters_where_the_record_has_it():
    """The ledger's timeline is read through the loaded API and can lag it; the
    counter Prometheus scraped says what the API took."""
    lagging = judge(run_record(200, 400, enqueued_scrapes=scrapes(180)), "arq", 200, 5.0)
    assert lagging.limited_by == "api" and lagging.sent_half == pytest.approx(180), lagging
    kept = judge(run_record(170, 400, enqueued_scrapes=scrapes(200)), "arq", 200, 5.0)
    assert kept.sent_half == pytest.approx(200) and kept.limited_by != "api", kept


def test_a_wait_over_max_wait_is_the_workers_limit_and_under_it_is_not():
    assert judge(run_record(8, 10, p95_wait=6.0), "arq", 8, 5.0).limited_by == "worker"
    assert judge(run_record(8, 10, p95_wait=6.0), "arq", 8, 10.0).sustained


def test_what_stops_a_step_first_errors_then_the_generator_then_the_api():
    assert judge(run_record(8, 10, failures=3), "arq", 8, 5.0).limited_by == "errors"
    unsettled = run_record(8, 10, tasks={"enqueued": 240, "completed": 200, "settled": False})
    assert judge(unsettled, "arq", 8, 5.0).limited_by == "errors"
    assert judge(run_record(8, 10, generator={"cpu_bound": True}), "arq", 8, 5.0).limited_by == "generator"
    assert judge(run_record(7, 10), "arq", 8, 5.0).limited_by == "api"  # under 95 % of the rate taken
    assert judge(run_record(8, 10, late_sends_pct=12.0), "arq", 8, 5.0).limited_by == "api"
    # The share late over the schedule's second half where the record has it: the users'
    # start, late over the whole step, is left out, and a late second half still counts.
    started_late = run_record(8, 10, late_sends_pct=12.0, late_sends_steady_pct=1.0)
    assert judge(started_late, "arq", 8, 5.0).sustained
    assert judge(run_record(8, 10, late_sends_pct=3.0, late_sends_steady_pct=9.0), "arq", 8, 5.0).limited_by == "api"
    no_timeline = run_record(8, 10, timeline=None)
    assert judge(no_timeline, "arq", 8, 5.0).limited_by == "worker"  # never sustained on nothing


def model_queue(capacity: float, limit: str = "worker"):
    """try_rate for a queue that sustains every rate up to `capacity` and none above."""
    asked: list[float] = []

    def try_rate(rate: float) -> Step:
        asked.append(rate)
        ok = rate <= capacity
        return Step(queue="q", rate=rate, run=f"r{rate}", sustained=ok, limited_by=None if ok else limit)

    return try_rate, asked


@pytest.mark.parametrize("capacity", [0.7, 3.0, 7.5, 41.0, 333.0, 1999.0])
def test_the_search_brackets_the_capacity_within_the_precision(capacity):
    try_rate, asked = model_queue(capacity)
    steps = C.search(try_rate, 5.0, 2000.0, 10.0)
    lo, hi = C.bracket(steps)
    assert lo is not None and lo <= capacity, (asked, lo, hi)
    if hi is not None:
        assert capacity < hi and (hi - lo) / lo <= 0.10, (asked, lo, hi)
    else:
        assert lo == 2000.0  # sustained at max_rate: no rate above it was tried
    assert len(asked) == len(set(asked)) <= 20  # no rate twice, and a bounded number of steps


@pytest.mark.parametrize("start", [20.0, 40.0, 41.0, 45.0, 90.0])
def test_a_later_search_walks_from_the_first_ones_rate_to_the_same_precision(start):
    try_rate, asked = model_queue(41.0)
    steps = C.walk(try_rate, start, 2000.0, 10.0)
    lo, hi = C.bracket(steps)
    assert lo is not None and hi is not None and lo <= 41.0 < hi and hi / lo <= 1.101, (
        asked,
        lo,
        hi,
    )  # rates go to 0.01
    assert asked[0] == start and len(asked) == len(set(asked))
    # Each step but the last keeps the first one's verdict: no more steps than the way from the start takes.
    assert [s.sustained for s in steps[:-1]] == [steps[0].sustained] * (len(steps) - 1)


def test_a_walk_stops_at_max_rate_and_at_the_generators_limit():
    try_rate, asked = model_queue(1999.0)
    steps = C.walk(try_rate, 1900.0, 2000.0, 10.0)
    assert asked == [1900.0, 2000.0] and C.bracket(steps) == (1900.0, 2000.0)
    try_rate, asked = model_queue(5000.0)
    assert C.bracket(C.walk(try_rate, 1900.0, 2000.0, 10.0)) == (2000.0, None) and asked == [1900.0, 2000.0]

    def generator_bound(rate: float) -> Step:
        ok = rate < 100
        return Step(queue="q", rate=rate, run="r", sustained=ok, limited_by=None if ok else "generator")

    assert [s.rate for s in C.walk(generator_bound, 90.0, 2000.0, 10.0)] == [90.0, 99.0, 108.9]


def test_later_searches_start_at_the_queues_first_result():
    steps = []
    for rep, capacity in ((1, 40.0), (2, 44.0), (3, 38.0)):
        try_rate, _ = model_queue(capacity)
        if rep == 1:
            run = C.search(try_rate, 5.0, 2000.0, 10.0)
        else:
            run = C.walk(try_rate, C.first_found(steps, "q"), 2000.0, 10.0)
        steps += [s.model_copy(update={"rep": rep}) for s in run]
    first = C.first_found(steps, "q")
    assert first is not None and first <= 40.0 and [s.rate for s in steps if s.rep > 1][:1] == [first]
    est = C.summarize(steps).sustained_rate
    assert est["n"] == 3 and est["low"] < est["median"] < est["high"], est


def test_target_pct_searches_again_only_the_queues_whose_interval_is_wide():
    """With target_pct=10: a queue whose searches agree stops (within); one whose searches
    spread is searched again, until max_reps."""
    record = CapacityRecord(base="c", queues_asked=["tight", "loose"])

    def searched(queue: str, capacity: float) -> None:
        rep = len([o for o in record.order if queue in o]) + 1
        record.order.append([queue])
        try_rate, _ = model_queue(capacity)
        earlier = C.first_found(record.steps, queue)
        run = C.walk(try_rate, earlier, 2000.0, 10.0) if earlier else C.search(try_rate, 5.0, 2000.0, 10.0)
        record.steps += [s.model_copy(update={"queue": queue, "rep": rep}) for s in run]

    searched("tight", 40.0)
    searched("loose", 40.0)
    # One search each: no interval yet, so both are searched again.
    assert C.still_wide(record, 10.0, 4) == ["tight", "loose"]
    searched("tight", 40.0)
    searched("loose", 20.0)
    assert C.why_stopped(record, "tight", 10.0, 4) == C.WITHIN
    assert C.still_wide(record, 10.0, 4) == ["loose"]
    searched("loose", 60.0)
    searched("loose", 30.0)
    assert C.searches(record, "loose") == 4 and C.why_stopped(record, "loose", 10.0, 4) == C.AT_CAP
    assert C.still_wide(record, 10.0, 4) == []
    record.params = CapacityParams(target_pct=10.0, max_reps=4)
    record.stopped = {q: C.why_stopped(record, q, 10.0, 4) for q in record.queues_asked}
    assert "+-10 % (at most 4; not within: loose (max_reps))" in capacity_page.target_text(record)
    with pytest.raises(ParamError, match="target_pct=0"):
        C.CapacityOptions(workers="arq", target_pct=0).parse(LoadOptions())
    with pytest.raises(ParamError, match="max_reps=2"):
        C.CapacityOptions(workers="arq", reps=3, target_pct=10, max_reps=2).parse(LoadOptions())


def test_a_queue_that_sustains_nothing_has_no_rate_and_a_generator_short_of_cpu_ends_the_search():
    try_rate, asked = model_queue(0.1)
    assert C.bracket(C.search(try_rate, 5.0, 2000.0, 10.0)) == (None, 0.62)  # 5 halved three times
    assert min(asked) >= C.MIN_RATE

    def generator_bound(rate: float) -> Step:
        ok = rate < 20
        return Step(queue="q", rate=rate, run="r", sustained=ok, limited_by=None if ok else "generator")

    steps = C.search(generator_bound, 5.0, 2000.0, 10.0)
    assert [s.rate for s in steps] == [5.0, 10.0, 20.0] and C.bracket(steps) == (10.0, None)


def test_a_queues_result_over_its_searches_and_its_checks():
    steps = []
    for rep, capacity in ((1, 40.0), (2, 44.0), (3, 42.0)):
        try_rate, _ = model_queue(capacity)
        steps += [s.model_copy(update={"rep": rep}) for s in C.search(try_rate, 5.0, 2000.0, 10.0)]
    steps += [
        Step(queue="q", rate=33.0, run="c1", phase="check", factor=0.8, sustained=True),
        Step(queue="q", rate=54.0, run="c2", phase="check", factor=1.3, sustained=False, limited_by="worker"),
    ]
    result = C.summarize(steps)
    est = result.sustained_rate
    assert est["n"] == 3 and est["low"] < est["median"] < est["high"], est
    assert result.limited_by == "worker" and result.bracket[0] <= 42.0 < result.bracket[1]
    assert result.checks == {"0.8x": True, "1.3x": False, "passed": True}


def test_the_saturated_rate_comes_from_the_steps_whose_backlog_grew():
    grew = [judge(run_record(r, 10), "arq", r, 5.0) for r in (12, 16, 20)]
    kept = judge(run_record(8, 10, p95_wait=9.0), "arq", 8, 5.0)  # over max_wait, but no backlog to work on
    est = saturated_rate([*grew, kept])
    assert est.n == 3 and est.median == pytest.approx(10, abs=0.5)


def test_the_record_reads_back_and_its_page_shows_the_table_and_each_queues_chart():
    try_rate, _ = model_queue(9.0)
    steps = [
        s.model_copy(update={"queue": "arq", "wait_p95_s": 0.2 if s.sustained else 30.0})
        for s in C.search(try_rate, 5.0, 2000.0, 10.0)
    ]
    record = CapacityRecord(
        base="capacity-x",
        queues_asked=["arq"],
        params={
            "endpoint": "io/simple",
            "step_s": 30.0,
            "max_wait_s": 5.0,
            "precision_pct": 10.0,
            "reps": 1,
            "seed": 1,
        },
        steps=steps,
        queues={"arq": C.summarize(steps)},
        wall_s=600,
    )
    again = parse(json.loads(json.dumps(record.as_json())))
    assert isinstance(again, CapacityRecord) and again.queues["arq"].bracket == record.queues["arq"].bracket
    page = capacity_page.html_page(again)
    row = next(line for line in capacity_page.markdown(again).splitlines() if line.startswith("| arq"))
    assert "| worker |" in row and f"{again.queues['arq'].bracket[0]:g}" in row, row
    samples = json.loads(re.search(r"id=\"wait-arq\" data-queue='arq' data-samples='([^']+)'", page).group(1))
    assert sorted(samples) == sorted([s.rate, s.wait_p95_s] for s in steps)


@pytest.mark.parametrize(
    "given, load, says",
    [
        ({"max_wait": "soon"}, {}, "max_wait='soon'"),
        ({"max_wait": "0s"}, {}, "max_wait='0s'"),
        ({"step": "-3s"}, {}, "step='-3s'"),
        ({"start": 0.0}, {}, "start=0"),
        ({"max_rate": 5000.0}, {}, "max_rate=5000"),
        ({"precision": 0.0}, {}, "precision=0"),
        ({"reps": 0}, {}, "reps=0"),
        ({"workers": "kafka"}, {}, "unknown kafka"),
        ({}, {"rate": 40.0}, "the search's own"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(given, load, says):
    with pytest.raises(ParamError, match=re.escape(says)):
        C.CapacityOptions(**{"workers": "arq", **given}).parse(LoadOptions(**load))


def test_a_wait_may_be_given_in_milliseconds():
    assert C.CapacityOptions(workers="arq", max_wait="500ms").parse(LoadOptions()).max_wait_s == 0.5


def test_a_record_without_some_parameters_renders_them_as_none_given():
    """A capacity record that holds only some of its parameters (one written before they
    were recorded) still renders: the missing ones read `-`."""
    record = CapacityRecord.model_validate(
        {"base": "capacity-old", "params": {"max_wait_s": 5.0}, "queues_asked": ["saq"]}
    )
    line = capacity_page.summary_line(record)
    assert "steps of 0 s, max_wait 5 s, precision - %" in line
    assert "capacity-old" in capacity_page.html_page(record) and "capacity-old" in capacity_page.markdown(record)
