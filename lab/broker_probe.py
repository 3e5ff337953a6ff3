"""Asking a broker other than Redis whether it answers: its greeting read on a
blocking socket, in a thread, so that an event loop that is late (the API's,
under load at a small CPU limit) is not taken for a broker that is away, as
it would be by a handshake on the loop. Every call its own: a request is
never refused for another's question. lab/rabbitmq.py and lab/postgres.py say
what each broker's greeting is."""

import asyncio
import logging
from collections.abc import Awaitable, Callable


async def answered(greets: Callable[[str, float], None], url: str, timeout_s: float) -> None:
    """Returns once `greets(url, timeout_s)` did; raises if it does not, within
    2 x timeout_s (resolving the broker's name is outside the socket's timeouts)."""
    await asyncio.wait_for(asyncio.to_thread(greets, url, timeout_s), 2 * timeout_s)


async def wait_until_answers(answers: Callable[[], Awaitable[None]], broker: str) -> None:
    """(a worker starting) Returns once `answers()` does, asking every second."""
    while True:
        try:
            return await answers()
        except OSError as exc:  # the socket's errors and the timeouts are OSErrors
            logging.getLogger(f"lab.{broker.lower()}").warning("%s unreachable (%s): again in 1 s", broker, exc)
            await asyncio.sleep(1)
