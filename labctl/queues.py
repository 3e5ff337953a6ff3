"""The queues an experiment can drive: `background` (the API's own
BackgroundTasks) and every broker queue of lab/queues.py."""

from __future__ import annotations

import os

from lab.queues import BROKER_NAMES, BROKERS
from labctl.errors import ParamError

QUEUES = ("background", *BROKER_NAMES)

# A backlog left to empty, not measured (make compare's rest of a slow run, make bench's
# queues after their drains), is run by a one-off worker of the queue, its CPU limit
# lifted, with these settings besides its own: arq polls as often as it can and takes
# more jobs a poll, RQ runs jobs without a fork, docket looks for a free slot as often
# and has more of them. Each is otherwise bound by its polling, not its CPU.
EMPTIER_SETTINGS: dict[str, dict[str, str]] = {
    "arq": {"ARQ_POLL_DELAY": "0.01", "ARQ_MAX_JOBS": "20"},
    "rq": {"RQ_WORKER_CLASS": "SimpleWorker"},
    "docket": {"DOCKET_MINIMUM_CHECK_INTERVAL_S": "0.01", "DOCKET_CONCURRENCY": "20"},
}


def service_of(queue: str) -> str:
    """The compose service that runs a queue's tasks: the API for `background`."""
    return "api" if queue == "background" else queue


def running_brokers() -> list[str]:
    """The broker queues `make up` starts: those on Redis, and those of each
    broker profile given (`make ... BROKERS=rabbitmq` exports COMPOSE_PROFILES)."""
    profiles = os.environ.get("COMPOSE_PROFILES", "").replace(",", " ").split()
    return [b.name for b in BROKERS if b.transport == "redis" or b.transport in profiles or "*" in profiles]


def parse_workers(text: str) -> list[str]:
    """`"arq saq"` or `arq,saq`; empty or `all`: `background` and every queue `make up` starts."""
    names = [w for w in text.replace(",", " ").split() if w]
    if not names or names == ["all"]:
        return ["background", *running_brokers()]
    unknown = [w for w in names if w not in QUEUES]
    if unknown:
        raise ParamError(f"workers: unknown {', '.join(unknown)}; one or more of {', '.join(QUEUES)}")
    return list(dict.fromkeys(names))
