"""Which lab an experiment drives: LAB_ORCHESTRATOR=compose|swarm, or (auto) the
compose project when its API runs, else the Swarm stack when one is deployed."""

from __future__ import annotations

import os

from labctl.config import knobs
from labctl.errors import ParamError
from labctl.platform.compose import Compose
from labctl.platform.lab import Lab
from labctl.platform.swarm import Swarm, swarm_state


def orchestrator(env: dict[str, str] | None = None) -> Lab:
    env = dict(os.environ if env is None else env)
    choice = env.get("LAB_ORCHESTRATOR") or knobs().lab_orchestrator
    if choice not in ("auto", "compose", "swarm"):
        raise ParamError(f"LAB_ORCHESTRATOR={choice}: auto, compose or swarm")
    if choice == "swarm":
        return Swarm(env)
    compose = Compose(env)
    if choice == "compose" or compose.port("api", 8000):
        return compose
    swarm = Swarm(env)
    return swarm if swarm_state() == "active" and swarm.deployed() else compose
