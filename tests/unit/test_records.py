"""The records in results/ load as the models they are, whatever version of the
lab wrote them: a committed sample of each schema (tests/unit/records/: a load
run, an older load run without the fields added since, a chaos run, a bench, a
comparison, a scale, a claims run), each read through the one store, written back with every
field it had, and shown by the tables and pages that show it."""

import json
import shutil
from pathlib import Path

import pytest

from labctl.errors import LabError
from labctl.records.bench import BenchRecord
from labctl.records.claims import ClaimsRecord
from labctl.records.compare import CompareRecord
from labctl.records.run import RunRecord
from labctl.records.scale import ScaleRecord
from labctl.records.store import Store
from labctl.render import bench_table, compare_page, compare_table, run_table, scale_page
from labctl.views import report

SAMPLES = Path(__file__).parent / "records"
KINDS = {
    "run-1.json": RunRecord,
    "run-1-older.json": RunRecord,
    "run-1-chaos.json": RunRecord,
    "bench-1.json": BenchRecord,
    "compare-1.json": CompareRecord,
    "scale-1.json": ScaleRecord,
    "claims-1.json": ClaimsRecord,
}


@pytest.fixture
def store(tmp_path):
    for name in KINDS:  # each under its own name, as the lab writes it
        data = json.loads((SAMPLES / name).read_text())
        shutil.copy(SAMPLES / name, tmp_path / f"{data.get('run') or data['base']}.json")
    return Store(tmp_path, warn=lambda line: pytest.fail(line))


# What a record of an older schema holds that is derived again when it is read, by today's
# rules: a compare/1 record's summary (the mean and range over its reps) becomes the median
# and interval of its runs, under compare/2.
DERIVED = {"compare-1.json": ("schema", "summary")}


def given_part(value, like):
    """`value` cut down to the keys `like` has, at every depth."""
    if isinstance(like, dict) and isinstance(value, dict):
        return {k: given_part(value.get(k), v) for k, v in like.items()}
    if isinstance(like, list) and isinstance(value, list) and len(like) == len(value):
        return [given_part(v, w) for v, w in zip(value, like)]
    return value


def test_every_sample_is_a_sample_of_its_own_kind():
    assert {p.name for p in SAMPLES.glob("*.json")} == set(KINDS)


@pytest.mark.parametrize("name", KINDS)
def test_each_schema_loads_as_its_model_and_writes_back_every_field(store, name, tmp_path):
    original = json.loads((SAMPLES / name).read_text())
    [record] = [
        r
        for r in store.all()
        if r.as_json().get("run", r.as_json().get("base")) == original.get("run", original.get("base"))
    ]
    assert isinstance(record, KINDS[name])
    again = record.as_json()
    kept = {k: v for k, v in original.items() if k not in DERIVED.get(name, ())}
    assert given_part(again, kept) == kept  # the same names and values; fields added since default
    out = Store(tmp_path / "out")
    path = out.save(record)
    assert json.loads(path.read_text()) == again and type(out.all()[0]) is KINDS[name]


def test_a_bench_record_is_written_back_as_the_same_file(store, tmp_path):
    """A bench's rows are models of the fields the tables read; the fields they do not
    read are kept, and the defaults of those a row lacks are not written: a bench
    record read and saved again is the same file, an older row's too."""
    [bench] = store.benches()
    again = Store(tmp_path / "out").save(bench)
    assert again.read_text() == (SAMPLES / "bench-1.json").read_text()
    older = {**json.loads(again.read_text()), "rows": [{"queue": "rq", "bare": {"rps": 1000}, "lab": {"rps": 899.0}}]}
    assert json.dumps(BenchRecord.model_validate(older).as_json()) == json.dumps(older)


def test_an_older_run_takes_the_defaults_of_what_it_lacks(store):
    older = store.run("arq-io-simple-100u-20261120T101500")
    assert older.platform is None and older.window_end is None and older.locust_report == []
    assert older.tasks is not None and older.tasks.unfinished is None and older.tasks.per_queue == {}
    assert older.tasks.settled and not older.is_draining() and not older.unsettled()


def test_the_store_sorts_each_kind_and_the_tables_show_them(store):
    runs = store.runs()
    assert [r.run for r in runs] == [
        "arq-io-simple-100u-20261120T101500",
        "chaos-saq-oom-1a2b3c",
        "faststream-io-simple-100u-20261128T092859",
    ]
    table = run_table.table(runs).splitlines()
    assert len(table) == 2 + 3 and "| faststream | 649 | 170 | 270 | 32.97 | 0 |" in table[-1]
    chaos = store.run("chaos-saq-oom-1a2b3c").chaos
    assert chaos is not None and (chaos.fault, chaos.lost, chaos.recovered_s, chaos.oom_events) == ("oom", 0, 4.4, 1)
    [bench] = store.benches()
    assert "| saq | await | 0.2cpu/200M / 0.2cpu/200M | 310.0 | 295.5 | 0.95 [0.94–0.96] (n=2) |" in bench_table.table(
        [bench]
    )
    assert bench_table.short_table(bench).splitlines()[2] == (
        "| saq | await | 0.2cpu/200M / 0.2cpu/200M | 0.95 [0.94–0.96] (n=2) | 1.00 [1.00–1.00] (n=2) | bench-20261128-035317 |"
    )
    [comparison] = store.comparisons()
    assert comparison.schema_version == "compare/2"  # its summary derived again from its runs
    assert "| saq | 1 | 640 | 170 | 270 | 33 | 0 |" in compare_table.markdown(comparison)
    assert "chart-throughput" in compare_page.page(comparison)
    [scale] = store.of(ScaleRecord)
    counts = scale_page.markdown(scale).split("## Every run")[0]  # the counts' table
    assert [line.split(" | ")[0] for line in counts.splitlines() if line.startswith("| ")][1:] == ["| 1", "| 2"]


def test_make_reports_panels_ask_for_the_runs_queues_and_services(store):
    """views/report.py's queries: a queue run's queues are its ledger's (its worker where an older
    record has none), its CPU the subjects' and the API's; any other run's panels are the API's."""

    def queries(record: RunRecord) -> str:
        return "\n".join(expr for _, _, lines in report.panels_for(record) for _, expr, _ in lines)

    run = store.run("faststream-io-simple-100u-20261128T092859")
    assert 'lab_queue_depth{queue=~"faststream"}' in queries(run)
    assert 'lab_cpu_limit_cores{service=~"faststream|api"}' in queries(run)
    assert run.tasks is not None
    both = run.model_copy(update={"tasks": run.tasks.model_copy(update={"per_queue": {"arq": {}, "saq": {}}})})
    assert 'lab_task_completed_total{queue=~"arq|saq"}' in queries(both)
    assert 'lab_queue_depth{queue=~"arq"}' in queries(store.run("arq-io-simple-100u-20261120T101500"))
    loop = run.model_copy(update={"scenario": "upstream", "tasks": None, "subjects": []})
    assert [title for title, _, _ in report.panels_for(loop)] == ["Throughput", "Event loop", "Latency", "CPU vs limit"]
    assert 'lab_cpu_limit_cores{service=~"api"}' in queries(loop) and "lab_queue_depth" not in queries(loop)


def test_a_file_of_another_schema_or_no_record_is_skipped_with_a_word(tmp_path):
    (tmp_path / "new.json").write_text(json.dumps({"schema": "bench/9", "run": "x"}))
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "other.json").write_text("[1, 2]")
    said = []
    store = Store(tmp_path, warn=said.append)
    assert store.all() == []
    assert any("schema 'bench/9' is none this version reads" in line for line in said)
    assert any(line.startswith(f"skipping {tmp_path / 'broken.json'}") for line in said) and len(said) == 2
    with pytest.raises(LabError, match="no run record"):
        store.run("nowhere")
