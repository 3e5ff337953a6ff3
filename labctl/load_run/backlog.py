"""Waiting for the queues to be empty before a measured run, one way for every
experiment: a run's tasks must not wait behind an earlier run's, and no other
drain may share the CPU. Where the depths come from is the caller's: the queue
monitor's lab_queue_depth in Prometheus (make compare), or Redis itself (make
bench, which reads the lab's queue from its client container)."""

from __future__ import annotations

from collections.abc import Callable

from labctl.errors import LabError
from labctl.polling import wait_until


def _listed(depths: dict[str, float]) -> str:
    return ", ".join(f"{q} {d:.0f}" for q, d in sorted(depths.items()))


def wait_for_empty(
    depths: Callable[[], dict[str, float]],
    queue: str,
    timeout_s: float,
    say: Callable[[str], None],
    *,
    every_s: float = 2,
    still_full: Callable[[float], str] | None = None,
) -> str | None:
    """Until no queue holds a task (`depths()`: queue -> tasks waiting, empty ones
    left out). At the timeout: LabError when `queue` still holds tasks (its
    message `still_full(depth)` if given), else a note naming the other queues."""
    told: list[bool] = []
    seen: dict[str, float] = {}

    def empty() -> bool:
        nonlocal seen
        seen = {q: d for q, d in depths().items() if d > 0}
        if seen and not told:
            say("waiting for an empty backlog: " + _listed(seen))
            told.append(True)
        return not seen

    if wait_until(empty, timeout_s=timeout_s, every_s=every_s):
        return None
    if queue in seen:
        if still_full is not None:
            raise LabError(still_full(seen[queue]))
        raise LabError(f"{queue}'s queue still holds {seen[queue]:.0f} task(s) after {timeout_s:.0f} s")
    return f"before {queue}'s run, other queues still held tasks: " + _listed(seen)
