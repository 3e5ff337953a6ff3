"""The ledger's record of executions starting and ending: the Lua script that
settles each task once, and its call, as KEYS and ARGV or packed in RESP."""

import time

from lab.ledger.enqueue_counts import COUNT_NOTED
from lab.ledger.keys import run_key, settle_keys
from lab.protocol import TaskMessage
from lab.redis_clients import _bulk

# Executions starting and ending. SADD decides, atomically, whether an ending
# execution is the first to settle its task. A task first to settle whose
# enqueue failed (the API answered 503, or the outbox's publish failed after
# its 202; REFUSED_ENQUEUES noted it, and says which) had landed all the same:
# it is counted enqueued now, unless REFUSED_ENQUEUES, seeing it settled,
# already did. KEYS: the run's settled set, ledger hash and refused
# enqueues. ARGV: now, the prefix of the run's work counters, then per
# execution: op ("started", "completed" or "failed"), task_id,
# "<queue>:<kind>/<variant>", the value to INCRBY the task's work counter by
# first ("0": none, the task wrote it itself), and 1 when an ending execution
# also counts as started (its start was not written on its own). Returns per
# item 1 (first to settle), 0 (a duplicate) or -1 (a start).
EXECUTIONS = (
    COUNT_NOTED
    + """
local out, settled = {}, false
for i = 3, #ARGV, 5 do
  local op, f, write = ARGV[i], ARGV[i + 2], tonumber(ARGV[i + 3])
  if write ~= 0 then redis.call('INCRBY', ARGV[2] .. f, write) end
  if op == 'started' or ARGV[i + 4] == '1' then redis.call('HINCRBY', KEYS[2], f .. ':started', 1) end
  if op == 'started' then
    out[#out + 1] = -1
  elseif redis.call('SADD', KEYS[1], ARGV[i + 1]) == 1 then
    redis.call('HINCRBY', KEYS[2], f .. ':' .. op, 1)
    local refused = redis.call('HGET', KEYS[3], ARGV[i + 1])
    if refused then count_noted(KEYS[2], f, refused) end
    settled = true
    out[#out + 1] = 1
  else
    redis.call('HINCRBY', KEYS[2], f .. ':duplicates', 1)
    out[#out + 1] = 0
  end
end
if settled then
  local last = tonumber(redis.call('HGET', KEYS[2], 'last_settled_at') or '0')
  if tonumber(ARGV[1]) > last then redis.call('HSET', KEYS[2], 'last_settled_at', ARGV[1]) end
end
return out
"""
)


def executions_call(
    run: str, items: list[tuple[str, TaskMessage, bool, bool]], now: float | None = None
) -> tuple[list, list]:
    """KEYS and ARGV of EXECUTIONS for items (op, msg, write, started) of one run."""
    args: list[str | int] = [repr(time.time() if now is None else now), run_key(run, "work:")]
    for op, m, write, started in items:
        args += [op, m.task_id, m.fields, m.value if write else 0, 1 if started else 0]
    return settle_keys(run), args


class SettleCommands:
    """The EVALSHA of EXECUTIONS for one item, in RESP, byte for byte what
    `_pack` makes of executions_call's KEYS and ARGV; what a run never
    changes (the script, its keys, its work counters' prefix) is packed once.
    A task settles alone nearly always: one concatenation here, where packing
    its call argument by argument costs a worker far more (fast path:
    docs/hot-path.md)."""

    MAX_RUNS = 64  # runs whose parts are kept; a worker sees one or two at a time

    def __init__(self, sha: str):
        self.sha = sha
        self._runs: dict[str, tuple[bytes, bytes]] = {}

    def __call__(self, now: float, op: str, msg: TaskMessage, write: bool, started: bool) -> bytes:
        parts = self._runs.get(msg.run)
        if parts is None:
            if len(self._runs) >= self.MAX_RUNS:
                self._runs.clear()
            # EVALSHA, the script, 3 KEYS (settled, ledger, refused), 7 ARGV: time, work prefix, op, id,
            # fields, value, started
            head = b"*13\r\n" + b"".join(
                _bulk(part.encode()) for part in ("EVALSHA", self.sha, "3", *settle_keys(msg.run))
            )
            parts = self._runs[msg.run] = (head, _bulk(run_key(msg.run, "work:").encode()))
        head, work = parts
        return b"".join(
            (
                head,
                _bulk(repr(now).encode()),
                work,
                _bulk(op.encode()),
                _bulk(msg.task_id.encode()),
                _bulk(msg.fields.encode()),
                _bulk(b"%d" % (msg.value if write else 0)),
                b"$1\r\n1\r\n" if started else b"$1\r\n0\r\n",
            )
        )
