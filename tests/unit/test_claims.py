"""make claims without Docker: the authors' files are theirs byte for byte,
every change made to them applies where it should and shows as a diff, the
claims' rules decide as documented, a claim's ratios pair the repetitions
and leave out a run that failed, and the report's every figure is the runs'
(a committed record of a real quick run, tests/unit/records/claims-1.json,
checked by tests/claims_report.py, whose check is shown to catch a wrong
figure). The real run: tests/claims/test_claims_run.py."""

import copy
import json
from pathlib import Path

import pytest

from labctl.errors import LabError
from labctl.experiments.claims import plan, sources
from labctl.records.claims import ClaimsRecord, ClaimsRun, decide, lab_rows, rep_ratios, verdicts
from labctl.records.claims_published import BENCHES, CLAIMS
from labctl.render import claims_page
from tests.claims_report import check_page

SAMPLE = Path(__file__).parent / "records" / "claims-1.json"


@pytest.mark.parametrize("vendored", [f for f in sources.FILES if f.blob], ids=lambda f: f.path)
def test_each_vendored_file_is_its_authors_at_the_named_commit(vendored):
    assert sources.blob_id((sources.VENDOR / vendored.path).read_bytes()) == vendored.blob


def test_every_change_applies_once_and_the_run_keeps_it_as_a_diff(tmp_path):
    staged = sources.stage(tmp_path / "work")
    for f in sources.FILES:
        diff = staged[f.path]["diff"]
        assert bool(diff) == bool(f.changes), f.path
        for _, new in f.changes:
            added = [line for line in new.splitlines() if line.strip()]
            assert all(f"+{line}" in diff or f" {line}" in diff for line in added), (f.path, new)
    script = (tmp_path / "work" / "rq" / "rq_benchmark.py").read_text()
    assert "SimpleWorker(queue, connection=Redis()).work(burst=True)" in script
    assert (tmp_path / "work" / "lib" / "claims_tally.py").exists()
    assert (tmp_path / "work" / "own" / "dramatiq_bench.py").exists()
    # The originals stay as their authors wrote them; only the staged copy changed.
    assert "from rq import Connection" in (sources.VENDOR / "saq" / "simple.py").read_text()
    assert "from rq import Connection" not in (tmp_path / "work" / "saq" / "simple.py").read_text()


def test_a_change_whose_original_text_is_gone_stops_the_run():
    with pytest.raises(LabError, match="found it 0 times"):
        sources.apply("N = 500\n", (("N = 1000\n", "N = 2\n"),), "x.py")


@pytest.mark.parametrize(
    ("rule", "published", "ratios", "verdict"),
    [
        ("magnitude", 6.51, [5.0, 8.0], "holds"),  # both in [4.34, 9.77]
        ("magnitude", 6.51, [12.0, 13.0], "direction only"),
        ("magnitude", 6.51, [5.0, 12.0], "inconclusive"),
        ("magnitude", 6.51, [1.5, 5.0], "fails"),  # one below 2
        ("magnitude", 1.44, [3.0, 3.1], "fails"),  # a ratio under 2 claims no direction
        ("magnitude", 1.44, [1.2, 1.9], "holds"),
        ("parity", 1.15, [0.7, 1.4], "holds"),
        ("parity", 1.15, [2.5, 2.6], "fails"),
        ("parity", 1.15, [1.0, 2.0], "inconclusive"),
        ("slightly", None, [1.1, 1.3], "holds"),
        ("slightly", None, [0.8, 0.9], "fails"),
        ("slightly", None, [1.6, 2.0], "much faster than claimed"),
        ("slightly", None, [0.9, 1.2, 1.3], "inconclusive"),  # median in the band, one below 0.95
        ("much", None, [2.0, 9.0], "holds"),
        ("much", None, [1.9, 9.0], "fails"),
        ("magnitude", 7.0, [], "no data"),
        ("absolute", None, [0.95, 1.08], "holds"),
        ("absolute", None, [1.12, 1.2], "fails"),
    ],
)
def test_each_rule_decides_as_documented(rule, published, ratios, verdict):
    assert decide(rule, published, ratios) == verdict


def run(queue: str, rep: int, value: float | None, status: str = "ok") -> ClaimsRun:
    return ClaimsRun(
        bench="rq_doc", queue=queue, path="author", rep=rep, n=10, figures={"process_s": value}, status=status
    )


def test_a_claims_ratios_pair_the_repetitions_and_leave_out_a_failed_run():
    runs = [
        run("rq-worker", 1, 6.0),
        run("rq-simple", 1, 1.0),
        run("rq-worker", 2, 9.0),
        run("rq-simple", 2, 1.5, status="failed: 3 job(s) not completed"),
        run("rq-worker", 3, 8.0),
        run("rq-simple", 3, 2.0),
    ]
    [claim] = [c for c in CLAIMS if c.id == "C6"]
    assert rep_ratios(runs, claim, "unlimited") == [6.0, 4.0]
    [verdict] = verdicts(ClaimsRecord(run="x", runs=runs))
    assert verdict["ratios"] == [6.0, 4.0] and verdict["verdict"] == "inconclusive"  # 4.0 is below 6.51/1.5


def test_every_claim_reads_a_figure_its_benchmark_records():
    for claim in CLAIMS:
        assert claim.figure in BENCHES[claim.bench]["figures"], claim.id
        assert claim.rule in ("magnitude", "parity", "slightly", "much", "event", "absolute"), claim.id
        if claim.rule == "magnitude":
            assert claim.published, claim.id
    for bench in BENCHES:
        assert bench in plan.MEASURE


def sample() -> dict:
    return json.loads(SAMPLE.read_text())


def test_the_reports_figures_are_the_runs():
    record = sample()
    page = claims_page.page(ClaimsRecord.model_validate(record))
    assert check_page(record, page) >= 20
    assert "<script" not in page and "http://" not in page.split("</style>")[0]


def test_the_check_catches_a_figure_that_is_not_the_runs():
    record = sample()
    page = claims_page.page(ClaimsRecord.model_validate(record))
    changed = copy.deepcopy(record)
    target = next(r for r in changed["runs"] if r["status"] == "ok" and r["figures"].get("noop_s"))
    target["figures"]["noop_s"] *= 1.5
    with pytest.raises(AssertionError):
        check_page(changed, page)


def test_the_markdown_twin_names_every_claim_and_the_lab_path_its_bare_figure():
    record = ClaimsRecord.model_validate(sample())
    text = claims_page.markdown(record)
    for v in verdicts(record):
        assert f"| {v['id']} |" in text
    for row in lab_rows(record):
        assert row["bare"] is not None and row["ratio"] is not None, row
