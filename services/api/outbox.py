"""ENQUEUE_MODE=after-response: the API answers 202 first and publishes afterwards.

A task accepted this way waits here, in memory, for one of a few publisher
tasks. A BackgroundTask per request (the published article's way) keeps each
request's whole ASGI call alive until its publish ran: under a CPU limit the
publishes fall behind the answers, and a run holds every one of them
(docs/hot-path.md). Here a waiting task costs its message, a few hundred bytes.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from lab.protocol import TaskMessage

log = logging.getLogger("lab.api")


class Outbox:
    def __init__(self, publish: Callable[[TaskMessage], Awaitable[None]], publishers: int):
        self._publish = publish
        self._messages: deque[TaskMessage] = deque()
        self._publishers: set[asyncio.Task] = set()
        self.size = publishers

    def put(self, msg: TaskMessage) -> None:
        self._messages.append(msg)
        if len(self._publishers) < self.size:
            task = asyncio.get_running_loop().create_task(self._drain())
            self._publishers.add(task)
            task.add_done_callback(self._publishers.discard)

    async def _drain(self) -> None:
        # A publisher lives while there is work: an idle API keeps no task around.
        while self._messages:
            msg = self._messages.popleft()
            try:
                await self._publish(msg)
            except Exception:
                log.exception("publishing task %s after its response", msg.task_id)

    async def flush(self, timeout_s: float) -> None:
        """At shutdown: publish what is still waiting, for up to `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                while self._publishers:
                    await asyncio.gather(*self._publishers, return_exceptions=True)
        except TimeoutError:
            log.warning("%d task(s) accepted but not published before shutdown", len(self._messages))
