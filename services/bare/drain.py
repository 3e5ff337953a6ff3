"""The drain counter of `make bench`: how many tasks each worker has finished.

    python -m services.bare.drain --watch --counter KEY --ledger-run RUN
    python -m services.bare.drain --backlog QUEUE     the lab's QUEUE: tasks waiting in it now
    python -m services.bare.drain --published RUN     tasks the lab's API has published for RUN
    python -m services.bare.drain --bare-backlog QUEUE  tasks waiting in the bare QUEUE
    python -m services.bare.drain --purge-bare QUEUE    the bare QUEUE on RabbitMQ or PostgreSQL emptied

With --watch it reads one line at a time on stdin and answers each with one
JSON line, {"bare": the bare worker's tasks done (INCRBY counter KEY), "lab":
the lab's worker's (completed + failed in RUN's ledger)}. It stays up for the
whole drain, so that labctl/experiments/bench/paired_windows.py, on the host, reads Redis in a
millisecond rather than a container start.
"""

import argparse
import asyncio
import json
import sys
import urllib.request

import redis

from lab import postgres, rabbitmq
from lab.ledger import run_key
from lab.redis_clients import async_client
from lab.settings import get_settings


def done_count(client: redis.Redis, counter: str | None, run: str | None) -> int:
    if counter:
        return int(client.get(counter) or 0)
    fields = client.hgetall(run_key(run, "ledger"))
    return sum(int(v) for k, v in fields.items() if k.endswith((b":completed", b":failed")))


def watch(client: redis.Redis, counter: str, run: str, lines=sys.stdin, out=sys.stdout) -> None:
    for _ in lines:
        out.write(json.dumps({"bare": done_count(client, counter, None), "lab": done_count(client, None, run)}) + "\n")
        out.flush()


async def backlog(queue: str) -> int | float:
    """Tasks waiting in the lab's queue, as lab_queue_depth reads them."""
    from lab.queues import adapter  # the adapters' imports, only for this question

    client = async_client(get_settings())
    try:
        return await adapter(queue).depth(client)
    finally:
        await client.aclose()


def published(run: str, api: str = "http://api:8000") -> int:
    """Tasks the lab's API has enqueued for RUN, as its ledger counts them; the
    API writes the counts it still holds in memory before answering."""
    with urllib.request.urlopen(f"{api}/api/v1/runs/{run}", timeout=10) as response:
        return json.load(response)["totals"]["enqueued"]


def bare_backlog(client: redis.Redis, queue: str) -> int:
    """Tasks the bare API has published to QUEUE, read before its worker starts."""
    from services.bare.queues import BARE

    bare = BARE[queue]
    if hasattr(bare, "rabbitmq_queues"):
        return int(asyncio.run(rabbitmq.ready_messages(get_settings(), bare.rabbitmq_queues)))
    if hasattr(bare, "postgres_backlog"):
        count, _, params = bare.postgres_backlog
        return asyncio.run(postgres.run(get_settings(), count, params))
    return int(client.execute_command(*bare.backlog))


def purge_bare(queue: str) -> int:
    """Empties the bare QUEUE on RabbitMQ or PostgreSQL (one on Redis is emptied
    with the bench's DEL of its keys)."""
    from services.bare.queues import BARE

    bare = BARE[queue]
    if hasattr(bare, "postgres_backlog"):
        _, purge, params = bare.postgres_backlog
        return asyncio.run(postgres.run(get_settings(), purge, params))
    names = getattr(bare, "rabbitmq_queues", ())
    return int(asyncio.run(rabbitmq.purge(get_settings(), names))) if names else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.bare.drain", description=__doc__.splitlines()[0])
    question = parser.add_mutually_exclusive_group(required=True)
    question.add_argument("--watch", action="store_true")
    question.add_argument("--backlog", metavar="QUEUE")
    question.add_argument("--published", metavar="RUN")
    question.add_argument("--bare-backlog", metavar="QUEUE")
    question.add_argument("--purge-bare", metavar="QUEUE")
    parser.add_argument("--counter")
    parser.add_argument("--ledger-run")
    args = parser.parse_args(argv)
    if args.backlog:
        print(json.dumps({"queue": args.backlog, "depth": asyncio.run(backlog(args.backlog))}), flush=True)
        return
    if args.bare_backlog:
        depth = bare_backlog(redis.Redis.from_url(get_settings().redis_url), args.bare_backlog)
        print(json.dumps({"queue": args.bare_backlog, "depth": depth}), flush=True)
        return
    if args.purge_bare:
        print(json.dumps({"queue": args.purge_bare, "purged": purge_bare(args.purge_bare)}), flush=True)
        return
    if args.published:
        print(json.dumps({"run": args.published, "enqueued": published(args.published)}), flush=True)
        return
    if not (args.counter and args.ledger_run):
        parser.error("--watch needs --counter and --ledger-run")
    watch(redis.Redis.from_url(get_settings().redis_url), args.counter, args.ledger_run)


if __name__ == "__main__":
    main()
