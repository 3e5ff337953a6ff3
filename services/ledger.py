"""The ledger: every task of every run accounted for, in Redis.

Keys (all under `lab:`, the only keys `make reset` ever deletes):
  lab:runs                      SET   run names
  lab:run:<run>:ledger          HASH  "<queue>:<kind>/<variant>:<stat>" -> count, plus
                                      first_enqueued_at / last_settled_at (unix seconds)
  lab:run:<run>:enqueued        SET   task_ids counted as enqueued
  lab:run:<run>:settled         SET   task_ids already completed or failed
  lab:run:<run>:work:<queue>:<kind>/<variant>   the counter the tasks INCRBY

A task is settled once: the first execution that ends records `completed` or
`failed`; any later execution of the same task_id counts as a duplicate.
Every execution also counts as `started` when it begins, so `unfinished`
(started - completed - failed - duplicates) is what is running now, or, once
a run has drained, the executions cut off by a crash and run again.
"""

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from services.protocol import TaskMessage

log = logging.getLogger("lab.ledger")
STATS = ("enqueued", "started", "completed", "failed", "duplicates")

# Counting enqueues, or taking them back, is idempotent per task_id: a call
# whose reply timed out may or may not have been applied, and the API takes
# back every enqueue it answered with an error, whichever happened.
# KEYS: the run's enqueued set, its ledger hash, lab:runs. ARGV: delta, run,
# then task_id, "<queue>:<kind>/<variant>", value, enqueued_at per task.
_ENQUEUED = """
local delta = tonumber(ARGV[1])
local changed, counts, values, first = {}, {}, {}, nil
for i = 3, #ARGV, 4 do
  local c
  if delta == 1 then c = redis.call('SADD', KEYS[1], ARGV[i]) else c = redis.call('SREM', KEYS[1], ARGV[i]) end
  changed[#changed + 1] = c
  if c == 1 then
    local f = ARGV[i + 1]
    counts[f] = (counts[f] or 0) + delta
    values[f] = (values[f] or 0) + delta * tonumber(ARGV[i + 2])
    if first == nil then first = ARGV[i + 3] end
  end
end
for f, n in pairs(counts) do
  redis.call('HINCRBY', KEYS[2], f .. ':enqueued', n)
  redis.call('HINCRBY', KEYS[2], f .. ':value', values[f])
end
if delta == 1 and first ~= nil then
  redis.call('SADD', KEYS[3], ARGV[2])
  redis.call('HSETNX', KEYS[2], 'first_enqueued_at', first)
end
return changed
"""

# Executions starting and ending. SADD decides, atomically, whether an ending
# execution is the first to settle its task. KEYS: the run's settled set and
# ledger hash. ARGV: now, the prefix of the run's work counters, then op
# ("started", "completed" or "failed"), task_id, "<queue>:<kind>/<variant>",
# and the value to INCRBY the task's work counter by first ("0": none, the
# task wrote it itself) per execution. Returns per item 1 (first to settle),
# 0 (a duplicate) or -1 (a start).
_EXECUTIONS = """
local out, settled = {}, false
for i = 3, #ARGV, 4 do
  local op, f, write = ARGV[i], ARGV[i + 2], tonumber(ARGV[i + 3])
  if write ~= 0 then redis.call('INCRBY', ARGV[2] .. f, write) end
  if op == 'started' then
    redis.call('HINCRBY', KEYS[2], f .. ':started', 1)
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
    return run_key(msg.run, f"work:{msg.queue}:{msg.endpoint}")


class Batcher:
    """Sends, in one round trip, every item submitted while the previous send
    was in flight: the first caller waits for nobody, those that come while
    Redis answers it go together next. Under load that turns one Redis call per
    task into one per batch, which is most of what the ledger costs a process.

    `submit` waits for the item's result; `submit_later` does not (the item goes
    with the next batch, or after `linger_s`). A failed send fails its items
    and those submitted meanwhile: they would meet the same broken Redis, and a
    request must get its 503 after one timeout, not after two."""

    def __init__(self, send: Callable[[list], Awaitable[list]], linger_s: float = 0.5):
        self._send = send
        self._items: list[tuple[object, asyncio.Future | None]] = []
        self._flusher: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.linger_s = linger_s

    async def submit(self, item):
        future = asyncio.get_running_loop().create_future()
        self._items.append((item, future))
        self._start()
        return await future

    def submit_later(self, item) -> None:
        self._items.append((item, None))
        if self._flusher is None and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.linger_s, self._start)

    def _start(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._items:
                batch, self._items = self._items, []
                try:
                    results = await self._send([item for item, _ in batch])
                except BaseException as exc:
                    batch, self._items = batch + self._items, []
                    lazy = sum(future is None for _, future in batch)
                    if lazy:
                        log.warning("%d execution start(s) not recorded: %s", lazy, exc)
                    for _, future in batch:
                        if future is not None and not future.done():
                            if isinstance(exc, asyncio.CancelledError):
                                future.cancel()
                            else:
                                future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, future), result in zip(batch, results):
                    if future is not None and not future.done():
                        future.set_result(result)
        finally:
            self._flusher = None


def _by_run(items: list, run_of) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[run_of(item)].append(i)
    return groups


class Ledger:
    def __init__(self, redis: aioredis.Redis):
        self.redis = redis
        self._enqueued = redis.register_script(_ENQUEUED)
        self._executions = redis.register_script(_EXECUTIONS)
        self._enqueue_batch = Batcher(lambda msgs: self._count_enqueued(msgs, 1))
        self._execution_batch = Batcher(self._record_executions)

    async def record_enqueued(self, msg: TaskMessage) -> None:
        """Count a task as enqueued before it is handed to the broker, so that a
        completion can never be seen before its enqueue."""
        await self._enqueue_batch.submit(msg)

    async def take_back(self, msg: TaskMessage) -> None:
        """Uncount an enqueue the broker refused; a no-op if it was never counted."""
        await self._count_enqueued([msg], -1)

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

    async def _count_enqueued(self, msgs: list[TaskMessage], delta: int) -> list[int]:
        def call(run, idx, pipe):
            args = [delta, run]
            for i in idx:
                m = msgs[i]
                args += [m.task_id, f"{m.queue}:{m.endpoint}", m.value, repr(m.enqueued_at)]
            keys = [run_key(run, "enqueued"), run_key(run, "ledger"), "lab:runs"]
            return self._enqueued(keys=keys, args=args, client=pipe)

        return await self._per_run(msgs, lambda m: m.run, call)

    async def _record_executions(self, items: list[tuple[str, TaskMessage, bool]]) -> list[int]:
        def call(run, idx, pipe):
            args = [repr(time.time()), run_key(run, "work:")]
            for i in idx:
                op, m, write = items[i]
                args += [op, m.task_id, f"{m.queue}:{m.endpoint}", m.value if write else 0]
            return self._executions(keys=[run_key(run, "settled"), run_key(run, "ledger")], args=args, client=pipe)

        return await self._per_run(items, lambda item: item[1].run, call)

    async def record_started(self, msg: TaskMessage) -> None:
        await self._execution_batch.submit(("started", msg, False))

    def record_started_later(self, msg: TaskMessage) -> None:
        """Count an execution as started without waiting: written with the next
        settle of this process, or within half a second. A crash in that half
        second loses the start (never a task): `unfinished` may then miss it."""
        self._execution_batch.submit_later(("started", msg, False))

    async def settle(self, msg: TaskMessage, outcome: str, write: bool = False) -> bool:
        """Record `completed` or `failed`; False when this task was already settled.
        write=True first adds the task's value to its work counter, in the same
        script: the task's own INCRBY and its ledger entry in one round trip."""
        return await self._execution_batch.submit((outcome, msg, write)) == 1

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


def main(argv: list[str] | None = None) -> None:
    """`python -m services.ledger reset [--run NAME]` / `... show RUN` / `... runs`."""
    import argparse
    import asyncio
    import json

    from services.redis_clients import async_client
    from services.settings import get_settings

    parser = argparse.ArgumentParser(prog="python -m services.ledger", description=main.__doc__)
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
