"""What every bare task is: its name, what it carries, and the counter it adds its value to."""

import os
import time

TASK = "bench_task"
RUN = "bench"


def message(queue: str, kind: str, variant: str, value: int) -> dict:
    """What a bare app sends: a task of the lab's message's shape (TaskMessage.payload
    in lab/protocol.py: the same keys, a 32-hex-digit id, a unix time), so each
    library carries as much for the bare app as for the lab. A library whose
    enqueue costs more for more arguments (procrastinate's logs a copy of
    them) then costs both sides the same, and the bench's ratio is the lab's
    own cost: its ledger, metrics and message, not the size of a task."""
    return {
        "task_id": os.urandom(16).hex(),
        "run": RUN,
        "queue": queue,
        "kind": kind,
        "variant": variant,
        "value": value,
        "enqueued_at": time.time(),
    }


def done_key(queue: str) -> str:
    """The counter every bare task INCRBYs by its message's value: the tasks executed so far."""
    return f"bench:done:{queue}"
