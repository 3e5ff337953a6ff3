"""`make scale`'s outputs from its rows (labctl/experiments/scale.py,
labctl/records/scale.py, labctl/render/scale_page.py): each count's figures
over its runs and its speed-up's verdict, from a hand-made record; the runs'
seeded order; and a Swarm task read as the container `make load` records
limits from (labctl/platform/swarm.py): pure functions, no Docker."""

import json
import re
from pathlib import Path

from labctl import stats
from labctl.experiments import scale as S
from labctl.platform import containers
from labctl.platform.swarm import task_containers
from labctl.records.run import Platform
from labctl.records.scale import FIGURES, ScaleParams, ScaleRecord, ScaleRun, count_figures
from labctl.render import scale_page


def record(run: str, *, enqueued=3000, completed=3000, accepted=3000, duplicates=0, lost=0, settled=True) -> dict:
    return {
        "run": run,
        "rps": 410.5,
        "p95_ms": 240.0,
        "median_ms": 180.0,
        "status_codes": {"202": accepted},
        "warnings": [],
        "tasks": {
            "settled": settled,
            "enqueued": enqueued,
            "completed": completed,
            "failed": 0,
            "duplicates": duplicates,
            "lost": lost,
            "time_to_execute_all_s": 12.5,
        },
    }


def test_a_count_is_exact_only_when_every_accepted_task_ran_once():
    assert S.exact(record("r"))
    assert not S.exact(record("r", duplicates=2))
    assert not S.exact(record("r", accepted=3001))  # a 202 the ledger never saw
    assert not S.exact(record("r", completed=2990, lost=10))
    assert not S.exact(record("r", settled=False))


def test_a_row_without_prometheus_has_the_records_figures():
    row = S.step_row(2, record("scale-x-2r"), None, "celery")
    assert (row["replicas"], row["rps"], row["p95_ms"], row["drain_rate"], row["exact"]) == (
        2,
        410.5,
        240.0,
        240.0,
        True,
    )
    assert "redis_cpu_mean" not in row  # no Prometheus: no Redis figure, rather than a wrong one


# Each count's drain rates over three repetitions: 2 replicas clearly faster than 1,
# 4 no faster than 1 (the host's two cores spent).
RATES = {1: [60.0, 62.0, 58.0], 2: [118.0, 121.0, 114.0], 4: [64.0, 55.0, 70.0]}
ORDER = [[2, 1, 4], [4, 2, 1], [1, 4, 2]]


def summary() -> ScaleRecord:
    rows = []
    for rep, order in enumerate(ORDER, 1):
        for n in order:
            rate = RATES[n][rep - 1]
            row = S.step_row(n, record(f"scale-x-{n}r-rep{rep}"), None, "celery")
            redis = 0.1 * n
            figures = {"drain_rate": rate, "redis_cpu_mean": redis, "redis_cpu_peak": redis * 1.5}
            rows.append(ScaleRun.model_validate({"rep": rep, **row, **figures}))
    rows[-1].warnings = ["the run did not settle exactly"]
    return ScaleRecord(
        base="scale-x",
        worker="celery",
        params=ScaleParams(requests=3000, endpoint="io/simple", users=100),
        platform=Platform(orchestrator="swarm", stack="lab", nodes=1),
        rows=rows,
        api_limits="0.2cpu/200M",
        worker_limits="0.2cpu/200M each",
        counts=[1, 2, 4],
        reps=3,
        seed=7,
        order=ORDER,
    )


def tables(text: str) -> list[list[str]]:
    """The markdown's tables, each as its lines (header first, the separator left out)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("| "):
            blocks[-1].append(line)
        elif not line.startswith("|") and blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def test_the_markdown_has_a_row_per_count_then_every_run_and_names_where_it_ran():
    text = scale_page.markdown(summary())
    counts, runs = tables(text)
    assert counts[0].startswith("| replicas | runs | API req/s | p95 ms | drain rate tasks/s | speed-up over 1 replica")
    assert [line.split(" | ")[0] for line in counts[1:]] == ["| 1", "| 2", "| 4"]
    assert runs[0].startswith("| rep | replicas | API req/s")
    assert [line.split(" | ")[:2] for line in runs[1:]] == [
        ["| 1", "2"],
        ["| 1", "1"],
        ["| 1", "4"],
        ["| 2", "4"],
        ["| 2", "2"],
        ["| 2", "1"],
        ["| 3", "1"],
        ["| 3", "4"],
        ["| 3", "2"],
    ]
    assert "Order (seed 7): repetition 1: 2 1 4; repetition 2: 4 2 1; repetition 3: 1 4 2." in text
    assert "3 run(s) of each count" in text and "Swarm stack lab, 1 node(s)" in text
    assert "- 2 replica(s), repetition 3: the run did not settle exactly" in text


def test_each_count_is_a_median_with_its_interval_and_its_speedup_says_what_it_shows():
    record = summary()
    by = {c.count: c for c in count_figures(record)}
    assert [c.count for c in count_figures(record)] == [1, 2, 4] and all(c.runs == 3 for c in by.values())
    assert by[2].figures["drain_rate"] == stats.estimate(RATES[2])
    assert by[2].figures["drain_rate"].median == 118.0 and by[2].figures["rps"].n == 3
    assert by[1].speedup is None  # the reference
    assert by[2].speedup == stats.ratio(RATES[2], RATES[1]) and by[2].speedup.verdict == stats.FASTER
    assert by[4].speedup is not None and by[4].speedup.straddles(1.0)
    assert by[4].speedup.verdict == stats.NO_DIFFERENCE
    assert (by[1].exact, by[2].exact) == (3, 3)  # the warning is the test's own: the ledger's counts are exact
    [one, two, four] = tables(scale_page.markdown(record))[0][1:]
    cells = {n: [c.strip() for c in line.strip("|").split("|")] for n, line in ((1, one), (2, two), (4, four))}
    assert cells[2][4] == stats.text(by[2].figures["drain_rate"], show_n=False)  # e.g. 118 [110–126]
    assert cells[1][5] == "1 (reference)"
    assert cells[2][5] == f"{stats.ratio_text(by[2].speedup)} faster"
    assert cells[4][5].endswith(" no difference shown")
    assert cells[4][-1] == "3 of 3"
    # The record keeps them for readers of its JSON: as derived, the verdict beside each speed-up.
    assert record.by_count == []
    record.by_count = [c.as_json() for c in count_figures(record)]
    again = ScaleRecord.model_validate(json.loads(json.dumps(record.as_json())))
    assert again.by_count[2]["speedup"]["verdict"] == "no difference shown"
    assert again.by_count[1]["drain_rate"] == stats.estimate(RATES[2]).as_json()


def test_an_older_record_of_one_run_a_count_has_no_interval():
    older = summary()
    older.rows = [ScaleRun.model_validate(row.model_dump(exclude={"rep"})) for row in older.rows if row.rep == 1]
    older.counts, older.order, older.reps, older.seed = [], [], 1, None
    by = count_figures(older)
    assert [c.count for c in by] == [2, 1, 4]  # no counts recorded: the order the rows ran in
    assert by[0].figures["drain_rate"].low is None and by[1].speedup is not None
    assert by[1].speedup.verdict == stats.TOO_FEW
    text = scale_page.markdown(older)
    assert "too few runs" in text and "Order (seed" not in text
    assert "speed-up over 2 replica(s)" in text


def test_a_record_writes_back_the_json_it_was_read_from():
    # A run over replicas writes no `nodes`, an older run no `rep`, a count stays a whole number.
    sample = json.loads((Path(__file__).parent / "records" / "scale-1.json").read_text())
    again = ScaleRecord.model_validate(sample).as_json()
    for part in ("rows", "params", "platform"):
        assert json.dumps(again[part]) == json.dumps(sample[part]), part
    row = S.step_row(2, record("scale-x-2r"), None, "celery")
    assert ScaleRun.model_validate(row).as_json() == row  # what make scale appends, written as it was


def test_every_figure_and_column_is_a_field_of_the_run():
    # Both are read from a run by name: one that is no field would fail only where it is shown.
    by_nodes = summary().model_copy(update={"axis": "nodes"})
    named = set(FIGURES) | {key for key, _ in scale_page.columns(by_nodes)}
    assert named <= set(ScaleRun.model_fields)


def test_each_repetition_runs_every_count_once_in_an_order_its_seed_gives():
    order = S.run_order([1, 2, 4, 8], 5, seed=12345)
    assert order == S.run_order([1, 2, 4, 8], 5, seed=12345)
    assert all(sorted(o) == [1, 2, 4, 8] for o in order) and len(order) == 5
    assert len({tuple(o) for o in order}) > 1  # not one order repeated
    assert S.run_order([1, 2, 4, 8], 5, seed=1) != order
    import pytest

    from labctl.errors import ParamError

    with pytest.raises(ParamError, match="each once"):
        S.parse_counts("1 2 2")


def test_the_html_page_plots_inline_and_loads_nothing(tmp_path):
    paths = S.write_outputs(summary(), tmp_path)
    assert [p.suffix for p in paths] == [".json", ".md", ".html"]
    page = (tmp_path / "scale-x.html").read_text()
    assert page.count("<svg") == 1 and "<table>" in page
    for title, _ in scale_page.PANELS:
        assert title in page, title  # text kept as text in the SVG
    # Nothing fetched: no script, stylesheet or image from anywhere.
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert not re.search(r"""(src|href)=["']https?:""", page)


def test_over_nodes_the_table_and_plots_count_nodes_and_name_them(tmp_path):
    by_nodes = summary()
    by_nodes.axis, by_nodes.per_node = "nodes", 2
    by_nodes.platform = Platform(orchestrator="swarm", stack="lab", nodes=6)
    names = ["node-4", "node-5", "node-6"]
    nodes = {1: 1, 2: 2, 4: 3}  # the summary's replica counts, as node counts
    by_nodes.counts = [1, 2, 3]
    by_nodes.order = [[nodes[n] for n in o] for o in ORDER]
    by_nodes.rows = [
        row.model_copy(update={"nodes": nodes[row.replicas], "node_names": names[: nodes[row.replicas]]})
        for row in by_nodes.rows
    ]
    text = scale_page.markdown(by_nodes)
    counts, runs = tables(text)
    assert counts[0].startswith("| nodes | runs | API req/s") and "speed-up over 1 node(s)" in counts[0]
    assert [line.split(" | ")[0] for line in counts[1:]] == ["| 1", "| 2", "| 3"]
    assert runs[0].startswith("| rep | nodes | replicas | API req/s")
    assert "2 replica(s) a node" in text and "- 3 node(s): node-4, node-5, node-6" in text
    assert "- 2 node(s), repetition 3: the run did not settle exactly" in text
    S.write_outputs(by_nodes, tmp_path)
    assert "nodes (the workers" in (tmp_path / "scale-x.html").read_text()  # the x axis


def test_scaling_over_nodes_needs_a_swarm():
    import pytest

    from labctl.errors import ParamError
    from labctl.platform.compose import Compose

    with pytest.raises(ParamError, match="nodes of a Swarm"):
        S.worker_nodes(Compose({}), [1, 2])
    assert S.parse_counts("1 2 3", "nodes") == [1, 2, 3]
    with pytest.raises(ParamError, match='nodes="1 x"'):
        S.parse_counts("1 x", "nodes")


def task(slot: int, state: str, desired: str = "running", exit_code: int | None = None) -> dict:
    return {
        "Slot": slot,
        "NodeID": "n0d3",
        "DesiredState": desired,
        "Status": {"State": state, "ContainerStatus": {"ExitCode": exit_code}},
        "Spec": {
            "Resources": {"Limits": {"NanoCPUs": 200_000_000, "MemoryBytes": 200 << 20}},
            "ContainerSpec": {"Env": ["CONCURRENCY=3", "CELERY_CONCURRENCY=5", "SERVICE_NAME=celery"]},
        },
    }


def test_swarm_tasks_give_the_limits_and_restarts_a_record_keeps():
    tasks = [
        task(1, "running"),
        task(2, "running"),
        task(2, "failed", "shutdown", exit_code=137),
        task(3, "shutdown", "shutdown"),  # scaled down: neither running nor a restart
    ]
    tasks_seen = task_containers("lab_celery", tasks)
    assert [c["Name"] for c in tasks_seen] == ["lab_celery.1", "lab_celery.2"]
    limits = containers.limits_of(tasks_seen, "celery")
    assert limits == {"cpus": 0.2, "memory": "200M", "memory_bytes": 200 << 20, "replicas": 2, "concurrency": 5}
    counts = containers.restart_counts({"celery": tasks_seen})
    assert counts == {"celery": {"lab_celery.1": [0, False], "lab_celery.2": [1, True]}}
