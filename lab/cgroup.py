"""Report this container's CPU and memory use and limits, read from its own cgroup.

Works unprivileged with cgroup v2 and v1, so the same numbers appear on Linux,
Docker Desktop and Kubernetes. Exported as:
  lab_cpu_seconds_total, lab_cpu_limit_cores, lab_cpu_throttled_seconds_total,
  lab_cpu_periods_total, lab_cpu_throttled_periods_total,
  lab_memory_bytes, lab_memory_usage_bytes, lab_memory_limit_bytes,
  lab_oom_kills_total   (label: service)
Memory is the working set, what `docker stats` and Kubernetes show: the
cgroup's usage minus its inactive page cache (file pages the kernel reclaims
before it kills anything). The raw usage, page cache included, is
lab_memory_usage_bytes.
"No limit" is reported as the host's size (its cores, its memory), so a
ratio against the limit stays meaningful.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

ROOT = Path("/sys/fs/cgroup")


@dataclass
class CgroupSample:
    cpu_seconds: float | None = None
    cpu_limit_cores: float | None = None
    throttled_seconds: float | None = None
    # CFS enforcement periods in which the container ran, and those in which it
    # used up its quota and was held back: their ratio is the share of the
    # time the container wanted to run that its CPU limit cut short (0-100 %).
    periods: float | None = None
    throttled_periods: float | None = None
    memory_bytes: float | None = None  # working set
    memory_usage_bytes: float | None = None  # raw usage, page cache included
    memory_limit_bytes: float | None = None
    oom_kills: float | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _stat(path: Path) -> dict[str, int]:
    text = _read(path) or ""
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if len(line.split()) == 2)}


def _own_paths(root: Path) -> dict[str, str]:
    """Controller -> this process's cgroup path, from /proc/self/cgroup ("" = v2)."""
    paths: dict[str, str] = {}
    for line in (_read(Path("/proc/self/cgroup")) or "").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _dir(root: Path, controller: str, own: dict[str, str]) -> Path:
    """The cgroup directory of a controller: this process's own one where it is
    visible (a host), else the mount root (a container sees its own cgroup there)."""
    base = root / controller if controller else root
    nested = base / own.get(controller, "/").lstrip("/")
    return nested if nested != base and nested.is_dir() else base


def _host_memory() -> float | None:
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        if line.startswith("MemTotal:"):
            return float(line.split()[1]) * 1024
    return None


def memory_of(mem_dir: Path) -> tuple[float, float] | None:
    """(usage, working set) of a memory cgroup directory, v2 or v1; None if it
    has neither. The working set is usage minus inactive page cache, as Docker
    and the kubelet compute it. labctl/platform/cgroups.py reads containers' cgroups
    from the host with it."""
    for usage_file, inactive_key in (
        ("memory.current", "inactive_file"),
        ("memory.usage_in_bytes", "total_inactive_file"),
    ):
        if (usage := _read(mem_dir / usage_file)) is not None:
            inactive = _stat(mem_dir / "memory.stat").get(inactive_key) or 0
            return float(usage), max(0.0, float(usage) - inactive)
    return None


def cpu_seconds_of(cpu_dir: Path) -> float | None:
    """CPU a cgroup has used, user and system: from a v1 cpuacct directory's
    cpuacct.usage or a v2 directory's cpu.stat; None if it has neither.
    labctl/platform/cgroups.py reads containers' cgroups from the host with it.
    cpuacct.usage first: read_cgroup's v1 branch calls this on every scrape and
    reads cpu.stat itself for throttling; a v2 directory has no cpuacct.usage."""
    if (acct := _read(cpu_dir / "cpuacct.usage")) is not None:
        return int(acct) / 1e9
    if (usage := _stat(cpu_dir / "cpu.stat").get("usage_usec")) is not None:
        return usage / 1e6
    return None


def read_cgroup(root: Path = ROOT) -> CgroupSample:
    own = _own_paths(root)
    sample = CgroupSample()
    if (root / "cgroup.controllers").exists():  # v2: one unified tree
        d = _dir(root, "", own)
        cpu = _stat(d / "cpu.stat")  # read once here for both figures, where cpu_seconds_of would read it again
        if "usage_usec" in cpu:
            sample.cpu_seconds = cpu["usage_usec"] / 1e6
        if "throttled_usec" in cpu:
            sample.throttled_seconds = cpu["throttled_usec"] / 1e6
        sample.periods, sample.throttled_periods = cpu.get("nr_periods"), cpu.get("nr_throttled")
        quota, _, period = (_read(d / "cpu.max") or "max 100000").partition(" ")
        if quota != "max":
            sample.cpu_limit_cores = int(quota) / int(period)
        if (memory := memory_of(d)) is not None:
            sample.memory_usage_bytes, sample.memory_bytes = memory
        limit = _read(d / "memory.max")
        if limit not in (None, "max"):
            sample.memory_limit_bytes = float(limit)
        events = _stat(d / "memory.events")
        if "oom_kill" in events:
            sample.oom_kills = events["oom_kill"]
    else:  # v1: one tree per controller
        cpu_dir = _dir(root, "cpu", own)
        sample.cpu_seconds = cpu_seconds_of(_dir(root, "cpuacct", own))
        throttled = _stat(cpu_dir / "cpu.stat")
        if "throttled_time" in throttled:
            sample.throttled_seconds = throttled["throttled_time"] / 1e9
        sample.periods, sample.throttled_periods = throttled.get("nr_periods"), throttled.get("nr_throttled")
        quota_us, period_us = _read(cpu_dir / "cpu.cfs_quota_us"), _read(cpu_dir / "cpu.cfs_period_us")
        if quota_us and period_us and int(quota_us) > 0:
            sample.cpu_limit_cores = int(quota_us) / int(period_us)
        mem_dir = _dir(root, "memory", own)
        if (memory := memory_of(mem_dir)) is not None:
            sample.memory_usage_bytes, sample.memory_bytes = memory
        limit = _read(mem_dir / "memory.limit_in_bytes")
        host = _host_memory()
        # v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages).
        if limit is not None and (host is None or float(limit) < host):
            sample.memory_limit_bytes = float(limit)
        oom = _stat(mem_dir / "memory.oom_control")
        if "oom_kill" in oom:
            sample.oom_kills = oom["oom_kill"]
    if sample.cpu_limit_cores is None:
        sample.cpu_limit_cores = float(os.cpu_count() or 1)
    if sample.memory_limit_bytes is None:
        sample.memory_limit_bytes = _host_memory()
    return sample


class CgroupCollector(Collector):
    def __init__(self, service: str, root: Path = ROOT):
        self.service = service
        self.root = root

    def collect(self):
        s = read_cgroup(self.root)
        rows = [
            (CounterMetricFamily, "lab_cpu_seconds", "CPU time used by this container.", s.cpu_seconds),
            (GaugeMetricFamily, "lab_cpu_limit_cores", "CPU limit of this container, in cores.", s.cpu_limit_cores),
            (
                CounterMetricFamily,
                "lab_cpu_throttled_seconds",
                "Time this container was throttled by its CPU limit.",
                s.throttled_seconds,
            ),
            (
                CounterMetricFamily,
                "lab_cpu_periods",
                "CPU enforcement periods (cpu.cfs_period_us each) in which this container ran.",
                s.periods,
            ),
            (
                CounterMetricFamily,
                "lab_cpu_throttled_periods",
                "Enforcement periods in which this container used up its CPU quota and was held back.",
                s.throttled_periods,
            ),
            (
                GaugeMetricFamily,
                "lab_memory_bytes",
                "Working set of this container: its cgroup's usage minus "
                "inactive page cache (what docker stats shows).",
                s.memory_bytes,
            ),
            (
                GaugeMetricFamily,
                "lab_memory_usage_bytes",
                "Memory charged to this container's cgroup, page cache included.",
                s.memory_usage_bytes,
            ),
            (GaugeMetricFamily, "lab_memory_limit_bytes", "Memory limit of this container.", s.memory_limit_bytes),
            (
                CounterMetricFamily,
                "lab_oom_kills",
                "Processes of this container killed for lack of memory "
                "(a pool child; the main process's death restarts the container instead).",
                s.oom_kills,
            ),
        ]
        for family, name, doc, value in rows:
            if value is None:
                continue
            metric = family(name, doc, labels=["service"])
            metric.add_metric([self.service], value)
            yield metric


_registered: set[str] = set()


def register_cgroup_metrics(service: str) -> None:
    if service not in _registered:
        REGISTRY.register(CgroupCollector(service))
        _registered.add(service)
