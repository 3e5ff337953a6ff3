"""The ledger: every task of every run accounted for, in Redis.

Keys (all under `lab:`, the only keys `make reset` ever deletes):
  lab:runs                      SET   run names
  lab:run:<run>:ledger          HASH  "<queue>:<kind>/<variant>:<stat>" -> count, plus
                                      first_enqueued_at / last_settled_at (unix seconds)
  lab:enqueue-write:<token>     STRING  a written batch of enqueue counts (expires after an hour)
  lab:run:<run>:settled         SET   task_ids already completed or failed
  lab:run:<run>:work:<queue>:<kind>/<variant>   the counter the tasks INCRBY

Enqueues are counted once the broker has the task (EnqueueCounts);
`background`'s before its 202, as its task lives in the API process
(Ledger.count_enqueued_now). A task
is settled once: the first execution that ends records `completed` or
`failed`; any later execution of the same task_id counts as a duplicate.
Every execution also counts as `started` when it begins, so `unfinished`
(started - completed - failed - duplicates) is what is running now, or, once
a run has drained, the executions cut off by a crash and run again.
"""

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable

import redis
import redis.asyncio as aioredis

from lab.protocol import TaskMessage
from lab.redis_clients import REDIS_DOWN, BlockingLink, Link, _bulk

log = logging.getLogger("lab.ledger")
STATS = ("enqueued", "started", "completed", "failed", "duplicates")

# Enqueues are counted after the broker accepted the task, in memory, and
# written by one background writer: a request pays for a dict update, not a
# Redis round trip. A write carries the counts added up per run and
# queue/kind/variant since the last one, under a token of its own: a write
# whose reply was lost is sent again with the same token and applied once.
# KEYS: the token's key. ARGV: run, its ledger hash, "<queue>:<kind>/<variant>",
# count, value sum, first enqueued_at, per row.
_ENQUEUE_COUNTS = """
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

# Takes back a write of _ENQUEUE_COUNTS that failed (a 503 was answered for
# its tasks) though Redis may have applied it or may still apply it: if its
# token is free, it is taken, so the write can never land; if the write
# landed, its counts are subtracted. Same KEYS and ARGV.
_UNDO_ENQUEUE_COUNTS = """
if redis.call('SET', KEYS[1], 1, 'NX', 'EX', 3600) then return 0 end
for i = 1, #ARGV, 6 do
  local ledger, f = ARGV[i + 1], ARGV[i + 2]
  redis.call('HINCRBY', ledger, f .. ':enqueued', -ARGV[i + 3])
  redis.call('HINCRBY', ledger, f .. ':value', -ARGV[i + 4])
end
return 1
"""

# Executions starting and ending. SADD decides, atomically, whether an ending
# execution is the first to settle its task. KEYS: the run's settled set and
# ledger hash. ARGV: now, the prefix of the run's work counters, then per
# execution: op ("started", "completed" or "failed"), task_id,
# "<queue>:<kind>/<variant>", the value to INCRBY the task's work counter by
# first ("0": none, the task wrote it itself), and 1 when an ending execution
# also counts as started (its start was not written on its own). Returns per
# item 1 (first to settle), 0 (a duplicate) or -1 (a start).
_EXECUTIONS = """
local out, settled = {}, false
for i = 3, #ARGV, 5 do
  local op, f, write = ARGV[i], ARGV[i + 2], tonumber(ARGV[i + 3])
  if write ~= 0 then redis.call('INCRBY', ARGV[2] .. f, write) end
  if op == 'started' or ARGV[i + 4] == '1' then redis.call('HINCRBY', KEYS[2], f .. ':started', 1) end
  if op == 'started' then
    out[#out + 1] = -1
  elseif redis.call('SADD', KEYS[1], ARGV[i + 1]) == 1 then
    redis.call('HINCRBY', KEYS[2], f .. ':' .. op, 1)
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


def run_key(run: str, suffix: str) -> str:
    return f"lab:run:{run}:{suffix}"


def work_key(msg: TaskMessage) -> str:
    return run_key(msg.run, f"work:{msg.fields}")


class Batcher:
    """Sends, in one round trip, every item submitted while the previous send
    was in flight: the first caller waits for nobody, those that come while
    Redis answers it go together next. Under load that turns one Redis call per
    task into one per batch, which is most of what the ledger costs a process.

    A caller that finds nothing in flight sends its item itself, from its own
    task: a worker settling one task at a time pays no task and no future per
    settle (≈10 µs, and an extra turn of the event loop, each). What comes
    while a send is in flight is sent by a flusher task, one batch at a time,
    so there is never more than one send in flight (the ledger's Links rely
    on it).

    `submit` waits for the item's result; `submit_later` does not (the item goes
    with the next batch, or after `linger_s`). A failed send fails its items
    and those submitted meanwhile: they would meet the same broken Redis, and a
    request must get its 503 after one timeout, not after two."""

    def __init__(self, send: Callable[[list], Awaitable[list]], linger_s: float = 0.5):
        self._send = send
        self._items: list[tuple[object, asyncio.Future | None]] = []
        self._busy = False  # a send is in flight, a caller's or the flusher's
        self._flusher: asyncio.Task | None = None  # held: the loop keeps only a weak reference
        self._timer: asyncio.TimerHandle | None = None
        self.linger_s = linger_s

    async def submit(self, item):
        if self._busy:
            future = asyncio.get_running_loop().create_future()
            self._items.append((item, future))
            return await future
        self._busy = True
        try:
            [result] = await self._send([item])
        except asyncio.CancelledError:
            raise  # this caller's own cancellation: what came meanwhile was not sent, and goes next
        except BaseException as exc:
            batch, self._items = self._items, []
            self._fail(batch, exc)
            raise
        finally:
            self._busy = False
            if self._items:
                self._start()
        return result

    def submit_later(self, item) -> None:
        self._items.append((item, None))
        if not self._busy and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.linger_s, self._start)

    def _start(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._busy:
            self._busy = True
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    @staticmethod
    def _fail(batch: list, exc: BaseException) -> None:
        lazy = sum(future is None for _, future in batch)
        if lazy:
            log.warning("%d execution start(s) not recorded: %s", lazy, exc)
        for _, future in batch:
            if future is not None and not future.done():
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)

    async def _flush(self) -> None:
        try:
            while self._items:
                batch, self._items = self._items, []
                try:
                    results = await self._send([item for item, _ in batch])
                except BaseException as exc:
                    batch, self._items = batch + self._items, []
                    self._fail(batch, exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, future), result in zip(batch, results):
                    if future is not None and not future.done():
                        future.set_result(result)
        finally:
            self._busy, self._flusher = False, None


def _tally(rows: dict, msg: TaskMessage) -> None:
    row = rows.get((msg.run, msg.fields))
    if row is None:
        rows[(msg.run, msg.fields)] = [1, msg.value, msg.enqueued_at]
    else:
        row[0] += 1
        row[1] += msg.value


def _token_key(token: str) -> str:
    return f"lab:enqueue-write:{token}"


def _count_args(rows: dict) -> list:
    return [
        x
        for (run, fields), (n, value, first) in rows.items()
        for x in (run, run_key(run, "ledger"), fields, n, value, repr(first))
    ]


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
    answers."""

    def __init__(
        self, script, undo_script, link: Link, writer_link: Link, retry_s: float = 1.0, linger_s: float = 0.05
    ):
        self._script = script
        self._link = link  # write_now's, which one Batcher calls one batch at a time
        # The writer's own: through the client's pool a write cost the API
        # 366,000 CPU instructions, on a kept connection 220,000 (callgrind).
        self._writer_link = writer_link
        self._undo_script = undo_script
        self.retry_s = retry_s
        # A write waits this long for company: at a few hundred tasks a second
        # one round trip carries tens of them. It is also what a SIGKILL loses.
        self.linger_s = linger_s
        self._rows: dict[tuple[str, str], list] = {}
        self._undos: list[tuple[str, list]] = []
        self._writer: asyncio.Task | None = None

    def add(self, msg: TaskMessage) -> None:
        _tally(self._rows, msg)
        self._start()

    async def write_now(self, msgs: list[TaskMessage]) -> None:
        rows: dict[tuple[str, str], list] = {}
        for msg in msgs:
            _tally(rows, msg)
        token, args = uuid.uuid4().hex, _count_args(rows)
        try:
            await self._link.script(self._script, [_token_key(token)], args)
        except BaseException:
            # Its callers get a 503, and their tasks never run; Redis may have
            # applied the write all the same (a lost reply), or may yet.
            self._undos.append((token, args))
            self._start()
            raise

    def _start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def written(self) -> None:
        """Return once every count added (or taken back) so far is in Redis."""
        while self._writer is not None:
            await asyncio.shield(self._writer)

    async def _write(self) -> None:
        try:
            while self._rows or self._undos:
                if self._rows:
                    await asyncio.sleep(self.linger_s)
                    rows, self._rows = self._rows, {}
                    await self._send(self._script, uuid.uuid4().hex, _count_args(rows))
                while self._undos:
                    await self._send(self._undo_script, *self._undos[0])
                    self._undos.pop(0)
        finally:
            self._writer = None
            if self._rows or self._undos:  # the writer was cancelled (the process is stopping)
                log.warning(
                    "%d enqueue count row(s) not written: the writer was stopped", len(self._rows) + len(self._undos)
                )

    async def _send(self, script, token: str, args: list) -> None:
        failures = 0
        while True:
            try:
                await self._writer_link.script(script, [_token_key(token)], args)
                break
            except Exception as exc:
                if failures == 0:
                    log.warning("enqueue counts not written yet (%s): retrying every %.0f s", exc, self.retry_s)
                failures += 1
                await asyncio.sleep(self.retry_s)
        if failures:
            log.warning("enqueue counts written after %d failed attempt(s)", failures)


def _executions_call(
    run: str, items: list[tuple[str, TaskMessage, bool, bool]], now: float | None = None
) -> tuple[list, list]:
    """KEYS and ARGV of _EXECUTIONS for items (op, msg, write, started) of one run."""
    args = [repr(time.time() if now is None else now), run_key(run, "work:")]
    for op, m, write, started in items:
        args += [op, m.task_id, m.fields, m.value if write else 0, 1 if started else 0]
    return [run_key(run, "settled"), run_key(run, "ledger")], args


class _SettleCommands:
    """The EVALSHA of _EXECUTIONS for one item, in RESP, byte for byte what
    `_pack` makes of _executions_call's KEYS and ARGV; what a run never
    changes (the script, its keys, its work counters' prefix) is packed once.
    A task settles alone nearly always; packing its call argument by argument
    cost a FastStream worker about 10 µs of CPU a task (py-spy), for what is
    one concatenation here."""

    MAX_RUNS = 64  # runs whose parts are kept; a worker sees one or two at a time

    def __init__(self, sha: str):
        self.sha = sha
        self._runs: dict[str, tuple[bytes, bytes]] = {}

    def __call__(self, now: float, op: str, msg: TaskMessage, write: bool, started: bool) -> bytes:
        parts = self._runs.get(msg.run)
        if parts is None:
            if len(self._runs) >= self.MAX_RUNS:
                self._runs.clear()
            # EVALSHA, the script, 2 KEYS (settled, ledger), 7 ARGV: time, work prefix, op, id, fields, value, started
            head = b"*12\r\n" + b"".join(
                _bulk(part.encode())
                for part in ("EVALSHA", self.sha, "2", run_key(msg.run, "settled"), run_key(msg.run, "ledger"))
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


def _by_run(items: list, run_of) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[run_of(item)].append(i)
    return groups


class Start:
    """An execution's start waiting to be counted (see Ledger.start_later)."""

    __slots__ = ("msg", "due")

    def __init__(self, msg: TaskMessage, due: float):
        self.msg, self.due = msg, due


class Ledger:
    def __init__(self, redis: aioredis.Redis):
        self.redis = redis
        self._executions = redis.register_script(_EXECUTIONS)
        # Each batcher sends one call at a time, so each keeps a connection of
        # its own: the executions' one here, the enqueue counts' (write_now and
        # the background writer) in EnqueueCounts.
        self._executions_link = Link(redis)
        self._settle_command = _SettleCommands(self._executions.sha)
        self.enqueues = EnqueueCounts(
            redis.register_script(_ENQUEUE_COUNTS),
            redis.register_script(_UNDO_ENQUEUE_COUNTS),
            Link(redis),
            Link(redis),
        )
        self._execution_batch = Batcher(self._record_executions)
        self._enqueue_batch = Batcher(self._count_now)
        # Starts not counted yet, and the one timer that writes those that are due.
        self._starts: dict[Start, bool] = {}
        self._starts_timer: asyncio.TimerHandle | None = None

    def count_enqueued(self, msg: TaskMessage) -> None:
        """Count a task its broker accepted; written to Redis in the background."""
        self.enqueues.add(msg)

    async def count_enqueued_now(self, msg: TaskMessage) -> None:
        """Count a task and return once Redis has the count: for `background`,
        whose task lives in this process, so that its SIGKILL can lose the task
        (it stays pending) but never the count of a task answered 202. It is
        also `background`'s check that Redis answers: a failure raises, for a
        503. Callers share one script call per batch."""
        await self._enqueue_batch.submit(msg)

    async def _count_now(self, msgs: list) -> list:
        await self.enqueues.write_now(msgs)
        return [None] * len(msgs)

    async def record_enqueued(self, msg: TaskMessage) -> None:
        """Count a task and wait until the count is in Redis."""
        self.enqueues.add(msg)
        await self.enqueues.written()

    async def _per_run(self, items: list, run_of, call) -> list:
        """One script call per run among `items` (nearly always one run): alone,
        or in a pipeline. `call(run, indexes, pipe)` makes it; the replies come
        back in the order of `items`."""
        groups = _by_run(items, run_of)
        if len(groups) == 1:
            [(run, idx)] = groups.items()
            replies = {run: await call(run, idx, None)}
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                for run, idx in groups.items():
                    await call(run, idx, pipe)
                replies = dict(zip(groups, await pipe.execute()))
        out = [0] * len(items)
        for run, idx in groups.items():
            for i, reply in zip(idx, replies[run]):
                out[i] = reply
        return out

    async def _record_executions(self, items: list[tuple[str, TaskMessage, bool, bool]]) -> list[int]:
        if len(items) == 1:  # a task settling alone, as nearly every one in a worker
            now = time.time()
            try:
                return await self._executions_link.execute_packed(self._settle_command(now, *items[0]))
            except redis.exceptions.NoScriptError:  # Redis restarted: its script cache is empty
                keys, args = _executions_call(items[0][1].run, items, now)
                return await self._executions_link.execute("EVAL", self._executions.script, len(keys), *keys, *args)

        def call(run, idx, pipe):
            keys, args = _executions_call(run, [items[i] for i in idx])
            if pipe is None:
                return self._executions_link.script(self._executions, keys, args)
            return self._executions(keys=keys, args=args, client=pipe)

        return await self._per_run(items, lambda item: item[1].run, call)

    async def record_started(self, msg: TaskMessage) -> None:
        await self._execution_batch.submit(("started", msg, False, False))

    def start_later(self, msg: TaskMessage, linger_s: float = 0.5) -> Start:
        """An execution's start, counted when it settles, in the settle's own write,
        or after `linger_s` if it is still running then (so that `unfinished`
        shows a long task). A crash before either loses the start, never the
        task: `unfinished` may then miss it.

        One timer serves every pending start (a timer per task, set and
        cancelled, cost a worker as much as validating the task's message)."""
        loop = asyncio.get_running_loop()
        start = Start(msg, loop.time() + linger_s)
        self._starts[start] = True
        timer = self._starts_timer
        if timer is None or start.due < timer.when():
            if timer is not None:
                timer.cancel()
            self._starts_timer = loop.call_at(start.due, self._write_due_starts)
        return start

    def _write_due_starts(self) -> None:
        loop = asyncio.get_running_loop()
        now, next_due = loop.time() + 0.001, None  # the loop runs a timer up to its clock's resolution early
        for start in list(self._starts):
            if start.due <= now:
                del self._starts[start]
                self._execution_batch.submit_later(("started", start.msg, False, False))
            elif next_due is None or start.due < next_due:
                next_due = start.due
        self._starts_timer = None if next_due is None else loop.call_at(next_due, self._write_due_starts)

    async def settle(
        self, msg: TaskMessage, outcome: str, write: bool = False, start: Start | None = None, retry_s: float = 0
    ) -> bool:
        """Record `completed` or `failed`; False when this task was already settled.
        write=True first adds the task's value to its work counter, in the same
        script: the task's own INCRBY and its ledger entry in one round trip.
        A `start` not yet written is counted in the same write too.

        retry_s: when Redis cannot be reached, try again every second for that
        long. The task has run; without its settle it would stay pending for
        ever (a queue whose library counts the raised error as the task's
        failure never runs it again). A retry that finds the task already
        settled takes that for its own lost attempt having reached Redis (a
        second execution settling it in the same seconds would be missed as a
        duplicate)."""
        # True if its start was not written yet: this write counts it.
        started = start is not None and self._starts.pop(start, False)
        item = (outcome, msg, write, started)
        deadline = time.monotonic() + retry_s
        try:
            return await self._execution_batch.submit(item) == 1
        except REDIS_DOWN:
            if not retry_s:
                raise
        while True:
            await asyncio.sleep(1)
            try:
                if await self.redis.sismember(run_key(msg.run, "settled"), msg.task_id):
                    return True
                return await self._execution_batch.submit(item) == 1
            except REDIS_DOWN:
                if time.monotonic() > deadline:
                    raise

    async def runs(self) -> list[str]:
        return sorted(r.decode() for r in await self.redis.smembers("lab:runs"))

    async def report(self, run: str) -> dict | None:
        """The ledger of a run: per queue and kind/variant, and in total."""
        if not await self.redis.sismember("lab:runs", run):
            return None
        raw = {k.decode(): v.decode() for k, v in (await self.redis.hgetall(run_key(run, "ledger"))).items()}
        queues: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for field, value in raw.items():
            if field.count(":") != 2:
                continue
            queue, endpoint, stat = field.split(":")
            row = queues[queue].setdefault(endpoint, dict.fromkeys((*STATS, "value"), 0))
            row[stat] = int(value)
        rows = [(q, e, row) for q, endpoints in queues.items() for e, row in endpoints.items()]
        # `work` is what the tasks really added up: `value` plus whatever duplicates added.
        work = await self.redis.mget([run_key(run, f"work:{q}:{e}") for q, e, _ in rows]) if rows else []
        totals = dict.fromkeys((*STATS, "pending", "unfinished"), 0)
        for (_, _, row), done in zip(rows, work):
            row["pending"] = row["enqueued"] - row["completed"] - row["failed"]
            row["unfinished"] = row["started"] - row["completed"] - row["failed"] - row["duplicates"]
            row["work"] = int(done or 0)
            for stat in totals:
                totals[stat] += row[stat]
        return {
            "run": run,
            "queues": {q: dict(sorted(e.items())) for q, e in sorted(queues.items())},
            "totals": totals,
            "first_enqueued_at": float(raw["first_enqueued_at"]) if "first_enqueued_at" in raw else None,
            "last_settled_at": float(raw["last_settled_at"]) if "last_settled_at" in raw else None,
        }

    async def reset(self, run: str | None = None) -> int:
        """Delete the ledger of one run, or of all runs. Never touches other keys
        (queues included: tasks still queued keep their place)."""
        pattern = run_key(run if run else "*", "*")
        deleted = 0
        async for key in self.redis.scan_iter(match=pattern, count=500):
            deleted += await self.redis.delete(key)
        if run:
            await self.redis.srem("lab:runs", run)
        else:
            deleted += await self.redis.delete("lab:runs")
        return deleted


class BlockingSettle:
    """Ledger.settle for a process that runs one task at a time with no event
    loop between tasks (Celery's prefork and solo children): the same script,
    sent at once on a connection of its own (BlockingLink), as the bare worker
    sends its INCRBY.
    There is never a batch to share, and handing each settle to an event loop
    cost such a child more than the task itself (TaskRunner.run_blocking).

    The start is always counted in the settle's own write: no loop runs while
    such a task does, to write it on its own. A settle that cannot reach Redis
    is retried as Ledger.settle's is."""

    def __init__(self, redis_sync: redis.Redis):
        self.redis = redis_sync
        self._executions = redis_sync.register_script(_EXECUTIONS)
        self._link = BlockingLink(redis_sync)

    def _send(self, outcome: str, msg: TaskMessage, write: bool) -> bool:
        keys, args = _executions_call(msg.run, [(outcome, msg, write, True)])
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


def main(argv: list[str] | None = None) -> None:
    """`python -m lab.ledger reset [--run NAME]` / `... show RUN` / `... runs`."""
    import argparse
    import asyncio
    import json

    from lab.redis_clients import async_client
    from lab.settings import get_settings

    parser = argparse.ArgumentParser(prog="python -m lab.ledger", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    reset = sub.add_parser("reset", help="delete the lab's keys: every run, or one (never FLUSHALL)")
    reset.add_argument("--run", help="only this run")
    show = sub.add_parser("show", help="print a run's ledger as JSON")
    show.add_argument("run")
    sub.add_parser("runs", help="list the runs")
    args = parser.parse_args(argv)

    async def go() -> None:
        redis = async_client(get_settings())
        ledger = Ledger(redis)
        try:
            if args.command == "reset":
                n = await ledger.reset(args.run)
                print(f"deleted {n} key(s) of {'run ' + args.run if args.run else 'all runs'}")
            elif args.command == "show":
                print(json.dumps(await ledger.report(args.run), indent=2))
            else:
                print("\n".join(await ledger.runs()))
        finally:
            await redis.aclose()

    asyncio.run(go())


if __name__ == "__main__":
    main()
