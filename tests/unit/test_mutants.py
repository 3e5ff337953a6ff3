"""The mutation check's own verdicts (tests/mutants.py): a fault is caught only
by a test that fails in its call, never by an error in a fixture, a collection
failure or a run that tested nothing; its faults still apply to the tree. The
runs themselves (a timeout, a clean tree that fails): tests/integration/test_mutants.py."""

from pathlib import Path

from tests import mutants as M

ROOT = Path(__file__).resolve().parents[2]


def junit(*cases: str) -> str:
    return f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>'


def case(name: str, inner: str = "", classname: str = "tests.integration.test_x", path="tests/integration/test_x.py"):
    where = f' file="{path}" line="1"' if path else ""
    return f'<testcase classname="{classname}" name="{name}"{where} time="0.1">{inner}</testcase>'


FAILURE = '<failure message="AssertionError: lost 3 tasks&#10;assert 3 == 0">trace</failure>'
SETUP_ERROR = '<error message="failed on setup with &quot;AssertionError: redis-server exited with 1&quot;">t</error>'
TEARDOWN_ERROR = '<error message="failed on teardown with &quot;RuntimeError: boom&quot;">t</error>'
COLLECTION_ERROR = '<error message="collection failure">ImportError</error>'


def test_a_failure_in_a_tests_call_catches_the_fault():
    outcome = M.read_junit(junit(case("test_a"), case("test_b[arq]", FAILURE)))
    assert (outcome.passed, outcome.failed) == (
        1,
        [("tests/integration/test_x.py::test_b[arq]", "AssertionError: lost 3 tasks")],
    )
    assert M.verdict(outcome) == (M.CAUGHT, "tests/integration/test_x.py::test_b[arq]")


def test_a_failure_then_a_teardown_error_still_catches_it():
    outcome = M.read_junit(junit(case("test_b", FAILURE), case("test_b", TEARDOWN_ERROR)))
    assert M.verdict(outcome) == (M.CAUGHT, "tests/integration/test_x.py::test_b")


def test_an_error_in_setup_judges_nothing():
    """No redis-server, a port in use: every fault would look caught."""
    state, why = M.verdict(M.read_junit(junit(case("test_a"), case("test_b", SETUP_ERROR))))
    assert state == M.NO_VERDICT
    assert (
        why
        == 'tests/integration/test_x.py::test_b errored (failed on setup with "AssertionError: redis-server exited with 1")'
    )


def test_an_error_in_teardown_or_collection_judges_nothing():
    assert M.verdict(M.read_junit(junit(case("test_a"), case("test_a", TEARDOWN_ERROR))))[0] == M.NO_VERDICT
    collection = case("test_x", COLLECTION_ERROR, classname="tests.integration.test_x", path=None)
    state, why = M.verdict(M.read_junit(junit(collection)))
    assert state == M.NO_VERDICT and why.startswith("tests.integration.test_x errored (collection failure)")


def test_a_run_that_tested_nothing_judges_nothing():
    skipped = case("test_a", '<skipped type="pytest.skip" message="no engine">s</skipped>')
    outcome = M.read_junit(junit(skipped))
    outcome.exit_code = 0
    assert (outcome.skipped, M.verdict(outcome)) == (1, (M.NO_VERDICT, "no test ran (pytest exit 0)"))
    assert M.verdict(M.Outcome(exit_code=4)) == (M.NO_VERDICT, "no test ran (pytest exit 4)")


def test_every_test_passing_or_a_timeout_is_not_caught():
    assert M.verdict(M.read_junit(junit(case("test_a"), case("test_b")))) == (M.NOT_CAUGHT, "none: 2 passed")
    assert M.verdict(M.Outcome(timed_out_s=300.4)) == (M.NOT_CAUGHT, "none: not caught in 300 s (stopped)")


def test_the_clean_tree_must_pass_every_test_it_runs():
    assert M.baseline_problems(M.read_junit(junit(case("test_a"), case("test_b")))) == []
    assert M.baseline_problems(M.read_junit(junit(case("test_a"), case("test_b", FAILURE)))) == [
        "tests/integration/test_x.py::test_b failed: AssertionError: lost 3 tasks"
    ]
    assert M.baseline_problems(M.read_junit(junit(case("test_b", SETUP_ERROR)))) == [
        'tests/integration/test_x.py::test_b errored: failed on setup with "AssertionError: redis-server exited with 1"'
    ]
    assert M.baseline_problems(M.Outcome(exit_code=5)) == ["no test ran (pytest exit 5)"]
    assert M.baseline_problems(M.Outcome(timed_out_s=61)) == ["did not finish in 61 s"]


def test_a_test_in_a_class_is_named_as_pytest_names_it():
    inner = case("test_c", FAILURE, classname="tests.unit.test_y.TestZ", path="tests/unit/test_y.py")
    assert M.verdict(M.read_junit(junit(inner))) == (M.CAUGHT, "tests/unit/test_y.py::TestZ::test_c")


def test_every_fault_applies_to_the_tree_exactly_once_and_names_tests_that_exist():
    assert M.check_applies(list(M.MUTANTS)) == {}
    names = [m.name for m in M.MUTANTS]
    assert len(names) == len(set(names))
    for mutant in M.MUTANTS:
        assert all(t.startswith("tests/") for t in mutant.tests), (mutant.name, mutant.tests)
        files = [t.split("::")[0] for t in mutant.tests]
        assert all((ROOT / f).is_file() for f in files), (mutant.name, mutant.tests)
        for test in mutant.tests:  # a test named by its function: the function is there
            if "::" in test:
                path, name = test.split("::", 1)
                function = name.split("::")[-1].split("[")[0]
                assert f"def {function}(" in (ROOT / path).read_text(), (mutant.name, test)
        assert not any(t.startswith(("tests/compose", "tests/swarm", "tests/claims")) for t in mutant.tests)


def test_another_suites_faults_are_its_own_modules_and_a_missing_one_says_so(capsys, monkeypatch):
    """make mutants suite=compose runs tests/mutants_compose.py; until it exists, exit 2 saying so."""
    monkeypatch.setitem(M.SUITES, "compose", "tests.no_such_mutants_module")
    assert M.main(["--suite", "compose"]) == 2
    assert "tests/no_such_mutants_module.py does not exist yet" in capsys.readouterr().err


def test_the_table_of_faults_gives_the_exit_code_of_its_worst_verdict():
    def row(state: str) -> tuple:
        return (M.MUTANTS[0], "tests/x.py::test_y", state, 1.0)

    said: list[str] = []
    assert M.report([row(M.CAUGHT), row(M.CAUGHT)], 0.0, said.append) == 0
    assert said[-1].startswith("\n2 of 2 caught in ")
    assert f"| {M.MUTANTS[0].fault} | `tests/x.py::test_y` | {M.CAUGHT} | 1 |" in said
    assert M.report([row(M.CAUGHT), row(M.NOT_CAUGHT)], 0.0, said.append) == 1
    assert M.report([row(M.NOT_CAUGHT), row(M.NO_VERDICT)], 0.0, said.append) == 2
