"""`make purge`'s lab side (services/purge.py): a queue emptied while none of its
workers runs, every task still counted.

For each broker queue a worker is SIGKILLed with a batch under way: tasks
running, others fetched ahead and waiting in the library's own structures
(unacknowledged messages, leases, in-progress keys), the rest queued. The purge
then leaves no key of any library holding one of the run's unsettled tasks
(key names and values, as Redis dumps them uncompressed), the run's ledger
counts exactly what was pending as purged (and another queue's tasks of the
same run stay pending), and a new worker runs a new batch as before."""

import asyncio
import json
import signal
import subprocess
import sys

import pytest
import redis

from tests.lab import (
    ON_REDIS,
    ROOT,
    RedisServer,
    lab_env,
    ledger,
    new_run,
    post_tasks,
    start_api,
    start_worker,
    wait_settled,
    wait_until,
)

QUEUES = list(ON_REDIS)
TASK_TIMEOUT_S = 5


@pytest.fixture
def isolated():
    server = RedisServer().start()
    api = start_api(server.url, name=f"api-purge-{new_run('')}", TASK_TIMEOUT_S=TASK_TIMEOUT_S)
    yield server, api
    api.stop()
    server.stop()


def purge(redis_url: str, queue: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "services.purge", queue],
        env=lab_env(redis_url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def holders(redis_url: str, task_ids: set[str]) -> dict[str, list[str]]:
    """Keys outside the ledger's (`lab:`) whose name or dumped value holds one of
    `task_ids`: key -> the ids it holds."""
    client = redis.Redis.from_url(redis_url)
    client.config_set("rdbcompression", "no")  # DUMP writes strings as they are
    found: dict[str, list[str]] = {}
    for key in client.scan_iter(count=1000):
        if key.startswith(b"lab:"):
            continue
        blob = key + (client.dump(key) or b"")
        hits = [t for t in task_ids if t.encode() in blob]
        if hits:
            found[key.decode(errors="replace")] = hits
    client.close()
    return found


@pytest.mark.parametrize("queue", QUEUES)
def test_a_purge_empties_a_queue_and_every_task_stays_counted(isolated, queue):
    server, api = isolated
    run, batch, elsewhere = new_run(f"purge-{queue}"), 60, 3
    other = "huey" if queue != "huey" else "rq"  # a queue with no worker here: its tasks stay pending
    env = {"IO_LATENCY_MS": 2500, "TASK_TIMEOUT_S": TASK_TIMEOUT_S}
    worker = start_worker(queue, server.url, name=f"{queue}-purge-1", **env)
    try:
        responses = post_tasks(api.url, run, queue, "io/simple", batch)
        assert [r.status_code for r in responses] == [202] * batch
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, other, "io/simple", elsewhere))
        # A task is running (an execution started and not ended) when the kill comes.
        wait_until(lambda: ledger(api.url, run)["totals"]["unfinished"] > 0, 60, "a task running", interval=0.05)
        worker.signal(signal.SIGKILL)
        worker.proc.wait(10)
    finally:
        worker.stop()
    before = ledger(api.url, run)
    pending = before["queues"][queue]["io/simple"]["pending"]
    assert pending > 0, f"the batch finished before the kill: the test proved nothing: {before['totals']}"

    out = purge(server.url, queue)
    assert out["queue"] == queue and out["purged"] == {run: pending} and out["keys_deleted"] > 0, out

    settled = {m.decode() for m in redis.Redis.from_url(server.url).smembers(f"lab:run:{run}:settled")}
    unsettled = {r.json()["task_id"] for r in responses} - settled
    assert len(unsettled) == pending, (len(unsettled), pending)
    assert holders(server.url, unsettled) == {}, f"{queue}'s purge left tasks in Redis"

    after = ledger(api.url, run)
    row = after["queues"][queue]["io/simple"]
    assert (row["purged"], row["pending"]) == (pending, 0), row
    assert row["enqueued"] == row["completed"] + row["failed"] + row["purged"] == batch, row
    assert after["queues"][other]["io/simple"]["pending"] == elsewhere and after["totals"]["pending"] == elsewhere
    assert after["queues"][other]["io/simple"]["purged"] == 0, after["queues"][other]
    assert purge(server.url, queue)["purged"] == {}, "a second purge found tasks to purge again"

    # The queue works as before: a new worker runs a new batch, and the purged run stays as it was.
    run2 = new_run(f"after-purge-{queue}")
    worker = start_worker(queue, server.url, name=f"{queue}-purge-2")
    try:
        assert all(r.status_code == 202 for r in post_tasks(api.url, run2, queue, "io/simple", 20))
        totals = wait_settled(api.url, run2, 20, timeout=120)["totals"]
    finally:
        worker.stop()
    assert (totals["completed"], totals["failed"], totals["purged"]) == (20, 0, 0), totals
    assert ledger(api.url, run)["queues"][queue]["io/simple"] == row


def test_the_ledger_purges_one_queue_and_leaves_the_others(isolated):
    """Ledger.purge on counts written as the API and the workers write them: one
    queue's cells, in every run, and nothing else."""
    server, api = isolated
    from lab.ledger import Ledger
    from lab.redis_clients import async_client
    from lab.settings import Settings

    runs = [new_run("ledger-purge-a"), new_run("ledger-purge-b")]
    for run in runs:
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, "arq", "io/simple", 4))
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, "arq", "cpu/simple", 2))
        assert all(r.status_code == 202 for r in post_tasks(api.url, run, "saq", "io/simple", 3))
    wait_until(lambda: all(ledger(api.url, r)["totals"]["enqueued"] == 9 for r in runs), 30, "the enqueues counted")

    async def purge_arq() -> dict:
        client = async_client(Settings(redis_url=server.url))
        try:
            return await Ledger(client).purge("arq")
        finally:
            await client.aclose()

    assert asyncio.run(purge_arq()) == {run: 6 for run in runs}
    for run in runs:
        report = ledger(api.url, run)
        assert report["totals"]["pending"] == 3 and report["totals"]["purged"] == 6, report["totals"]
        assert report["queues"]["saq"]["io/simple"]["purged"] == 0
