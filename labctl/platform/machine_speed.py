"""How fast this machine's cores run a fixed piece of Python while a run's load
goes on: a probe for what a CPU limit cannot hold still.

A CPU limit gives a container a share of time, not an amount of work: at 0.2
CPU the API gets a fifth of each scheduler period, and the requests it answers
in it follow the speed of the core under it. A virtual machine's cores change speed
with what its host runs besides, over tens of seconds to minutes, so two reps
of one queue minutes apart can differ though nothing in the lab did. The
probe lets a record say so: a thread of the command times one fixed unit of
work (UNIT_ADDITIONS additions) every EVERY_S, a small fraction of a core, and
keeps each timing (records.run.MachineSpeed reads them; docs/compare.md, "The
machine's speed").
"""

from __future__ import annotations

import threading
import time

UNIT_ADDITIONS = 40_000
EVERY_S = 0.2
UNIT = f"{UNIT_ADDITIONS:,} additions of a Python loop, timed every {EVERY_S:g} s"


def _unit() -> int:
    total = 0
    for i in range(UNIT_ADDITIONS):
        total += i
    return total


class SpeedProbe:
    """Times the unit every `every_s` from a daemon thread between start() and stop();
    `rows` holds [unix time, milliseconds] per timing."""

    def __init__(self, every_s: float = EVERY_S):
        self.every_s = every_s
        self.rows: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="machine-speed", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            at = time.time()
            began = time.perf_counter()
            _unit()
            self.rows.append([round(at, 3), round((time.perf_counter() - began) * 1000, 4)])
            self._stop.wait(max(0.0, self.every_s - (time.time() - at)))

    def start(self) -> SpeedProbe:
        self._thread.start()
        return self

    def stop(self) -> list[list[float]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return self.rows
