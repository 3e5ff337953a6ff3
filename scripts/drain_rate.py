"""Drain rate of each queue: N io/simple tasks are queued while no worker runs,
then one worker starts and the time until the last one settles is measured.
One worker process, default concurrency, no container limits, a Redis of its own.

    uv run python -m scripts.drain_rate [--count 2000] [--queues arq saq ...] (default: every broker queue)
                                        [--set ARQ_POLL_DELAY=0.05 ...]
"""

import argparse
import time

from lab.queues import BROKER_NAMES
from lab.settings import Settings
from tests.lab import SHORTENED, RedisServer, ledger, new_run, post_tasks, start_api, start_worker, wait_settled

# What tests.lab shortens, back at the lab's defaults.
LIBRARY_DEFAULTS = {knob: str(Settings.model_fields[knob.lower()].default) for knob in SHORTENED}


def measure(queue: str, count: int, knobs: dict[str, str]) -> dict:
    redis = RedisServer().start()
    api = start_api(redis.url, name=f"api-drain-{queue}")
    try:
        run = new_run(f"drain-{queue}")
        responses = post_tasks(api.url, run, queue, "io/simple", count, concurrency=50)
        assert all(r.status_code == 202 for r in responses)
        worker = start_worker(queue, redis.url, name=f"{queue}-drain", **knobs)
        started = time.time()
        try:
            report = wait_settled(api.url, run, count, timeout=1800)
        finally:
            worker.stop()
        seconds = report["last_settled_at"] - started
        totals = ledger(api.url, run)["totals"]
        return {
            "queue": queue,
            "count": count,
            "seconds": round(seconds, 2),
            "tasks_per_s": round(count / seconds, 1),
            **totals,
        }
    finally:
        api.stop()
        redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--queues", nargs="+", default=list(BROKER_NAMES), choices=BROKER_NAMES)
    parser.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE", help="extra worker settings")
    args = parser.parse_args()
    knobs = {**LIBRARY_DEFAULTS, **dict(kv.split("=", 1) for kv in args.set)}
    print(f"knobs: {knobs}")
    print("| queue | tasks | seconds | tasks/s | completed | duplicates | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for queue in args.queues:
        r = measure(queue, args.count, knobs)
        print(
            f"| {r['queue']} | {r['count']} | {r['seconds']} | {r['tasks_per_s']} | "
            f"{r['completed']} | {r['duplicates']} | {r['failed']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
