"""The drain clock of `make bench`: how fast a worker empties a pre-filled queue.

    python -m services.bare.drain --target N (--counter KEY | --ledger-run RUN) [--max-s 30]
    python -m services.bare.drain --backlog QUEUE     the lab's QUEUE: tasks waiting in it now

Polls Redis every POLL_S from the moment it starts (before the worker does)
and measures from the first task seen done to the last one, so a worker's
start-up time is not counted. Stops at `target` tasks done, after `max-s`
seconds of draining (a slow queue is measured on what it did by then), or
after STALL_S without progress. Prints one JSON line.
"""

import argparse
import asyncio
import json
import time

import redis

from services.ledger import run_key
from services.redis_clients import async_client
from services.settings import get_settings

POLL_S = 0.1
STALL_S = 30
START_TIMEOUT_S = 120  # the worker's container start and imports


def done_count(client: redis.Redis, counter: str | None, run: str | None) -> int:
    if counter:
        return int(client.get(counter) or 0)
    fields = client.hgetall(run_key(run, "ledger"))
    return sum(int(v) for k, v in fields.items() if k.endswith((b":completed", b":failed")))


def measure(client: redis.Redis, target: int, max_s: float, counter: str | None = None,
            run: str | None = None) -> dict:
    start = time.monotonic()
    first = last = None  # (time, count)
    count = done_count(client, counter, run)
    baseline = count
    while count < target:
        now = time.monotonic()
        if first is None and now - start > START_TIMEOUT_S:
            break
        if first is not None and (now - first[0] > max_s or now - last[0] > STALL_S):
            break
        time.sleep(POLL_S)
        count = done_count(client, counter, run)
        now = time.monotonic()
        if first is None and count > baseline:
            first = (now, count)
        if last is None or count > last[1]:
            last = (now, count)
    span = last[0] - first[0] if first and last else 0
    return {
        "target": target, "done": count, "complete": count >= target,
        "measured_tasks": last[1] - first[1] if span else 0, "measured_s": round(span, 2),
        "rate": round((last[1] - first[1]) / span, 1) if span > 0 else None,
    }


async def backlog(queue: str) -> int | float:
    """Tasks waiting in the lab's queue, as lab_queue_depth reads them."""
    from workers.registry import adapter  # the adapters' imports, only for this question

    client = async_client(get_settings())
    try:
        return await adapter(queue).depth(client)
    finally:
        await client.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.bare.drain", description=__doc__.splitlines()[0])
    question = parser.add_mutually_exclusive_group(required=True)
    question.add_argument("--target", type=int)
    question.add_argument("--backlog", metavar="QUEUE")
    parser.add_argument("--counter")
    parser.add_argument("--ledger-run")
    parser.add_argument("--max-s", type=float, default=30)
    args = parser.parse_args(argv)
    if args.backlog:
        print(json.dumps({"queue": args.backlog, "depth": asyncio.run(backlog(args.backlog))}), flush=True)
        return
    client = redis.Redis.from_url(get_settings().redis_url)
    print(json.dumps(measure(client, args.target, args.max_s, args.counter, args.ledger_run)), flush=True)


if __name__ == "__main__":
    main()
