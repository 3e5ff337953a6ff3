"""The bench client: the one `bench-client` container of a bench, and the tools run in it
(services/bare/loadgen.py against an API, services/bare/drain.py's questions about the queues), and
what each step of a bench works with."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from labctl.errors import DockerError, LabError
from labctl.experiments.bench.options import BenchOptions
from labctl.platform import docker
from labctl.platform.compose import Compose


class BenchClient:
    """One load-generator container for the whole bench, each drive a `docker
    exec` in it: drives follow each other within a second, where a container
    start apiece put seconds, and the machine's drift, between them."""

    def __init__(self, compose: Compose, stamp: str, env: dict[str, str], users: int):
        self.compose, self.env, self.users = compose, env, users
        self.name = f"bench-client-{stamp}"

    def up(self) -> None:
        self.compose.start_one_off("bench-client", self.name, self.env, command=("sleep", "infinity"))

    def down(self) -> None:
        docker.remove_container(self.name)

    def run(self, *args: str, timeout: float = 600) -> dict[str, Any]:
        """A command in the client, and the JSON of its output's last line."""
        try:
            proc = docker.exec_in(self.name, *args, timeout=timeout)
        except DockerError:
            raise LabError(f"`{' '.join(args)}` in the bench client did not finish within {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise LabError(f"`{' '.join(args)}` in the bench client exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return cast(dict[str, Any], json.loads(proc.stdout.strip().splitlines()[-1]))

    def drain_tool(self, *question: str) -> dict[str, Any]:
        """services/bare/drain.py in the bench client: a queue's backlog, what the lab published, ..."""
        return self.run("python", "-m", "services.bare.drain", *question)

    def loadgen(self, service: str, queue: str, run: str, requests: int, warmup: int) -> dict[str, Any]:
        """services/bare/loadgen.py in the bench client, against one API's io/simple endpoint of the queue."""
        url = f"http://{service}:8000/api/v1/incr/io/simple/{queue}"
        args = ["--requests", str(requests), "--users", str(self.users), "--warmup", str(warmup)]
        return self.run("python", "-m", "services.bare.loadgen", url, *args, *(["--run", run] if run else []))


@dataclass
class BenchStep:
    """What each step of a bench (its APIs' rounds, its drains) works with: the bench's
    options, the compose project, the client, the services' environment and the console."""

    args: BenchOptions
    compose: Compose
    client: BenchClient
    env: dict[str, str]
    say: Callable[[str], None]
