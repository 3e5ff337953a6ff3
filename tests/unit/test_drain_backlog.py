"""A run is settled only when no queue and endpoint has a task pending: a cell
with more settled than enqueued (a 503 whose task ran anyway) must not hide
another cell's backlog in the totals, as it did in a mixed run."""

import time

from labctl.load_run.task_wait import is_settled
from labctl.records.run_tasks import backlog_of, task_figures


def ledger(cells: dict) -> dict:
    queues: dict = {}
    for (queue, endpoint), (enqueued, completed) in cells.items():
        queues.setdefault(queue, {})[endpoint] = {
            "enqueued": enqueued,
            "completed": completed,
            "failed": 0,
            "duplicates": 0,
            "pending": enqueued - completed,
        }
    enqueued = sum(e for e, _ in cells.values())
    completed = sum(c for _, c in cells.values())
    totals = {
        "enqueued": enqueued,
        "completed": completed,
        "failed": 0,
        "duplicates": 0,
        "pending": enqueued - completed,
    }
    return {"queues": queues, "totals": totals, "first_enqueued_at": 1.0, "last_settled_at": 2.0}


def test_a_cell_with_extra_settles_does_not_hide_another_cells_backlog():
    led = ledger({("rq", "io/sync"): (299, 296), ("streaq", "io/thread"): (282, 286)})
    assert led["totals"]["pending"] == -1  # the totals say "nothing pending"
    assert backlog_of(led) == 3
    assert not is_settled(led, accepted=581, load_end=time.time() - 60)
    assert task_figures(led, 0.0, True).lost == 3


def test_a_ledger_with_nothing_pending_anywhere_is_settled():
    led = ledger({("rq", "io/sync"): (299, 299), ("huey", "io/simple"): (10, 10)})
    assert backlog_of(led) == 0
    assert is_settled(led, accepted=309, load_end=time.time())
