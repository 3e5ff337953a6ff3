"""`make limits`: the CPU and memory limit each running container of the compose
project really got, read back from the engine (docker inspect), not from .env or
the compose file: what is enforced, after every default and override was applied.

    SERVICE  REPLICA  CPUS  MEMORY  CONTAINER      ("-" = no limit)
"""

from __future__ import annotations

from labctl.errors import LabNotRunning
from labctl.platform import docker
from labctl.platform.compose import Compose
from labctl.platform.containers import limits_table
from labctl.render.console import Console

ROW = "{:<16} {:<8} {:<6} {:<8} {}"


def limits(ui: Console) -> int:
    ids = Compose(profile=None).running_ids()
    if not ids:
        raise LabNotRunning("no running container in this compose project")
    ui.say(ROW.format("SERVICE", "REPLICA", "CPUS", "MEMORY", "CONTAINER"))
    for row in limits_table(docker.inspect(*ids)):
        ui.say(ROW.format(*row))
    return 0
