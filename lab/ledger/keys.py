"""The ledger's Redis keys, all under `lab:` (the only keys `make reset` ever deletes):

lab:runs                      SET   run names
lab:run:<run>:ledger          HASH  "<queue>:<kind>/<variant>:<stat>" -> count, plus
                                    first_enqueued_at / last_settled_at (unix seconds) and
                                    enqueued_after_error (tasks answered 503 that ran)
lab:enqueue-write:<token>     STRING  a written batch of enqueue counts (expires after an hour)
lab:run:<run>:settled         SET   task_ids already completed or failed
lab:run:<run>:refused         HASH  task_id -> value, of each task whose enqueue failed
lab:run:<run>:work:<queue>:<kind>/<variant>   the counter the tasks INCRBY
"""

from lab.protocol import TaskMessage

# What the ledger counts per queue and kind/variant. `purged`: tasks still pending
# when `make purge` emptied their queue (Ledger.purge); never run, never lost.
STATS = ("enqueued", "started", "completed", "failed", "duplicates", "purged")
RUNS = "lab:runs"


def run_key(run: str, suffix: str) -> str:
    return f"lab:run:{run}:{suffix}"


def work_key(msg: TaskMessage) -> str:
    return run_key(msg.run, f"work:{msg.fields}")


def enqueue_token_key(token: str) -> str:
    """A written batch of enqueue counts: the token that makes its write apply once."""
    return f"lab:enqueue-write:{token}"


def settle_keys(run: str) -> list[str]:
    """KEYS of EXECUTIONS: the run's settled set, ledger and refused enqueues."""
    return [run_key(run, "settled"), run_key(run, "ledger"), run_key(run, "refused")]


def refused_keys(run: str) -> list[str]:
    """KEYS of REFUSED_ENQUEUES: the run's refused enqueues, settled set and ledger."""
    return [run_key(run, "refused"), run_key(run, "settled"), run_key(run, "ledger")]
