"""A container's memory and CPU read on the host from its cgroup: no call into
the container, so the reading costs it nothing."""

from __future__ import annotations

import threading
from pathlib import Path

from lab.cgroup import cpu_seconds_of, memory_of

CGROUP = Path("/sys/fs/cgroup")


def _cgroup_dirs(container_id: str, v1_controller: str) -> tuple[Path, ...]:
    """Where a container's cgroup is: cgroup v1 (one tree per controller), then v2 (systemd or cgroupfs driver)."""
    return (
        CGROUP / v1_controller / "docker" / container_id,
        CGROUP / "system.slice" / f"docker-{container_id}.scope",
        CGROUP / "docker" / container_id,
    )


def working_set(container_id: str) -> float | None:
    """Bytes in use minus inactive page cache, as `docker stats` counts them."""
    for memory_dir in _cgroup_dirs(container_id, "memory"):
        if (memory := memory_of(memory_dir)) is not None:
            return memory[1]
    return None


def cpu_seconds(container_id: str) -> float | None:
    """CPU the container has used since it started, user and system."""
    for cpu_dir in _cgroup_dirs(container_id, "cpuacct"):
        if (seconds := cpu_seconds_of(cpu_dir)) is not None:
            return seconds
    return None


class PeakMemory(threading.Thread):
    """A container's highest working set, sampled every `interval` seconds until stopped."""

    def __init__(self, container_id: str, interval: float = 0.1):
        super().__init__(daemon=True)
        self.container_id, self.interval = container_id, interval
        self.peak: float | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            value = working_set(self.container_id)
            if value is not None:
                self.peak = max(self.peak or 0, value)
            self._done.wait(self.interval)

    def stop(self) -> float | None:
        """The peak in MiB."""
        self._done.set()
        self.join()
        return round(self.peak / (1 << 20), 1) if self.peak else None
