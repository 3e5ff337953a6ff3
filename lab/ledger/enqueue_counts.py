"""EnqueueCounts: the enqueues the brokers accepted, counted in memory and
written to the ledger by one background writer, with the Lua that writes a
batch of them once (and takes back one whose tasks were refused), and the
enqueues that failed, noted by the same writer in case their broker had them
after all."""

import asyncio
import logging
import uuid

from lab.ledger.keys import enqueue_token_key, refused_keys, run_key
from lab.protocol import TaskMessage
from lab.redis_clients import Link

log = logging.getLogger("lab.ledger")

# Enqueues are counted after the broker accepted the task, in memory, and
# written by one background writer: a request pays for a dict update, not a
# Redis round trip. A write carries the counts added up per run and
# queue/kind/variant since the last one, under a token of its own: a write
# whose reply was lost is sent again with the same token and applied once.
# KEYS: the token's key. ARGV: run, its ledger hash, "<queue>:<kind>/<variant>",
# count, value sum, first enqueued_at, per row.
ENQUEUE_COUNTS = """
if not redis.call('SET', KEYS[1], 1, 'NX', 'EX', 3600) then return 0 end
for i = 1, #ARGV, 6 do
  local ledger, f = ARGV[i + 1], ARGV[i + 2]
  redis.call('HINCRBY', ledger, f .. ':enqueued', ARGV[i + 3])
  redis.call('HINCRBY', ledger, f .. ':value', ARGV[i + 4])
  redis.call('HSETNX', ledger, 'first_enqueued_at', ARGV[i + 5])
  redis.call('SADD', 'lab:runs', ARGV[i])
end
return 1
"""

# Takes back a write of ENQUEUE_COUNTS that failed (a 503 was answered for
# its tasks) though Redis may have applied it or may still apply it: if its
# token is free, it is taken, so the write can never land; if the write
# landed, its counts are subtracted. Same KEYS and ARGV.
UNDO_ENQUEUE_COUNTS = """
if redis.call('SET', KEYS[1], 1, 'NX', 'EX', 3600) then return 0 end
for i = 1, #ARGV, 6 do
  local ledger, f = ARGV[i + 1], ARGV[i + 2]
  redis.call('HINCRBY', ledger, f .. ':enqueued', -ARGV[i + 3])
  redis.call('HINCRBY', ledger, f .. ':value', -ARGV[i + 4])
end
return 1
"""

# Enqueues that failed (the API answered 503, or the outbox gave up on a
# publish) whose outcome the API cannot know: a timeout may have cut off the
# broker's reply, not the request (arq's enqueue_job even answers None for a
# reply lost while watching its job's key). Each is noted with its value; a
# noted task that settles had landed, and is counted enqueued by whichever of
# this and its settle (EXECUTIONS) comes second. HSETNX makes a retried write
# apply once. A note is the task's value, with ACCEPTED after it when the
# client had its 202 before the publish failed (ENQUEUE_MODE=after-response):
# such a task is counted enqueued, as its 202 was, but not in
# `enqueued_after_error`, which counts the tasks answered 503 that ran.
# KEYS: the run's refused enqueues, settled set and ledger hash.
# ARGV: the run, then per task task_id, "<queue>:<kind>/<variant>", note.
ACCEPTED = "a"  # a note's mark: its task was answered 202
# The Lua that counts a noted task that settled, in the ledger hash `ledger`:
# the one reader of a note, in this script and in the settle's (EXECUTIONS).
COUNT_NOTED = f"""
local function count_noted(ledger, f, note)
  local value, accepted = string.match(note, '^(%d+)({ACCEPTED}?)$')
  redis.call('HINCRBY', ledger, f .. ':enqueued', 1)
  redis.call('HINCRBY', ledger, f .. ':value', value)
  if accepted == '' then redis.call('HINCRBY', ledger, 'enqueued_after_error', 1) end
end
"""
REFUSED_ENQUEUES = (
    COUNT_NOTED
    + """
redis.call('SADD', 'lab:runs', ARGV[1])
for i = 2, #ARGV, 3 do
  local id, f = ARGV[i], ARGV[i + 1]
  if redis.call('HSETNX', KEYS[1], id, ARGV[i + 2]) == 1 and redis.call('SISMEMBER', KEYS[2], id) == 1 then
    count_noted(KEYS[3], f, ARGV[i + 2])
  end
end
return 1
"""
)


def _tally(rows: dict, msg: TaskMessage) -> None:
    row = rows.get((msg.run, msg.fields))
    if row is None:
        rows[(msg.run, msg.fields)] = [1, msg.value, msg.enqueued_at]
    else:
        row[0] += 1
        row[1] += msg.value


def _count_args(rows: dict) -> list:
    return [
        x
        for (run, fields), (n, value, first) in rows.items()
        for x in (run, run_key(run, "ledger"), fields, n, value, repr(first))
    ]


def _end(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


class EnqueueCounts:
    """Enqueues the brokers accepted, added up in memory and written by one
    background writer: whatever was counted while a write was in flight goes
    in the next. A write that fails (Redis down or frozen) is retried with the
    same token every `retry_s` until Redis takes it, and the counts added
    meanwhile wait behind it, in memory that grows with the number of runs and
    task shapes, not of tasks. What a SIGKILL of the process loses is the one
    write in flight, and the counts of the last `linger_s`.

    `write_now` writes counts at once instead, for a caller that waits for
    them; when its call fails, the same writer takes them back once Redis
    answers. `refused` notes a task whose enqueue failed (REFUSED_ENQUEUES),
    written by the same writer, retried the same way."""

    def __init__(
        self,
        script,
        undo_script,
        refused_script,
        link: Link,
        writer_link: Link,
        retry_s: float = 1.0,
        linger_s: float = 0.25,
    ):
        self._script = script
        self._refused_script = refused_script
        self._link = link  # write_now's, which one Batcher calls one batch at a time
        # The writer's own kept connection, not the client's pool (fast path: docs/hot-path.md).
        self._writer_link = writer_link
        self._undo_script = undo_script
        self.retry_s = retry_s
        # A write waits this long for company: at a few hundred tasks a second
        # one round trip carries tens of them, and a 0.2-CPU API pays for a few
        # writes a second, not tens. It is also what a SIGKILL loses.
        self.linger_s = linger_s
        self._rows: dict[tuple[str, str], list] = {}
        self._undos: list[tuple[list[str], list]] = []  # (KEYS, ARGV) of UNDO_ENQUEUE_COUNTS
        self._refused: dict[str, list] = {}  # run -> ARGV of REFUSED_ENQUEUES
        self._refused_held = self._refused_dropped = 0
        self._writer: asyncio.Task | None = None
        self._pausing: asyncio.Future | None = None  # the writer's pause, which written() ends early
        self._readers = 0  # callers of written() waiting now: the writer lingers for nobody

    def add(self, msg: TaskMessage) -> None:
        _tally(self._rows, msg)
        self._start()

    # Notes held while Redis is away, at about 100 bytes each: a long outage
    # under load must not take the API's memory. Past it a note is dropped,
    # and said so; a dropped task that ran reads as pending < 0 in its run.
    MAX_REFUSED = 100_000

    def refused(self, msg: TaskMessage, accepted: bool = False) -> None:
        if self._refused_held >= self.MAX_REFUSED:
            if not self._refused_dropped:
                log.warning("more than %d failed enqueues waiting to be noted: dropping the rest", self.MAX_REFUSED)
            self._refused_dropped += 1
            return
        note = f"{msg.value}{ACCEPTED}" if accepted else msg.value
        self._refused.setdefault(msg.run, [msg.run]).extend((msg.task_id, msg.fields, note))
        self._refused_held += 1
        self._start()

    async def write_now(self, msgs: list[TaskMessage]) -> None:
        rows: dict[tuple[str, str], list] = {}
        for msg in msgs:
            _tally(rows, msg)
        token, args = uuid.uuid4().hex, _count_args(rows)
        try:
            await self._link.script(self._script, [enqueue_token_key(token)], args)
        except BaseException:
            # Its callers get a 503, and their tasks never run; Redis may have
            # applied the write all the same (a lost reply), or may yet.
            self._undos.append(([enqueue_token_key(token)], args))
            self._start()
            raise

    def _start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def written(self) -> None:
        """Return once every count added (or taken back) so far is in Redis.
        Meanwhile the writer does not linger, and a retry it was waiting for
        is made at once."""
        self._readers += 1
        try:
            while self._writer is not None:
                if self._pausing is not None:
                    _end(self._pausing)
                await asyncio.shield(self._writer)
        finally:
            self._readers -= 1

    async def _pause(self, seconds: float) -> None:
        """asyncio.sleep(seconds), which written() can end early."""
        loop = asyncio.get_running_loop()
        self._pausing = pausing = loop.create_future()
        timer = loop.call_later(seconds, _end, pausing)
        try:
            await pausing
        finally:
            timer.cancel()
            self._pausing = None

    async def _write(self) -> None:
        try:
            while self._rows or self._undos or self._refused:
                if self._rows:
                    if not self._readers:
                        await self._pause(self.linger_s)
                    rows, self._rows = self._rows, {}
                    await self._send(self._script, [enqueue_token_key(uuid.uuid4().hex)], _count_args(rows))
                while self._undos:
                    await self._send(self._undo_script, *self._undos[0])
                    self._undos.pop(0)
                while self._refused:
                    run = next(iter(self._refused))
                    args = self._refused.pop(run)
                    await self._send(self._refused_script, refused_keys(run), args)
                    self._refused_held -= len(args) // 3
                if self._refused_dropped:
                    log.warning("%d failed enqueue(s) not noted: Redis was away too long", self._refused_dropped)
                    self._refused_dropped = 0
        finally:
            self._writer = None
            left = len(self._rows) + len(self._undos) + sum(len(a) // 3 for a in self._refused.values())
            if left:  # the writer was cancelled (the process is stopping)
                log.warning("%d enqueue count row(s) not written: the writer was stopped", left)

    async def _send(self, script, keys: list[str], args: list) -> None:
        failures = 0
        while True:
            try:
                await self._writer_link.script(script, keys, args)
                break
            except Exception as exc:
                if failures == 0:
                    log.warning("enqueue counts not written yet (%s): retrying every %.0f s", exc, self.retry_s)
                failures += 1
                await self._pause(self.retry_s)
        if failures:
            log.warning("enqueue counts written after %d failed attempt(s)", failures)
