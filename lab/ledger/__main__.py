"""The ledger's command line: delete, show or list the runs' ledgers.

python -m lab.ledger reset [--run NAME] | show RUN | runs   (`make reset` runs
the first, in the API's container when the stack is up)."""

import argparse
import asyncio
import json

from lab.ledger.ledger import Ledger
from lab.redis_clients import async_client
from lab.settings import get_settings


async def run_command(args: argparse.Namespace) -> None:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.ledger", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    reset = sub.add_parser("reset", help="delete the lab's keys: every run, or one (never FLUSHALL)")
    reset.add_argument("--run", help="only this run")
    show = sub.add_parser("show", help="print a run's ledger as JSON")
    show.add_argument("run")
    sub.add_parser("runs", help="list the runs")
    asyncio.run(run_command(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
