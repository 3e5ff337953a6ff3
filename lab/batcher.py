"""Batcher: one round trip for every item submitted while the previous one was in flight."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("lab.ledger")


class Batcher:
    """Sends, in one round trip, every item submitted while the previous send
    was in flight: the first caller waits for nobody, those that come while
    Redis answers it go together next. Under load that turns one Redis call per
    task into one per batch, which is most of what the ledger costs a process.

    A caller that finds nothing in flight sends its item itself, from its own
    task: a worker settling one task at a time pays no task, no future and no
    extra turn of the event loop per settle (fast path: docs/hot-path.md). What comes
    while a send is in flight is sent by a flusher task, one batch at a time,
    so there is never more than one send in flight (the ledger's Links rely
    on it).

    `submit` waits for the item's result; `submit_later` does not (the item goes
    with the next batch, or after `linger_s`). A failed send fails its items
    and those submitted meanwhile: they would meet the same broken Redis, and a
    request must get its 503 after one timeout, not after two."""

    def __init__(self, send: Callable[[list], Awaitable[list]], linger_s: float = 0.5):
        self._send = send
        self._items: list[tuple[object, asyncio.Future | None]] = []
        self._busy = False  # a send is in flight, a caller's or the flusher's
        self._flusher: asyncio.Task | None = None  # held: the loop keeps only a weak reference
        self._timer: asyncio.TimerHandle | None = None
        self.linger_s = linger_s

    async def submit(self, item):
        if self._busy:
            future = asyncio.get_running_loop().create_future()
            self._items.append((item, future))
            return await future
        self._busy = True
        # Nothing in flight: only submit_later's items can be waiting (their
        # timer set), and they go with this one. Left to the timer or a flusher
        # task, they could outlive a process that runs its loop only for one
        # task (an RQ horse). Usually none wait: then no list beyond [item].
        lingering = self._items
        if lingering:
            self._items = []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch = [i for i, _ in lingering]
            batch.append(item)
        else:
            lingering, batch = (), [item]
        try:
            result = (await self._send(batch))[-1]
        except asyncio.CancelledError as exc:
            # This caller's own cancellation: what came meanwhile was not sent,
            # and goes next; the lingering items may have been, and are dropped.
            self._fail(lingering, exc)
            raise
        except BaseException as exc:
            failed, self._items = [*lingering, *self._items], []
            self._fail(failed, exc)
            raise
        finally:
            self._busy = False
            if self._items:
                self._start()
        return result

    def submit_later(self, item) -> None:
        self._items.append((item, None))
        if not self._busy and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.linger_s, self._start)

    def _start(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._busy:
            self._busy = True
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    @staticmethod
    def _fail(batch: list, exc: BaseException) -> None:
        lazy = sum(future is None for _, future in batch)
        if lazy:
            log.warning("%d execution start(s) not recorded: %s", lazy, exc)
        for _, future in batch:
            if future is not None and not future.done():
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)

    async def _flush(self) -> None:
        try:
            while self._items:
                batch, self._items = self._items, []
                try:
                    results = await self._send([item for item, _ in batch])
                except BaseException as exc:
                    batch, self._items = batch + self._items, []
                    self._fail(batch, exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, future), result in zip(batch, results):
                    if future is not None and not future.done():
                        future.set_result(result)
        finally:
            self._busy, self._flusher = False, None
