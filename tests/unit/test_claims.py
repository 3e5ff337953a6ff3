"""make claims without Docker: the authors' files are theirs byte for byte,
every change made to them applies where it should and shows as a diff; each
rule of docs/claims.md is a function of labctl/records/claims_rules.py that
decides hand-made intervals as the doc says, at each edge of its band, and as
the report check's own reading of the doc does (tests/claims_report.py); a
claim's interval takes every ok run of each side; a verdict on runs smaller
than the author's says by how much; the full run's plan is the author's size
where the doc says so; and the report's every figure, verdict and lab path row
is the runs' (committed records of real runs: a quick one,
tests/unit/records/claims-1.json, whose verdicts are a smoke test's, and one
written before the runs' intervals were recorded, two repetitions,
tests/unit/claims_records/), a check shown to catch a wrong figure or verdict.
The real run: tests/claims/test_claims_run.py."""

import copy
import html
import json
from pathlib import Path

import pytest

from labctl.errors import LabError
from labctl.experiments.claims import authors, plan, sources
from labctl.experiments.claims.runner import Claims, ClaimsOptions
from labctl.records import claims_rules as rules
from labctl.records.claims import ClaimsRecord, ClaimsRun, claim_ratio, lab_rows, verdicts
from labctl.records.claims_published import BENCHES, CLAIMS
from labctl.render import claims_page
from labctl.render.console import Console
from labctl.stats import Ratio
from tests.claims_report import check_page, rule_verdict

ROOT = Path(__file__).resolve().parents[2]
QUICK = Path(__file__).parent / "records" / "claims-1.json"
# Written by make claims before its verdicts were decided on intervals: two repetitions, no interval kept.
OLDER = Path(__file__).parent / "claims_records" / "claims-20261129-073433.json"


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


# -- The rules: one function each, deciding on an interval ----------------------------------------------
def iv(low: float | None, high: float | None, value: float | None = None) -> Ratio:
    """A hand-made interval (three runs a side); its value the middle on logs unless given."""
    if value is None and low is not None and high is not None:
        value = (low * high) ** 0.5
    return Ratio(value, low, high, 3, 3)


# magnitude at R = 6.51 (RQ's SimpleWorker): its band is [4.34, 9.765]
R = 6.51
MAGNITUDE = [
    (iv(4.34, 9.765), rules.HOLDS),  # both edges inside
    (iv(5.0, 8.0), rules.HOLDS),
    (iv(4.3, 8.0), rules.NOT_DECIDED),  # across the lower edge
    (iv(8.0, 9.8), rules.NOT_DECIDED),  # across the upper edge
    (iv(1.5, 20.0), rules.NOT_DECIDED),  # across both
    (iv(10.0, 14.0), rules.DIRECTION_ONLY),  # wholly above the band
    (iv(1.2, 4.3), rules.DIRECTION_ONLY),  # wholly below it, wholly above 1
    (iv(0.9, 3.0), rules.FAILS),  # below it, and across 1: no direction shown
    (iv(0.4, 0.6), rules.FAILS),  # the other way round
]
# below 1 (R = 0.5, band [0.333, 0.75]): the direction is below 1
MAGNITUDE_BELOW_1 = [
    (iv(0.4, 0.7), rules.HOLDS),
    (iv(0.1, 0.3), rules.DIRECTION_ONLY),
    (iv(0.8, 0.99), rules.DIRECTION_ONLY),
    (iv(0.8, 1.2), rules.FAILS),
    (iv(0.7, 0.8), rules.NOT_DECIDED),
]
PARITY = [
    (iv(0.7, 1.4), rules.HOLDS),
    (iv(1 / 1.5, 1.5), rules.HOLDS),  # the edges belong to the band
    (iv(0.6, 1.2), rules.NOT_DECIDED),  # across 0.67
    (iv(1.2, 1.6), rules.NOT_DECIDED),  # across 1.5
    (iv(1.6, 2.5), rules.FAILS),
    (iv(0.4, 0.6), rules.FAILS),
]
SLIGHTLY = [
    (iv(1.05, 1.45), rules.HOLDS),
    (iv(1.05, 1.5), rules.HOLDS),  # 1.5 belongs to the band
    (iv(1.0, 1.3), rules.NOT_DECIDED),  # 1 does not: faster is the claim
    (iv(0.95, 1.3), rules.NOT_DECIDED),
    (iv(1.3, 1.7), rules.NOT_DECIDED),
    (iv(1.6, 2.5), rules.FASTER_THAN_CLAIMED),
    (iv(0.7, 0.9), rules.FAILS),
]
MUCH = [
    (iv(2.0, 9.0), rules.HOLDS),  # 2 belongs to the band
    (iv(1.8, 2.6), rules.NOT_DECIDED),
    (iv(1.2, 1.9), rules.DIRECTION_ONLY),
    (iv(0.9, 1.5), rules.FAILS),
]
ABSOLUTE = [
    (iv(0.9, 1.1), rules.HOLDS),
    (iv(0.95, 1.15), rules.NOT_DECIDED),
    (iv(0.85, 0.95), rules.NOT_DECIDED),
    (iv(1.12, 1.3), rules.FAILS),
    (iv(0.7, 0.89), rules.FAILS),
]
CASES = (
    [("magnitude", R, r, v) for r, v in MAGNITUDE]
    + [("magnitude", 0.5, r, v) for r, v in MAGNITUDE_BELOW_1]
    + [("parity", 1.15, r, v) for r, v in PARITY]
    + [("slightly", None, r, v) for r, v in SLIGHTLY]
    + [("much", None, r, v) for r, v in MUCH]
    + [("absolute", 1.0, r, v) for r, v in ABSOLUTE]
)


@pytest.mark.parametrize(("rule", "published", "interval", "verdict"), CASES)
def test_each_rule_decides_a_hand_made_interval_as_the_doc_says(rule, published, interval, verdict):
    function = getattr(rules, rule)
    assert (function(interval, published) if rule == "magnitude" else function(interval)) == verdict
    assert rules.decide(rule, published, interval) == verdict
    # The report check's own reading of the doc agrees.
    assert rule_verdict(rule, published, interval.value, interval.low, interval.high) == verdict


@pytest.mark.parametrize("rule", ["magnitude", "parity", "slightly", "much", "absolute"])
def test_without_an_interval_no_rule_decides(rule):
    assert rules.decide(rule, 6.51, Ratio(4.0, None, None, 1, 1)) == rules.TOO_FEW
    assert rules.decide(rule, 6.51, Ratio(None, None, None, 0, 2)) == rules.NO_DATA


def test_the_rules_and_the_report_checks_reading_of_the_doc_agree_on_every_interval():
    """Every interval with bounds on a grid that holds every edge of every band and points between."""
    edges = [1 / 1.5, 0.9, 1.0, 1.1, 1.5, 2.0, R / 1.5, R, 1.5 * R, 0.5 / 1.5, 0.5, 0.75]
    points = sorted({*edges, *(e * f for e in edges for f in (0.97, 1.03)), 0.05, 50.0})
    for rule, published in (("magnitude", R), ("magnitude", 0.5), ("magnitude", 1.44), ("parity", None),
                            ("slightly", None), ("much", None), ("absolute", 1.0)):  # fmt: skip
        for i, low in enumerate(points):
            for high in points[i:]:
                r = iv(low, high)
                assert rules.decide(rule, published, r) == rule_verdict(rule, published, r.value, low, high), (
                    rule, published, low, high)  # fmt: skip


@pytest.mark.parametrize(
    ("statuses", "verdict"),
    [
        (["failed: timeout after 400 s"], rules.HOLDS),
        (["ok"], rules.FAILS),
        (["ok", "failed: 3 job(s) not completed"], rules.NOT_DECIDED),
        ([], rules.NO_DATA),
    ],
)
def test_an_event_is_decided_by_how_its_runs_ended(statuses, verdict):
    assert rules.event(statuses) == verdict


def test_every_rule_the_doc_lists_is_a_function_named_as_the_doc_names_it():
    doc = (ROOT / "docs" / "claims.md").read_text()
    section = doc.split("\n### The rules\n", 1)[1].split("\n#", 1)[0]
    listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    assert sorted(listed) == sorted(rules.RULES)
    for name in listed:
        assert callable(getattr(rules, name)), name
    for claim in CLAIMS:
        assert claim.rule in listed, claim.id
    # The bands the doc states are the code's.
    assert f"[R/{rules.BAND:g}, {rules.BAND:g} R]" in section and "[0.67, 1.5]" in section
    assert "(1, 1.5]" in section and "at least 2" in section and "[0.9, 1.1]" in section


# -- A claim's interval and its scale -----------------------------------------------------------------
def run(queue: str, rep: int, value: float | None, status: str = "ok", n: int = 1000) -> ClaimsRun:
    return ClaimsRun(
        bench="rq_doc", queue=queue, path="author", rep=rep, n=n, figures={"process_s": value}, status=status
    )


def test_a_claims_interval_takes_every_ok_run_of_each_side_and_leaves_out_a_failed_one():
    runs = [
        run("rq-worker", 1, 6.0),
        run("rq-simple", 1, 1.0),
        run("rq-worker", 2, 9.0),
        run("rq-simple", 2, 1.5, status="failed: 3 job(s) not completed"),
        run("rq-worker", 3, 8.0),
        run("rq-simple", 3, 1.1),
    ]
    [claim] = [c for c in CLAIMS if c.id == "C6"]
    r = claim_ratio(runs, claim, "unlimited")
    assert (r.n_a, r.n_b) == (3, 2) and r.value == pytest.approx(8.0 / 1.05)
    assert r.low is not None and r.high is not None and r.low < r.value < r.high
    [verdict] = verdicts(ClaimsRecord(run="x", runs=runs))
    assert verdict.verdict == rules.magnitude(r, claim.published) and verdict.scale == ""


def test_a_verdict_on_runs_smaller_than_the_authors_says_by_how_much():
    runs = [
        ClaimsRun(bench="streaq_noop", queue=q, path="author", rep=rep, n=4000, figures={"spawn_done_s": t},
                  params={"workers": 2, "column": "w10"})
        for rep in (1, 2, 3) for q, t in (("arq", 20.0 + rep), ("streaq", 3.0 + rep / 10))
    ]  # fmt: skip
    [verdict] = verdicts(ClaimsRecord(run="x", runs=runs))
    assert verdict.id == "C3-w10"
    assert verdict.scale == "N 4,000 here, 20,000 published; 2 worker processes here, 10 published"
    text = claims_page.verdicts_markdown(ClaimsRecord(run="x", runs=runs))
    assert "scaled: N 4,000 here, 20,000 published; 2 worker processes here, 10 published" in text
    assert f"{verdict.verdict}, on runs scaled below the author's" in text


# -- The full run's plan ------------------------------------------------------------------------------
def planned(results: Path, **options) -> list:
    runner = Claims(ClaimsOptions(results_dir=results, **options), Console())
    return [(bench, setup, rep, c) for bench, setup, rep, configs in runner.plan() for c in configs]


def test_the_full_run_has_an_interval_for_every_claim_and_arq_at_40_workers_its_authors_20000_tasks(tmp_path):
    full = planned(tmp_path)
    reps = ClaimsOptions().reps
    assert reps >= 2  # a t interval needs two runs a side
    runs_of: dict[tuple, set[int]] = {}
    for bench, setup, rep, c in full:
        runs_of.setdefault((bench, setup, c.queue, c.params.get("column", "")), set()).add(rep)
    claimed = set()
    for claim in CLAIMS:
        for row in {claim.num, claim.den}:
            side = "rq-worker" if row == "rq-simple" else row  # RQ's one script run gives both its rows
            key = (claim.bench, "unlimited", side, claim.column)
            assert key in runs_of, claim.id
            claimed.add(key)
            if claim.rule != "event":
                assert len(runs_of[key]) == reps, (claim.id, key)
            limited = (claim.bench, "limited", side, claim.column)
            if limited in runs_of:
                claimed.add(limited)
                assert len(runs_of[limited]) == reps, (claim.id, limited)
    # What no claim reads (a process count, a row beside the claimed ones, the lab's path) runs once.
    assert all(len(reps_run) == 1 for key, reps_run in runs_of.items() if key not in claimed), runs_of
    [w40] = [
        c for bench, _, _, c in full if bench == "streaq_sleep" and c.queue == "arq" and c.params["column"] == "w40"
    ]
    assert w40.n == BENCHES["streaq_sleep"].n == 20000 and w40.params["workers"] == 40
    # The authors' own N where the full run holds it (docs/claims.md, "What runs").
    sizes = {(bench, setup, c.queue, c.params.get("column", "")): c.n for bench, setup, _, c in full}
    assert sizes[("saq_simple", "unlimited", "arq", "")] == BENCHES["saq_simple"].n
    assert sizes[("rq_doc", "unlimited", "rq-worker", "")] == BENCHES["rq_doc"].n
    assert sizes[("blog_io", "unlimited", "arq", "")] == sizes[("blog_cpu", "unlimited", "arq", "")] == 1000


def test_a_quick_run_is_one_repetition_at_a_tenth_and_decides_nothing():
    options = ClaimsOptions(quick=True)
    options.check()
    assert options.reps == 1 and options.scale == 0.1
    record = ClaimsRecord.model_validate(quick_sample())
    assert record.params.quick
    found = verdicts(record)
    assert found and all(v.verdict == rules.SMOKE for v in found)
    printed = claims_page.verdicts_markdown(record)
    assert printed.startswith("A quick run (N x 0.1, one repetition) is a smoke test")
    assert "is a smoke test" in claims_page.markdown(record) and "id='smoke'" in claims_page.page(record)


def test_every_claim_reads_a_figure_its_benchmark_records():
    for claim in CLAIMS:
        assert claim.figure in BENCHES[claim.bench].figures, claim.id
        assert claim.rule in rules.RULES, claim.id
        if claim.rule == "magnitude":
            assert claim.published, claim.id
    for bench in BENCHES:
        assert bench in plan.MEASURE


# -- The report against the runs ----------------------------------------------------------------------------
def quick_sample() -> dict:
    return json.loads(QUICK.read_text())


def older_sample() -> dict:
    return json.loads(OLDER.read_text())


@pytest.mark.parametrize("sample", [quick_sample, older_sample], ids=["quick", "older-two-reps"])
def test_the_reports_figures_and_verdicts_are_the_runs(sample):
    record = sample()
    model = ClaimsRecord.model_validate(record)
    page, markdown = claims_page.page(model), claims_page.markdown(model)
    assert check_page(record, page, markdown) >= 20
    assert "<script" not in page and "http://" not in page.split("</style>")[0]


def test_each_benchmark_on_the_page_lists_what_the_setup_changes_from_the_data_file():
    model = ClaimsRecord.model_validate(quick_sample())
    page = claims_page.page(model)
    shown = [bench for bench, _, _ in claims_page.benches_run(model)]
    assert shown
    for bench in shown:
        section = page.split(f"<h3 id='bench-{bench}'>")[1].split("<h3 ")[0]
        quirks = section.split("<ul class='quirks'>")[1].split("</ul>")[0]
        assert BENCHES[bench].quirks, bench
        assert quirks == "".join(f"<li>{html.escape(q)}</li>" for q in BENCHES[bench].quirks), bench


def test_an_older_record_is_decided_by_these_rules_as_far_as_its_runs_allow():
    record = ClaimsRecord.model_validate(older_sample())
    assert record.params.reps == 2 and not record.params.quick
    found = verdicts(record)
    assert {v.id for v in found} == {"C1-noop", "C1-sleep", "C2-noop", "C2-sleep", "C9", "C6"}
    assert all(v.ratio and v.ratio.n_a == v.ratio.n_b == 2 and v.ratio.low is not None for v in found)
    assert {v.verdict for v in found} <= {rules.HOLDS, rules.FAILS, rules.NOT_DECIDED, rules.DIRECTION_ONLY}
    assert all(v.scale for v in found)  # it ran at scale 0.2: every verdict says so


def test_the_check_catches_a_figure_that_is_not_the_runs():
    record = quick_sample()
    page = claims_page.page(ClaimsRecord.model_validate(record))
    changed = copy.deepcopy(record)
    target = next(r for r in changed["runs"] if r["status"] == "ok" and r["figures"].get("noop_s"))
    target["figures"]["noop_s"] *= 1.5
    with pytest.raises(AssertionError):
        check_page(changed, page)


def test_the_check_catches_a_verdict_that_is_not_the_runs():
    record = older_sample()
    model = ClaimsRecord.model_validate(record)
    page, markdown = claims_page.page(model), claims_page.markdown(model)
    [c6] = [v for v in verdicts(model) if v.id == "C6" and v.setup == "unlimited"]
    wrong = rules.HOLDS if c6.verdict != rules.HOLDS else rules.FAILS
    with pytest.raises(AssertionError):
        check_page(record, page.replace(f'data-verdict="{c6.verdict}"', f'data-verdict="{wrong}"', 1), markdown)
    row = next(line for line in markdown.splitlines() if line.startswith("| C6 | ") and "| unlimited |" in line)
    with pytest.raises(AssertionError):
        check_page(record, page, markdown.replace(row, row.replace(f"| {c6.verdict}", f"| {wrong}")))


def test_the_markdown_twin_names_every_claim_and_the_lab_path_its_bare_figure():
    record = ClaimsRecord.model_validate(quick_sample())
    text = claims_page.markdown(record)
    for v in verdicts(record):
        assert f"| {v.id} |" in text
    for row in lab_rows(record):
        assert row.bare.median is not None and row.ratio.value is not None, row


@pytest.mark.parametrize("lib", ["arq", "saq", "taskiq"])
def test_a_streaq_run_keeps_its_queue_length_after_the_enqueue_whatever_the_library(lib):
    """taskiq's accounting counts executions, not ids; the queue's length read once every
    job was enqueued is kept beside it, as for the others."""
    tally = {"executions": 1002, "distinct": 1000}
    a = authors.streaq_accounting(lib, 1000, tally, queued=640)
    assert a["queued_after_enqueue"] == 640 and a["enqueued"] == 1000 and a["lost"] == 0
    assert ("ids" in a) == (lib == "taskiq") and a["duplicates"] == 2
    assert "queued_after_enqueue" not in authors.streaq_accounting(lib, 1000, tally, queued=None)
