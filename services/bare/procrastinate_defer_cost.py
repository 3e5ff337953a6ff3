"""CPU time of one procrastinate enqueue: the lab's producer (its pool, its
task message) against procrastinate's own pool, and each with one integer
instead of the message (docs/results/2026-11-30-postgresql.md, "What the lab
costs"): what a task's size costs procrastinate.

    docker compose stop procrastinate
    docker compose exec -T api python -m services.bare.procrastinate_defer_cost [repetitions]
    docker compose start procrastinate

Run it in the API's container, so its CPU limit is the lab's. Each
repetition times the four ways in turn: DEFERS defers, CONCURRENCY at a time,
after WARM_UP, CPU seconds of this process (`time.process_time`) per defer.
Its jobs are deleted at the end; the stopped worker keeps them from running."""

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

import procrastinate

from lab.protocol import Kind, Queue, TaskMessage, Variant
from lab.settings import Settings, get_settings
from workers import procrastinate_queue

DEFERS, CONCURRENCY, WARM_UP = 1500, 50, 200
RUN = "defer-cost"
QUEUE_NAME = "defer-cost"


async def cpu_per_call_us(call: Callable[[], Awaitable[object]]) -> float:
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with slots:
            await call()

    await asyncio.gather(*(one() for _ in range(WARM_UP)))
    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(DEFERS)))
    return (time.process_time() - started) / DEFERS * 1e6


def message() -> TaskMessage:
    return TaskMessage.new(RUN, Queue("procrastinate"), Kind("io"), Variant("simple"), 1)


async def one_repetition(settings: Settings) -> tuple[float, float, float, float]:
    """µs of CPU per defer: the lab's pool with the lab's message, then with one
    integer; procrastinate's own pool with the lab's message, then with one integer."""
    lab = procrastinate_queue.Producer(settings)
    await lab.start()
    lab_message = await cpu_per_call_us(lambda: lab.enqueue(message()))
    lab_integer = await cpu_per_call_us(lambda: lab.deferrer.defer_async(value=1))
    await lab.close()
    own = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=settings.postgres_url))
    await own.open_async()
    deferrer = own.configure_task(procrastinate_queue.TASK_NAME, queue=QUEUE_NAME)
    own_message = await cpu_per_call_us(lambda: deferrer.defer_async(message=message().payload()))
    own_integer = await cpu_per_call_us(lambda: deferrer.defer_async(value=1))
    async with own.connector.pool.connection() as conn:  # type: ignore[attr-defined]
        await conn.execute(
            "DELETE FROM procrastinate_jobs WHERE task_name = %s"
            " AND (queue_name = %s OR args ? 'value' OR args->'message'->>'run' = %s)",
            (procrastinate_queue.TASK_NAME, QUEUE_NAME, RUN),
        )
    await own.close_async()
    return lab_message, lab_integer, own_message, own_integer


async def main(repetitions: int) -> None:
    settings = get_settings()
    for repetition in range(repetitions):
        lab_message, lab_integer, own_message, own_integer = await one_repetition(settings)
        print(
            f"{repetition}: µs of CPU per defer: lab's pool, lab's message {lab_message:.0f}; lab's pool, "
            f"one integer {lab_integer:.0f}; procrastinate's pool, lab's message {own_message:.0f}; "
            f"procrastinate's pool, one integer {own_integer:.0f}",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 6))
