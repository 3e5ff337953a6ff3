"""The ledger's batched writes, against a real Redis: many tasks in one round
trip give exactly the counts one-by-one calls give, a task's write rides with
its settle, a broken Redis fails every caller of a batch at once, and enqueue
counts wait out an outage in memory and are written once when Redis is back."""

import asyncio
import time

import redis.asyncio as aioredis
import redis.exceptions as redis_errors

from lab.batcher import Batcher
from lab.ledger import Ledger, work_key
from lab.protocol import Kind, Queue, TaskMessage, Variant
from tests.lab import RedisServer, SilentServer, new_run, until


def msg(run: str, value: int = 3) -> TaskMessage:
    return TaskMessage.new(run, Queue.saq, Kind.io, Variant.simple, value)


def test_concurrent_enqueues_and_settles_are_batched_and_exact(redis_server):
    run, other = new_run("batch"), new_run("batch-other")

    async def scenario():
        redis = aioredis.Redis.from_url(redis_server.url)
        ledger = Ledger(redis)
        calls = []
        send = ledger._execution_batch._send
        ledger._execution_batch._send = lambda items: calls.append(len(items)) or send(items)
        tasks = [msg(run) for _ in range(40)] + [msg(other) for _ in range(10)]
        await asyncio.gather(*(ledger.record_enqueued(m) for m in tasks))
        starts = [ledger.start_later(m) for m in tasks]
        # the first 25 settle twice (a redelivery): the second of each is a duplicate
        firsts = await asyncio.gather(
            *(ledger.settle(m, "completed", write=True, start=s) for m, s in zip(tasks, starts))
        )
        again = await asyncio.gather(*(ledger.settle(m, "completed", write=True) for m in tasks[:25]))
        reports = await ledger.report(run), await ledger.report(other)
        work = int(await redis.get(work_key(tasks[0])) or 0)
        await redis.aclose()
        return firsts, again, reports, work, calls

    firsts, again, (mine, theirs), work, calls = asyncio.run(scenario())
    assert all(firsts) and not any(again)
    row = mine["queues"]["saq"]["io/simple"]
    assert (row["enqueued"], row["started"], row["completed"], row["duplicates"], row["pending"]) == (40, 40, 40, 25, 0)
    assert row["value"] == 120 and work == 120 + 25 * 3  # every execution wrote, duplicates too
    assert theirs["totals"]["completed"] == 10 and theirs["totals"]["duplicates"] == 0
    assert len(calls) < 50 + 25, f"no batching happened: {calls}"  # 75 settles in fewer round trips


def test_a_redis_that_does_not_answer_fails_every_waiting_caller_after_one_timeout():
    """A Redis that takes the connection and never answers: every caller of the
    batch, and those queued behind it, get the timeout from one round trip,
    not one timeout each."""
    timeout_s, callers = 0.5, 30

    async def scenario(url):
        redis = aioredis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        ledger = Ledger(redis)
        sends = []
        send = ledger._execution_batch._send
        ledger._execution_batch._send = lambda items: sends.append(len(items)) or send(items)
        started = time.monotonic()
        # The bound only stops a hang: one timeout each would take callers x timeout_s.
        results = await asyncio.wait_for(
            asyncio.gather(*(ledger.settle(msg("down"), "completed") for _ in range(callers)), return_exceptions=True),
            callers * timeout_s,
        )
        await redis.aclose()
        return results, sends, time.monotonic() - started

    with SilentServer() as url:
        results, sends, elapsed = asyncio.run(scenario(url))
    assert all(isinstance(r, redis_errors.TimeoutError) for r in results), results
    # The first caller's item went alone; the 29 that came while it waited failed with it, unsent.
    assert sends == [1], sends
    assert elapsed >= timeout_s * 0.9, f"failed in {elapsed:.2f}s: Redis answered, it did not time out"


def test_later_items_go_within_the_linger_time_without_a_waiting_caller():
    async def scenario():
        sent = []

        async def send(items):
            sent.append(list(items))
            return [None] * len(items)

        linger_s = 0.05
        batcher = Batcher(send, linger_s=linger_s)
        queued = time.monotonic()
        batcher.submit_later("a")
        batcher.submit_later("b")
        first = list(await until(lambda: sent, 30, "the lingering items to go by themselves", interval=0.005))
        waited = time.monotonic() - queued
        assert await batcher.submit("c") is None
        return first, sent, waited, linger_s

    first, sent, waited, linger_s = asyncio.run(scenario())
    assert first == [["a", "b"]] and sent[-1] == ["c"]
    assert waited >= linger_s * 0.9, f"sent after {waited:.3f}s, before their linger"


def test_later_items_go_with_the_next_callers_send():
    """A process that runs its loop only for one task (an RQ work horse) ends
    when the task's settle returns: a start waiting for its linger must have
    gone with that settle."""

    async def scenario():
        sent = []

        async def send(items):
            sent.append(list(items))
            return list(items)

        batcher = Batcher(send, linger_s=10)
        batcher.submit_later("start")
        result = await batcher.submit("settle")
        return result, sent

    assert asyncio.run(scenario()) == ("settle", [["start", "settle"]])


def test_a_cancelled_caller_does_not_break_the_batch():
    async def scenario():
        gate = asyncio.Event()

        async def send(items):
            await gate.wait()
            return list(items)

        batcher = Batcher(send)
        first = asyncio.create_task(batcher.submit(1))
        await asyncio.sleep(0)
        doomed = asyncio.create_task(batcher.submit(2))
        survivor = asyncio.create_task(batcher.submit(3))
        await asyncio.sleep(0)
        doomed.cancel()
        gate.set()
        return await first, await survivor, doomed.cancelled()

    assert asyncio.run(scenario()) == (1, 3, True)


def test_enqueue_counts_wait_out_a_frozen_redis_and_are_written_once():
    """Counts added while Redis does not answer stay in memory; the writer
    retries (its first write timed out, and may resend it) and, once Redis is
    back, every count is in the ledger exactly once."""
    server = RedisServer().start()
    run = new_run("frozen")
    try:

        async def scenario():
            redis = aioredis.Redis.from_url(server.url, socket_timeout=0.3, socket_connect_timeout=0.3)
            ledger = Ledger(redis)
            ledger.enqueues.retry_s = 0.2
            await ledger.record_enqueued(msg(run))  # connected, one count written
            attempts = []
            write = ledger.enqueues._writer_link.script

            async def counted(*args):
                try:
                    return await write(*args)
                except Exception as exc:
                    attempts.append(exc)
                    raise

            ledger.enqueues._writer_link.script = counted
            server.freeze()
            for _ in range(20):
                ledger.count_enqueued(msg(run))
            # A first write that timed out and a retry that did too: the counts wait in memory.
            await until(lambda: len(attempts) >= 2, 60, "two timed-out writes")
            still_waiting = ledger.enqueues._writer is not None
            server.thaw()
            await asyncio.wait_for(ledger.enqueues.written(), 10)
            row = (await ledger.report(run))["queues"]["saq"]["io/simple"]
            await redis.aclose()
            return still_waiting, row

        still_waiting, row = asyncio.run(scenario())
    finally:
        server.thaw()
        server.stop()
    assert still_waiting
    assert (row["enqueued"], row["value"]) == (21, 63)


def test_a_start_is_counted_once_whether_it_settles_first_or_outlives_its_linger(redis_server):
    """A short execution's start goes in its settle's write; a long one's is
    written on its own, so that `unfinished` shows it running, and its settle
    then does not count it again."""
    run = new_run("starts")

    async def scenario():
        redis = aioredis.Redis.from_url(redis_server.url)
        ledger = Ledger(redis)
        short, long = msg(run), msg(run)
        for m in (short, long):
            await ledger.record_enqueued(m)
        short_start, long_start = ledger.start_later(short, linger_s=60), ledger.start_later(long, linger_s=0.05)
        assert await ledger.settle(short, "completed", start=short_start)
        # The long one's linger, then the batch's own: its start is written by itself.
        deadline = time.monotonic() + 60
        while (running := (await ledger.report(run))["queues"]["saq"]["io/simple"])["started"] < 2:
            assert time.monotonic() < deadline, f"the long one's start was never written: {running}"
            await asyncio.sleep(0.05)
        assert await ledger.settle(long, "completed", start=long_start)
        done = (await ledger.report(run))["queues"]["saq"]["io/simple"]
        await redis.aclose()
        return running, done

    running, done = asyncio.run(scenario())
    assert (running["started"], running["completed"], running["unfinished"]) == (2, 1, 1)
    assert (done["started"], done["completed"], done["unfinished"]) == (2, 2, 0)
