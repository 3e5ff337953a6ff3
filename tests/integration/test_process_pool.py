"""The cpu/process body outlives a pool child killed under it (what an OOM kill
of a child does): that task fails, the next one runs in a new pool."""

import asyncio
import os
import signal
from concurrent.futures.process import BrokenProcessPool

import pytest

from lab.ledger import work_key
from lab.protocol import TaskMessage
from lab.redis_clients import async_client, sync_client
from lab.settings import Settings
from lab.tasks import TaskWork
from tests.lab import new_run


def test_killed_pool_child_fails_one_task_not_the_rest(redis_server):
    settings = Settings(redis_url=redis_server.url, cpu_work=300_000_000, process_pool_size=1)
    run = new_run("pool")

    def message() -> TaskMessage:
        return TaskMessage.new(run, "arq", "cpu", "process", 1)

    async def scenario() -> None:
        work = TaskWork(settings, async_client(settings), sync_client(settings))
        try:
            doomed = asyncio.create_task(work.run_body(message()))
            while not work.process_pool._processes:  # the child is forked on first submit
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)
            (child,) = work.process_pool._processes
            os.kill(child, signal.SIGKILL)
            with pytest.raises(BrokenProcessPool):
                await doomed
            work.settings = settings.model_copy(update={"cpu_work": 1000})
            survivor = message()
            await work.run_body(survivor)
            assert child not in work.process_pool._processes
            assert int(await work.redis.get(work_key(survivor))) == 1
        finally:
            work.close()

    asyncio.run(scenario())
