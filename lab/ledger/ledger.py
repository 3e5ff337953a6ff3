"""The ledger: every task of every run accounted for, in Redis (keys.py).

Enqueues are counted once the broker has the task (EnqueueCounts);
`background`'s before its 202, as its task lives in the API process
(Ledger.count_enqueued_now). A task
is settled once: the first execution that ends records `completed` or
`failed`; any later execution of the same task_id counts as a duplicate.
Every execution also counts as `started` when it begins, so `unfinished`
(started - completed - failed - duplicates) is what is running now, or, once
a run has drained, the executions cut off by a crash and run again. A task
whose enqueue failed (a 503) is counted enqueued only if it settles all the
same: its broker had it (Ledger.count_refused). A queue
emptied by `make purge` counts what each run still had pending as `purged`:
pending = enqueued - completed - failed - purged.
"""

import asyncio
import time
from collections import defaultdict

import redis
import redis.asyncio as aioredis

from lab.batcher import Batcher
from lab.key_purge import delete_keys
from lab.ledger.enqueue_counts import ENQUEUE_COUNTS, REFUSED_ENQUEUES, UNDO_ENQUEUE_COUNTS, EnqueueCounts
from lab.ledger.executions import EXECUTIONS, SettleCommands, executions_call
from lab.ledger.keys import RUNS, STATS, run_key
from lab.ledger.purge import PURGE
from lab.protocol import TaskMessage
from lab.redis_clients import REDIS_DOWN, Link


def _by_run(items: list, run_of) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[run_of(item)].append(i)
    return groups


class PendingStart:
    """An execution's start waiting to be counted (see Ledger.start_later)."""

    __slots__ = ("msg", "due")

    def __init__(self, msg: TaskMessage, due: float):
        self.msg, self.due = msg, due


class Ledger:
    # The `type: ignore[misc]` on awaited Redis calls below: redis-py types its
    # asyncio client's commands as returning "Awaitable[T] | T", which mypy
    # refuses to await; the asyncio client always returns an awaitable.

    def __init__(self, redis: aioredis.Redis):
        self.redis = redis
        self._executions = redis.register_script(EXECUTIONS)
        self._purge = redis.register_script(PURGE)
        # Each batcher sends one call at a time, so each keeps a connection of
        # its own: the executions' one here, the enqueue counts' (write_now and
        # the background writer) in EnqueueCounts.
        self._executions_link = Link(redis)
        self._settle_command = SettleCommands(self._executions.sha)
        self.enqueues = EnqueueCounts(
            redis.register_script(ENQUEUE_COUNTS),
            redis.register_script(UNDO_ENQUEUE_COUNTS),
            redis.register_script(REFUSED_ENQUEUES),
            Link(redis),
            Link(redis),
        )
        self._execution_batch = Batcher(self._record_executions)
        self._enqueue_batch = Batcher(self._count_now)
        # Starts not counted yet, and the one timer that writes those that are due.
        self._starts: dict[PendingStart, bool] = {}
        self._starts_timer: asyncio.TimerHandle | None = None

    def count_enqueued(self, msg: TaskMessage) -> None:
        """Count a task its broker accepted; written to Redis in the background."""
        self.enqueues.add(msg)

    def count_refused(self, msg: TaskMessage, accepted: bool = False) -> None:
        """Note a task whose enqueue failed: not counted, unless it ever
        settles, which shows that its broker had it all the same (a reply lost
        to a timeout); it is then counted enqueued, and, if its request got a
        503 (not `accepted`: a 202 before the publish, in after-response mode),
        in the run's `enqueued_after_error`. Written in the background."""
        self.enqueues.refused(msg, accepted)

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
                keys, args = executions_call(items[0][1].run, items, now)
                return await self._executions_link.execute("EVAL", self._executions.script, len(keys), *keys, *args)

        def call(run, idx, pipe):
            keys, args = executions_call(run, [items[i] for i in idx])
            if pipe is None:
                return self._executions_link.script(self._executions, keys, args)
            return self._executions(keys=keys, args=args, client=pipe)

        return await self._per_run(items, lambda item: item[1].run, call)

    async def record_started(self, msg: TaskMessage) -> None:
        await self._execution_batch.submit(("started", msg, False, False))

    def start_later(self, msg: TaskMessage, linger_s: float = 0.5) -> PendingStart:
        """An execution's start, counted when it settles, in the settle's own write,
        or after `linger_s` if it is still running then (so that `unfinished`
        shows a long task). A crash before either loses the start, never the
        task: `unfinished` may then miss it.

        One timer serves every pending start, not a timer per task, set and
        cancelled (fast path: docs/hot-path.md)."""
        loop = asyncio.get_running_loop()
        start = PendingStart(msg, loop.time() + linger_s)
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
        self, msg: TaskMessage, outcome: str, write: bool = False, start: PendingStart | None = None, retry_s: float = 0
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
                if await self.redis.sismember(run_key(msg.run, "settled"), msg.task_id):  # type: ignore[misc]
                    return True
                return await self._execution_batch.submit(item) == 1
            except REDIS_DOWN:
                if time.monotonic() > deadline:
                    raise

    async def runs(self) -> list[str]:
        return sorted(r.decode() for r in await self.redis.smembers(RUNS))  # type: ignore[misc]

    async def report(self, run: str) -> dict | None:
        """The ledger of a run: per queue and kind/variant, and in total."""
        if not await self.redis.sismember(RUNS, run):  # type: ignore[misc]
            return None
        ledger = await self.redis.hgetall(run_key(run, "ledger"))  # type: ignore[misc]
        # When the counts were read: a reader that waited for the answer (a loaded API's) knows
        # only when it came, seconds later; a timeline of reports is drawn at this time.
        read_at = time.time()
        raw = {k.decode(): v.decode() for k, v in ledger.items()}
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
            row["pending"] = row["enqueued"] - row["completed"] - row["failed"] - row["purged"]
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
            # Of `enqueued`, the tasks answered 503 that their broker had all the same.
            "enqueued_after_error": int(raw.get("enqueued_after_error", 0)),
            "read_at": read_at,
        }

    async def purge(self, queue: str) -> dict[str, int]:
        """Count every task of `queue` still pending as purged, run by run: what
        `make purge` does once it has deleted the queue's keys with no worker
        running, so that none of them can settle later. The tasks purged per
        run (runs with none left out)."""
        purged = {}
        for run in await self.runs():
            n = await self._purge(keys=[run_key(run, "ledger")], args=[f"{queue}:"])
            if n:
                purged[run] = int(n)
        return purged

    async def reset(self, run: str | None = None) -> int:
        """Delete the ledger of one run, or of all runs. Never touches other keys
        (queues included: tasks still queued keep their place)."""
        deleted = await delete_keys(self.redis, (run_key(run if run else "*", "*"),))
        if run:
            await self.redis.srem(RUNS, run)  # type: ignore[misc]
        else:
            deleted += await self.redis.delete(RUNS)
        return deleted
