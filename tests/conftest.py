import shutil

import pytest

from tests.lab import WORKER_MODULES, RedisServer, api_process, start_together, worker_process


def pytest_configure(config):
    config.addinivalue_line("markers", "compose: starts the real Docker Compose project (make test-compose)")


# make test hands the tests to its pytest-xdist workers one unit at a time, in
# collection order (--dist loadgroup, with the scheduler below): the longest
# go first, so that none starts near the end and holds the run up: the two
# groups that share a lab (a couple of minutes each), RQ's SIGKILL test (RQ's
# fixed 60 s before an abandoned job comes back), then the tests that take
# tens of seconds; the unit tests last, filling the gaps.
LONGEST_FIRST = (
    "tests/integration/test_queues.py",
    "tests/integration/test_replicas.py",
    "tests/integration/test_api_input.py",
    "tests/integration/test_worker_stop.py::test_sigkill_mid_batch_loses_nothing[rq]",
    "tests/integration/test_worker_stop.py::test_sigkill",
    "tests/integration/test_worker_stop.py",
    "tests/integration/test_redis_loss.py",
    "tests/integration/test_modes.py",
    "tests/integration/test_outage.py",
    "tests/integration/test_load_tooling.py::test_a_distributed",
    "tests/integration/test_mutants.py",
    "tests/integration/",
)
# Modules whose tests share processes that a session or module fixture starts:
# one xdist worker runs each group whole, so those processes start once (the
# session's lab on two workers, not on each). Every other test is a unit of
# its own. (xdist's own xdist_group marks do not group under pytest 9.2, which
# computes node ids from their parts: xdist renames them to group.)
SHARED_PROCESSES = {
    "tests/integration/test_queues.py": "lab-queues",
    "tests/integration/test_replicas.py": "lab-replicas",
    "tests/integration/test_api_input.py": "api-input",
    "tests/integration/test_experiments.py": "experiments",
    "tests/integration/test_modes.py": "modes",
}


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: each module's tests keep their order


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup: xdist's scope scheduling over SHARED_PROCESSES' groups,
    in collection order."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedProcessesScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SHARED_PROCESSES.get(nodeid.split("::", 1)[0], nodeid)

    config.option.loadscopereorder = False  # collection order: the longest first
    return SharedProcessesScheduling(config, log)


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
