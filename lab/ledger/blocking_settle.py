"""BlockingSettle: the ledger's settle for a worker process without an event loop."""

import time

import redis

from lab.ledger.executions import EXECUTIONS, SettleCommands, executions_call
from lab.ledger.keys import run_key
from lab.protocol import TaskMessage
from lab.redis_clients import REDIS_DOWN, BlockingLink


class BlockingSettle:
    """Ledger.settle for a thread that runs one task at a time with no event
    loop between tasks (Celery's prefork and solo children, RQ's work horses,
    Huey's worker threads): the same script, packed as Ledger.settle packs it,
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
        self._command = SettleCommands(self._executions.sha)

    def _send(self, outcome: str, msg: TaskMessage, write: bool) -> bool:
        try:  # Fast path: one concatenation per settle (SettleCommands, docs/hot-path.md).
            reply = self._link.execute_packed(self._command(time.time(), outcome, msg, write, True))
        except redis.exceptions.NoScriptError:  # Redis restarted: its script cache is empty
            keys, args = executions_call(msg.run, [(outcome, msg, write, True)])
            reply = self._link.execute("EVAL", self._executions.script, len(keys), *keys, *args)
        return reply[0] == 1

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
