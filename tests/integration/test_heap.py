"""The lab's processes freeze their start-up heap (lab/heap.py): each case
starts the real thing in a fresh Python process against a real Redis and asks
the collector what it tracks once start-up is done."""

import json
import subprocess
import sys

import pytest

from tests.lab import ROOT, free_port, lab_env

# After start-up, what a full collection still walks: the objects the
# collector tracks outside the frozen generation.
REPORT = (
    "import gc, json; print(json.dumps({'frozen': gc.get_freeze_count(), 'walked': len(gc.get_objects())}), flush=True)"
)

API = f"""
import asyncio
from services.api.app import app, lifespan

async def main():
    async with lifespan(app):
        {REPORT}

asyncio.run(main())
"""

WORKER = f"""
import asyncio
from lab.settings import get_settings
from lab.worker_runtime import WorkerRuntime
import MODULE

async def main():
    runtime = WorkerRuntime(get_settings(), QUEUE)
    await runtime.start()
    {REPORT}
    await runtime.stop()

asyncio.run(main())
"""

CELERY_PARENT = f"""
from celery.signals import worker_init
import workers.celery_queue
workers.celery_queue.worker.connect()  # what its main() does before it starts Celery's worker
worker_init.send(sender=None)  # what Celery sends before its pool forks
{REPORT}
"""


def heap_after_start(code: str, redis_url: str) -> dict:
    env = lab_env(redis_url, METRICS_PORT=free_port())
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def assert_frozen(heap: dict) -> None:
    # Every library and the lab's modules: tens of thousands of objects, frozen.
    assert heap["frozen"] > 30_000, heap
    # A full collection now walks a small part of what it walked before.
    assert heap["walked"] < heap["frozen"] / 10, heap


def test_a_started_api_leaves_its_start_up_heap_out_of_every_collection(redis_server):
    assert_frozen(heap_after_start(API, redis_server.url))


@pytest.mark.parametrize("queue, module", [("arq", "workers.arq_queue"), ("saq", "workers.saq_queue")])
def test_a_started_worker_leaves_its_start_up_heap_out_of_every_collection(redis_server, queue, module):
    assert_frozen(heap_after_start(WORKER.replace("MODULE", module).replace("QUEUE", repr(queue)), redis_server.url))


def test_celerys_parent_freezes_its_heap_before_the_pool_forks(redis_server):
    assert_frozen(heap_after_start(CELERY_PARENT, redis_server.url))
