"""The `background` queue's backlog, which the API exports as
lab_queue_depth{queue="background"} (docs/metrics.md: tasks waiting, not yet
started): every task scheduled after a response and not started yet, down by
one as each starts, and each task run once. Its real parts: the API's
BackgroundQueue, Starlette's BackgroundTasks, the task runner and a Redis."""

import asyncio

from prometheus_client import REGISTRY
from starlette.background import BackgroundTasks

from lab.protocol import Kind, Queue, TaskMessage, Variant
from lab.runner import TaskRunner
from lab.settings import Settings
from services.api.background import BackgroundQueue
from tests.lab import new_run, until


def backlog() -> float:
    return REGISTRY.get_sample_value("lab_queue_depth", {"queue": "background"}) or 0.0


def test_the_background_backlog_counts_the_tasks_scheduled_and_not_yet_started(redis_server):
    run, count = new_run("background-backlog"), 3

    async def scenario():
        # Each task awaits its IO_LATENCY_MS: the loop turns while it runs, and the backlog is read then.
        runner = TaskRunner(Settings(redis_url=redis_server.url, io_latency_ms=300))
        queue, scheduled = BackgroundQueue(runner), BackgroundTasks()
        msgs = [TaskMessage.new(run, Queue.background, Kind.io, Variant.simple, 2) for _ in range(count)]
        task = runner.metrics(msgs[0])
        before = backlog()
        for msg in msgs:
            await runner.ledger.record_enqueued(msg)
            queue.enqueue(msg, scheduled)
        assert backlog() == before + count, "a scheduled task is not in the backlog"
        running = asyncio.create_task(scheduled())  # as Starlette runs them after the response: one after another
        seen = []
        while not running.done():
            # While a task runs, the backlog is what has not started yet.
            await until(lambda: task.in_progress.value == 1 or running.done(), 30, "a task to run", interval=0.01)
            if not running.done():
                seen.append((task.started.value, backlog() - before))
            await asyncio.sleep(0.05)
        await running
        after, report = backlog() - before, await runner.ledger.report(run)
        await runner.close()
        return seen, after, report

    seen, after, report = asyncio.run(scenario())
    assert seen and all(waiting == count - started for started, waiting in seen), seen
    assert after == 0, f"{after:.0f} task(s) still in the backlog after every one ran"
    row = report["queues"]["background"]["io/simple"]
    assert (row["enqueued"], row["completed"], row["duplicates"], row["pending"]) == (count, count, 0, 0), row
