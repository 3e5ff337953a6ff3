"""Empty a queue's backlog, every task of it counted (`make purge worker=Q` runs it
in the API's container once the queue's workers are stopped):

    python -m services.purge QUEUE

The queue's adapter deletes its library's keys (its `purge(redis)`: the queue,
the tasks delivered and not acknowledged, their bodies), then each run's ledger
counts what that run still had pending of this queue as `purged` (Ledger.purge).
With no worker running, none of those tasks can settle afterwards, so every run
still accounts for every task: enqueued = completed + failed + purged + pending.
Prints one JSON line: {"queue", "keys_deleted", "purged": {run: tasks}}."""

import argparse
import asyncio
import json

from lab.ledger import Ledger
from lab.queues import BROKER_NAMES, adapter
from lab.redis_clients import async_client
from lab.settings import get_settings


async def purge(queue: str) -> dict:
    redis = async_client(get_settings())
    try:
        keys = await adapter(queue).purge(redis)
        purged = await Ledger(redis).purge(queue)
    finally:
        await redis.aclose()
    return {"queue": queue, "keys_deleted": keys, "purged": purged}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.purge", description=__doc__.splitlines()[0])
    # `background` has no broker: its tasks live in the API process, and leave with it.
    parser.add_argument("queue", choices=BROKER_NAMES)
    print(json.dumps(asyncio.run(purge(parser.parse_args(argv).queue))))


if __name__ == "__main__":
    main()
