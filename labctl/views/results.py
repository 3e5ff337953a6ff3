"""`make results`: the newest runs (results/*.json) in a few columns, the latest
comparison (`make compare`) and the latest `make bench`; `make results full=1`:
every run, comparison and bench with every column. Runs whose tasks were still
being worked through when their watch ended are asked about again (their
ledgers, in the running lab) and filled in once settled."""

from __future__ import annotations

from pathlib import Path

from labctl.clients.api import ledger
from labctl.platform.orchestrator import orchestrator
from labctl.records.bench import BenchRecord
from labctl.records.compare import CompareRecord
from labctl.records.run import RunRecord
from labctl.records.store import Store
from labctl.render import bench_table, compare_table, run_table
from labctl.render.console import Console

LATEST_RUNS = 10  # the runs `make results` shows without full=1


def settle_draining(store: Store, records: list[RunRecord], ui: Console) -> None:
    """Runs whose watch ended with a backlog: ask their ledgers (the running
    lab's API) whether they have settled since, and fill their figures in."""
    draining = [r for r in records if r.is_draining()]
    if not draining:
        return
    api = orchestrator().port("api", 8000)
    if not api:
        ui.say(f"{len(draining)} run(s) still draining; the lab is not running to ask their ledgers (make up)")
        return
    for record in draining:
        led = ledger(api, record.run)
        if led is not None and record.settle_later(led):
            store.save(record)


def _print_full(
    ui: Console, runs: list[RunRecord], comparisons: list[CompareRecord], benches: list[BenchRecord]
) -> None:
    """Every record with every column (make results full=1)."""
    if runs:
        ui.say(run_table.table(runs))
    for comparison in comparisons:
        ui.say(f"\nComparison {comparison.run} (make compare)\n{compare_table.markdown(comparison)}")
    if benches:
        ui.say("\nWhat the lab costs (make bench): the lab beside a bare app and worker")
        ui.say(bench_table.table(list(benches)))


def _print_latest(
    ui: Console, runs: list[RunRecord], comparisons: list[CompareRecord], benches: list[BenchRecord], last: int
) -> None:
    """The newest runs in a few columns, the latest comparison's table and the latest bench's ratios."""
    if runs:
        ui.say(run_table.table(runs, run_table.SHORT_COLUMNS, last=last))
        shown = min(last, len(runs))
        ui.say(f"(the newest {shown} of {len(runs)} runs; make results full=1: every run and column)")
    if comparisons:
        latest = comparisons[-1]
        ui.say(f"\nLatest comparison (make compare): {latest.run}, report {latest.report or '-'}")
        ui.say(compare_table.markdown(latest))
    if benches:
        ui.say(f"\nWhat the lab costs (make bench): the lab beside a bare app and worker, {benches[-1].run}")
        ui.say(bench_table.short_table(benches[-1]))


def show_results(directory: Path, full: bool, last: int, ui: Console) -> int:
    store = Store(directory)
    runs = store.runs()
    settle_draining(store, runs, ui)
    benches, comparisons = store.benches(), store.comparisons()
    if not runs and not benches and not comparisons:
        ui.say(f"no run recorded in {directory}/ yet: make load worker=..., make compare or make bench (see make help)")
        return 0
    if full:
        _print_full(ui, runs, comparisons, benches)
    else:
        _print_latest(ui, runs, comparisons, benches, last)
    return 0
