"""The queues an experiment can drive: `background` (the API's own
BackgroundTasks) and every broker queue of lab/queues.py."""

from __future__ import annotations

from lab.queues import BROKER_NAMES

QUEUES = ("background", *BROKER_NAMES)


def service_of(queue: str) -> str:
    """The compose service that runs a queue's tasks: the API for `background`."""
    return "api" if queue == "background" else queue
