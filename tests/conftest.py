import shutil

import pytest

from tests.lab import WORKER_MODULES, RedisServer, api_process, start_together, worker_process


def pytest_configure(config):
    config.addinivalue_line("markers", "compose: starts the real Docker Compose project (make test-compose)")


# make test hands the tests to its pytest-xdist workers one at a time (a
# module marked xdist_group as one), in collection order (--dist loadgroup
# --no-loadscope-reorder): the longest go first, so that none starts near the
# end and holds the run up. RQ's SIGKILL test waits out RQ's
# fixed 60 s before an abandoned job comes back; then the modules whose tests
# each take seconds to tens of seconds; the unit tests last, filling the gaps.
LONGEST_FIRST = (
    "tests/integration/test_worker_stop.py::test_sigkill_mid_batch_loses_nothing[rq]",
    "tests/integration/test_worker_stop.py::test_sigkill",
    "tests/integration/test_worker_stop.py",
    "tests/integration/test_redis_loss.py",
    "tests/integration/test_outage.py",
    "tests/integration/test_replicas.py",
    "tests/integration/test_queues.py",
    "tests/integration/test_load_tooling.py::test_a_distributed",
    "tests/integration/",
)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: each module's tests keep their order


@pytest.fixture(scope="session")
def redis_server():
    if not shutil.which("redis-server"):
        pytest.fail("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer().start()
    yield server
    server.stop()


class LabProcesses:
    def __init__(self, redis, api, workers):
        self.redis, self.api, self.workers = redis, api, workers

    def process_for(self, queue: str):
        """The process that runs this queue's tasks: the API for `background`."""
        return self.api if queue == "background" else self.workers[queue]


@pytest.fixture(scope="session")
def lab(redis_server):
    """The API and one worker per queue, on one Redis, for the whole session."""
    api = api_process(redis_server.url)
    workers = {queue: worker_process(queue, redis_server.url) for queue in WORKER_MODULES}
    start_together(api, *workers.values())
    try:
        yield LabProcesses(redis_server, api, workers)
    finally:
        for proc in [*workers.values(), api]:
            proc.stop()
