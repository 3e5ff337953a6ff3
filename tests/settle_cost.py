"""What a settle costs Redis, with and without the look-up of the run's refused
enqueues (lab/ledger/executions.py): the microseconds Redis spent per EVALSHA
(INFO commandstats), `--rounds` rounds of `--settles` settles each, the two
scripts in random order within a round, on a redis-server of its own. Prints
each one's median with its 95 % interval and n, and their paired ratio.

    uv run python -m tests.settle_cost [--rounds 40] [--settles 2000]

A measurement, not a test: it sits beside the harness it uses.
"""

from __future__ import annotations

import random
import re
import uuid
from typing import Annotated

import redis
import typer

from lab.ledger.enqueue_counts import COUNT_NOTED
from lab.ledger.executions import EXECUTIONS, executions_call
from lab.protocol import Kind, Queue, TaskMessage, Variant
from labctl import stats
from tests.lab import RedisServer

# The settle as it was before it looked for a refused enqueue.
WITHOUT_LOOKUP = re.sub(
    r"\n    local refused = [^\n]*\n    if refused then [^\n]*\n", "\n", EXECUTIONS.removeprefix(COUNT_NOTED), count=1
)


def usec_per_call(client: redis.Redis) -> float:
    evalsha = client.info("commandstats")["cmdstat_evalsha"]
    return evalsha["usec"] / evalsha["calls"]


def one_round(client: redis.Redis, script, settles: int) -> float:
    run = f"settle-cost-{uuid.uuid4().hex[:8]}"
    client.config_resetstat()
    pipe = client.pipeline(transaction=False)
    for _ in range(settles):
        msg = TaskMessage.new(run, Queue.arq, Kind.io, Variant.simple, 1)
        keys, args = executions_call(run, [("completed", msg, True, True)])
        script(keys=keys, args=args, client=pipe)
    pipe.execute()
    return usec_per_call(client)


def main(
    rounds: Annotated[int, typer.Option(min=2)] = 40,
    settles: Annotated[int, typer.Option(min=1)] = 2000,
) -> None:
    assert WITHOUT_LOOKUP != EXECUTIONS, "the look-up is no longer where this measurement removes it"
    server = RedisServer().start()
    client = redis.Redis.from_url(server.url)
    scripts = {"with": client.register_script(EXECUTIONS), "without": client.register_script(WITHOUT_LOOKUP)}
    costs: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for _ in range(rounds):
            for name in random.sample(list(scripts), 2):
                costs[name].append(one_round(client, scripts[name], settles))
    finally:
        client.close()
        server.stop()
    for name, values in costs.items():
        print(f"{name} the look-up: {stats.text(stats.estimate(values))} us per settle")
    print(f"with/without: {stats.ratio_text(stats.paired_ratio(zip(costs['with'], costs['without'])))}")


if __name__ == "__main__":
    typer.run(main)
