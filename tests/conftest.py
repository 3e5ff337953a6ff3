import shutil

import pytest

from tests.lab import WORKER_MODULES, RedisServer, start_api, start_worker


def pytest_configure(config):
    config.addinivalue_line("markers", "compose: starts the real Docker Compose project (make test-compose)")


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
    started = []
    try:
        api = start_api(redis_server.url)
        started.append(api)
        workers = {}
        for queue in WORKER_MODULES:
            workers[queue] = start_worker(queue, redis_server.url)
            started.append(workers[queue])
        yield LabProcesses(redis_server, api, workers)
    finally:
        for proc in reversed(started):
            proc.stop()
