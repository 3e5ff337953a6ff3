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

import time
from collections import defaultdict

import redis.asyncio as aioredis

from services.protocol import TaskMessage

STATS = ("enqueued", "started", "completed", "failed", "duplicates")

# Counting an enqueue, or taking it back, is idempotent per task_id: a call
# whose reply timed out may or may not have been applied, and the API takes
# back every enqueue it answered with an error, whichever happened.
_ENQUEUED = """
local changed
if ARGV[1] == '1' then changed = redis.call('SADD', KEYS[1], ARGV[2]) else changed = redis.call('SREM', KEYS[1], ARGV[2]) end
if changed == 1 then
  local delta = tonumber(ARGV[1])
  redis.call('HINCRBY', KEYS[2], ARGV[3] .. ':enqueued', delta)
  redis.call('HINCRBY', KEYS[2], ARGV[3] .. ':value', delta * tonumber(ARGV[4]))
  if delta == 1 then
    redis.call('SADD', KEYS[3], ARGV[5])
    redis.call('HSETNX', KEYS[2], 'first_enqueued_at', ARGV[6])
  end
end
return changed
"""

# SADD decides, atomically, whether this execution is the first to settle the task.
_SETTLE = """
local first = redis.call('SADD', KEYS[1], ARGV[1])
if first == 1 then
  redis.call('HINCRBY', KEYS[2], ARGV[2] .. ':' .. ARGV[3], 1)
  local last = tonumber(redis.call('HGET', KEYS[2], 'last_settled_at') or '0')
  if tonumber(ARGV[4]) > last then redis.call('HSET', KEYS[2], 'last_settled_at', ARGV[4]) end
else
  redis.call('HINCRBY', KEYS[2], ARGV[2] .. ':duplicates', 1)
end
return first
"""


def run_key(run: str, suffix: str) -> str:
    return f"lab:run:{run}:{suffix}"


def work_key(msg: TaskMessage) -> str:
    return run_key(msg.run, f"work:{msg.queue}:{msg.endpoint}")


def _field(msg: TaskMessage, stat: str) -> str:
    return f"{msg.queue}:{msg.endpoint}:{stat}"


class Ledger:
    def __init__(self, redis: aioredis.Redis):
        self.redis = redis
        self._settle = redis.register_script(_SETTLE)
        self._enqueued = redis.register_script(_ENQUEUED)

    async def record_enqueued(self, msg: TaskMessage) -> None:
        """Count a task as enqueued before it is handed to the broker, so that a
        completion can never be seen before its enqueue."""
        await self._count_enqueued(msg, 1)

    async def take_back(self, msg: TaskMessage) -> None:
        """Uncount an enqueue the broker refused; a no-op if it was never counted."""
        await self._count_enqueued(msg, -1)

    async def _count_enqueued(self, msg: TaskMessage, delta: int) -> None:
        keys = [run_key(msg.run, "enqueued"), run_key(msg.run, "ledger"), "lab:runs"]
        args = [delta, msg.task_id, f"{msg.queue}:{msg.endpoint}", msg.value, msg.run, repr(msg.enqueued_at)]
        await self._enqueued(keys=keys, args=args)

    async def record_started(self, msg: TaskMessage) -> None:
        await self.redis.hincrby(run_key(msg.run, "ledger"), _field(msg, "started"), 1)

    async def settle(self, msg: TaskMessage, outcome: str) -> bool:
        """Record `completed` or `failed`; False when this task was already settled."""
        keys = [run_key(msg.run, "settled"), run_key(msg.run, "ledger")]
        args = [msg.task_id, f"{msg.queue}:{msg.endpoint}", outcome, repr(time.time())]
        return bool(await self._settle(keys=keys, args=args))

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
