"""How make load ends: the run in at most 13 lines (labctl/render/run_summary.py), read
from the committed sample records, settled and still draining."""

import json
from pathlib import Path

from labctl.records.run import RunRecord
from labctl.render import run_summary

RECORDS = Path(__file__).parent / "records"


def sample(name: str, **changes) -> RunRecord:
    data = json.loads((RECORDS / name).read_text())
    for key, value in changes.items():
        data[key] = value
    return RunRecord.model_validate(data)


def test_a_settled_run_in_a_dozen_lines():
    times = {"faststream": {"wait": {"p50": 0.004, "p95": 0.02, "p99": 0.3}, "latency": {"p95": 0.51}}}
    record = sample("run-1.json", task_times=times, warnings=["one", "two", "three"])
    out = run_summary.lines(record, f"results/{record.run}.json", "http://127.0.0.1:3000/d/lab-queues")
    assert len(out) <= 13, out
    text = "\n".join(out)
    assert out[0].startswith(f"run {record.run}: worker=faststream endpoint=io/simple, 100 users")
    assert "649 req/s: 15000 requests, 0 failed" in text
    assert "median 170 ms, p95 270 ms, p99 300 ms" in text
    assert "15000 enqueued: 15000 done, 0 failed, 0 pending, 0 lost, 0 run twice" in text
    assert "every task done 33.0 s after the first enqueue" in text
    assert "faststream 39 MB of 0.2cpu/200M" in text and "api 95 MB" in text
    assert "  wait     faststream to start p50 4 ms, p95 20 ms; to done p95 0.51 s" in text
    assert f"results/{record.run}.json (every column: make results full=1)" in text
    assert text.endswith("Grafana  http://127.0.0.1:3000/d/lab-queues")


def test_a_run_still_draining_says_how_much_is_left_and_when():
    base = json.loads((RECORDS / "run-1.json").read_text())
    tasks = dict(base["tasks"], completed=9000, settled=False, time_to_execute_all_s=None, drain_s=None)
    tasks["draining"] = {
        "backlog": 6000,
        "rate_per_s": 50.0,
        "projected_empty_s": 120.0,
        "watch_ended_at": 1795858200.0,
    }
    record = sample("run-1.json", tasks=tasks)
    assert record.is_draining()
    text = "\n".join(run_summary.lines(record, "results/x.json"))
    assert "9000 done, 0 failed, 6000 pending" in text
    assert "still draining at 50 tasks/s: 6000 left, empty in about 2 min" in text
    assert "Grafana" not in text


def test_warnings_beyond_two_point_to_the_full_record():
    record = sample("run-1.json", warnings=[f"warning {i}" for i in range(5)])
    out = run_summary.lines(record, "results/x.json")
    assert len(out) <= 13, out
    assert [line for line in out if "WARNING" in line] == [
        "  WARNING  warning 0",
        "  WARNING  and 4 more: make results full=1",
    ]


def test_the_tables_notes_say_where_a_swarm_ran_it_and_the_locust_report_shares_the_record_line():
    platform = {"orchestrator": "swarm", "stack": "lab", "nodes": 3, "placement": {"api": ["n1"], "faststream": ["n2"]}}
    record = sample("run-1.json", platform=platform, locust_report=["r.html", "r.csv"])
    out = run_summary.lines(record, "results/x.json")
    assert "  notes    swarm, 3 node(s): api n1, faststream n2" in out, out
    assert "  record   results/x.json (every column: make results full=1); Locust's report r.html beside it" in out


def test_a_draining_run_whose_backlog_was_purged_settles_with_its_purged_tasks():
    """make purge, then make results: the run's figures from a ledger whose pending
    tasks were counted as purged; all tasks did not run, so no time to run them all."""
    base = json.loads((RECORDS / "run-1.json").read_text())
    tasks = dict(base["tasks"], completed=9000, settled=False, time_to_execute_all_s=None, drain_s=None)
    tasks["draining"] = {"backlog": 6000, "rate_per_s": 50.0, "projected_empty_s": 120.0, "watch_ended_at": 1.0}
    record = sample("run-1.json", tasks=tasks)
    cell = {"enqueued": 15000, "completed": 9000, "failed": 0, "duplicates": 0, "purged": 6000, "pending": 0}
    ledger = {
        "queues": {"faststream": {"io/simple": cell}},
        "totals": {**cell, "started": 9000, "unfinished": 0},
        "first_enqueued_at": 100.0,
        "last_settled_at": 190.0,
    }
    assert record.settle_later(ledger)
    t = record.tasks
    assert (t.settled, t.purged, t.lost, t.time_to_execute_all_s, t.drain_s) == (True, 6000, 0, None, None)
    text = "\n".join(run_summary.lines(record, "results/x.json"))
    assert "15000 enqueued: 9000 done, 0 failed, 6000 purged, 0 pending, 0 lost" in text, text
    assert "drain    the rest purged (make purge): 6000 task(s) never run" in text, text
    assert "notes    " not in text, text  # the table's notes here (draining, purged, duration) are said above


def test_a_rate_run_says_the_rate_it_was_asked_for_and_what_left_late():
    record = sample("run-1.json", target_rate=700.0, late_sends_pct=2.5)
    text = "\n".join(run_summary.lines(record, "results/x.json"))
    assert "rate     649 req/s of 700 asked (open model, latency from each scheduled time, 2.5 % sent late)" in text


def test_a_rate_run_that_fell_short_of_its_schedule_is_flagged():
    from labctl.records.run_build import _schedule_warnings

    assert _schedule_warnings(None, {}, 10.0) == []  # a closed-loop run has no schedule
    assert _schedule_warnings(100.0, {"scheduled_sends": 1000, "late_sends": 10}, 99.0) == []
    short = _schedule_warnings(100.0, {"scheduled_sends": 1000, "late_sends": 300}, 80.0)
    assert len(short) == 2 and short[0].startswith("the load sent 80 requests/s of the 100 asked for"), short
    assert short[1] == "30.0 % of the requests left over 100 ms after their scheduled time"
