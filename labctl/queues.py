"""The queues an experiment can drive: `background` (the API's own
BackgroundTasks) and every broker queue of lab/queues.py."""

from __future__ import annotations

from lab.queues import BROKER_NAMES
from labctl.errors import ParamError

QUEUES = ("background", *BROKER_NAMES)


def service_of(queue: str) -> str:
    """The compose service that runs a queue's tasks: the API for `background`."""
    return "api" if queue == "background" else queue


def parse_workers(text: str) -> list[str]:
    """`"arq saq"` or `arq,saq`; empty or `all`: every queue of lab/queues.py and `background`."""
    names = [w for w in text.replace(",", " ").split() if w]
    if not names or names == ["all"]:
        return list(QUEUES)
    unknown = [w for w in names if w not in QUEUES]
    if unknown:
        raise ParamError(f"workers: unknown {', '.join(unknown)}; one or more of {', '.join(QUEUES)}")
    return list(dict.fromkeys(names))
