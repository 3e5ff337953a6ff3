"""Waiting for something, one way: `wait_until(check, timeout_s=, every_s=)` on
tenacity, and `Progress`, which says when a count has stopped moving.

Every deadline loop of the package is one of these: a readiness probe, a
scrape, a backlog emptying, containers going, a count that must reach a target
or stall."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    stop_any,
    stop_never,
    wait_fixed,
)

T = TypeVar("T")


def _last_result(state: RetryCallState) -> object:
    assert state.outcome is not None
    return state.outcome.result()


def wait_until(check: Callable[[], T], *, timeout_s: float | None, every_s: float = 1.0, tries: int | None = None) -> T:
    """Call `check` every `every_s` seconds until it returns something true, and
    return that; after `timeout_s` (None: no limit), or `tries` calls, return its
    last, false, answer. An exception from `check` ends the wait at once and propagates."""
    stops = [
        *([stop_after_delay(timeout_s)] if timeout_s is not None else []),
        *([stop_after_attempt(tries)] if tries else []),
    ]
    retrying = Retrying(
        stop=stop_any(*stops) if stops else stop_never,
        wait=wait_fixed(every_s),
        retry=retry_if_result(lambda answer: not answer),
        retry_error_callback=_last_result,
        reraise=True,
    )
    return retrying(check)


class Progress:
    """A count watched over time: `stalled` once it has not moved for `stall_s` seconds."""

    def __init__(self, stall_s: float):
        self.stall_s = stall_s
        self.last: object = None
        self.moved_at = time.monotonic()

    def see(self, value: object) -> None:
        if value != self.last:
            self.last, self.moved_at = value, time.monotonic()

    @property
    def still_for(self) -> float:
        return time.monotonic() - self.moved_at

    @property
    def stalled(self) -> bool:
        return self.still_for > self.stall_s
