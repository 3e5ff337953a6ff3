"""BlockingSettle: the ledger's settle for a worker process without an event loop."""

import time

import redis

from lab.ledger.executions import EXECUTIONS, executions_call
from lab.ledger.keys import run_key
from lab.protocol import TaskMessage
from lab.redis_clients import REDIS_DOWN, BlockingLink


class BlockingSettle:
    """Ledger.settle for a process that runs one task at a time with no event
    loop between tasks (Celery's prefork and solo children): the same script,
    sent at once on a connection of its own (BlockingLink), as the bare worker
    sends its INCRBY.
    There is never a batch to share, and handing each settle to an event loop
    costs such a child more than the task itself (TaskRunner.run_blocking;
    docs/hot-path.md).

    The start is always counted in the settle's own write: no loop runs while
    such a task does, to write it on its own. A settle that cannot reach Redis
    is retried as Ledger.settle's is."""

    def __init__(self, redis_sync: redis.Redis):
        self.redis = redis_sync
        self._executions = redis_sync.register_script(EXECUTIONS)
        self._link = BlockingLink(redis_sync)

    def _send(self, outcome: str, msg: TaskMessage, write: bool) -> bool:
        keys, args = executions_call(msg.run, [(outcome, msg, write, True)])
        return self._link.script(self._executions, keys, args)[0] == 1

    def settle(self, msg: TaskMessage, outcome: str, write: bool = False, retry_s: float = 0) -> bool:
        deadline = time.monotonic() + retry_s
        try:
            return self._send(outcome, msg, write)
        except REDIS_DOWN:
            if not retry_s:
                raise
        while True:
            time.sleep(1)
            try:
                if self.redis.sismember(run_key(msg.run, "settled"), msg.task_id):
                    return True  # its lost attempt reached Redis
                return self._send(outcome, msg, write)
            except REDIS_DOWN:
                if time.monotonic() > deadline:
                    raise
