"""`make scale`'s outputs from its rows (labctl/experiments/scale.py,
labctl/render/scale_page.py), and a Swarm task read as the container `make load`
records limits from (labctl/platform/swarm.py): pure functions, no Docker."""

import re

from labctl.experiments import scale as S
from labctl.platform import containers
from labctl.platform.swarm import task_containers
from labctl.records.scale import ScaleRecord
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


def summary() -> ScaleRecord:
    rows = []
    for n, rate, redis in ((1, 60.0, 0.1), (2, 118.0, 0.18), (4, 150.0, 0.31)):
        row = S.step_row(n, record(f"scale-x-{n}r"), None, "celery")
        rows.append({**row, "drain_rate": rate, "redis_cpu_mean": redis, "redis_cpu_peak": redis * 1.5})
    rows[-1]["warnings"] = ["the run did not settle exactly"]
    return ScaleRecord(
        base="scale-x",
        worker="celery",
        params={"requests": 3000, "endpoint": "io/simple", "users": 100},
        platform={"orchestrator": "swarm", "stack": "lab", "nodes": 1},
        rows=rows,
        api_limits="0.2cpu/200M",
        worker_limits="0.2cpu/200M each",
    )


def test_the_markdown_table_has_a_row_per_count_and_names_where_it_ran():
    text = scale_page.markdown(summary())
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| replicas | API req/s | p95 ms | drain rate tasks/s")
    assert [line.split(" | ")[0] for line in lines[1:]] == ["| 1", "| 2", "| 4"]
    assert "Swarm stack lab, 1 node(s)" in text and "- 4 replica(s): the run did not settle exactly" in text


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
    by_nodes.platform = {"orchestrator": "swarm", "stack": "lab", "nodes": 6}
    names = ["node-4", "node-5", "node-6"]
    by_nodes.rows = [{"nodes": n, **row, "node_names": names[:n]} for n, row in zip((1, 2, 3), by_nodes.rows)]
    text = scale_page.markdown(by_nodes)
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| nodes | replicas | API req/s")
    assert "2 replica(s) a node" in text and "- 3 node(s): node-4, node-5, node-6" in text
    assert "- 3 node(s): the run did not settle exactly" in text
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
