"""The limits, knobs and restarts of a service's containers as the engine applied
them, read from `docker inspect` entries (or a Swarm task read as one). Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.queues import BROKERS

# Per-queue override of CONCURRENCY, as the worker reads it (lab/settings.py).
CONCURRENCY_KNOB = {b.name: b.concurrency_knob for b in BROKERS}
# Container settings that change a result, kept in the record (read from the container).
TASK_KNOBS = ("CPU_WORK", "IO_LATENCY_MS", "THREAD_POOL_SIZE", "PROCESS_POOL_SIZE")
KNOBS = {
    "api": ("ENQUEUE_MODE", "BLOCKING_PUBLISH", "API_WORKERS", "THREADPOOL_TOKENS", "UPSTREAM_LATENCY_MS", *TASK_KNOBS),
    **{b.name: (b.concurrency_knob, *b.knobs, *TASK_KNOBS) for b in BROKERS},
}


def mem_text(n: int | None) -> str:
    """Bytes as `make limits` prints them: 200M, 1G, 512K; `-` for no limit."""
    if not n or n <= 0:
        return "-"
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def cpus_of(host_config: Mapping[str, Any]) -> float | None:
    """The CPU limit in cores from `docker inspect`'s HostConfig (NanoCpus, or quota/period)."""
    nano = host_config.get("NanoCpus") or 0
    if nano > 0:
        return round(nano / 1e9, 4)
    quota, period = host_config.get("CpuQuota") or 0, host_config.get("CpuPeriod") or 0
    if quota > 0:
        return round(quota / (period or 100_000), 4)
    return None


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in (container.get("Config", {}).get("Env") or []) if "=" in item)


def limits_of(containers: Sequence[Mapping[str, Any]], queue: str | None = None) -> dict[str, Any]:
    """One service's limits from `docker inspect` of its running containers:
    cpus, memory, replicas, and (for a queue worker) its concurrency per process."""
    if not containers:
        return {"cpus": None, "memory": None, "memory_bytes": None, "replicas": 0}
    first = containers[0]
    host = first.get("HostConfig", {})
    memory = host.get("Memory") or None
    out = {"cpus": cpus_of(host), "memory": mem_text(memory), "memory_bytes": memory, "replicas": len(containers)}
    shapes = {(cpus_of(c.get("HostConfig", {})), c.get("HostConfig", {}).get("Memory")) for c in containers}
    if len(shapes) > 1:
        out["mixed"] = True  # replicas created under different limits (a `make up` half applied)
    if queue in CONCURRENCY_KNOB:
        env = env_of(first)
        value = env.get(CONCURRENCY_KNOB[queue]) or env.get("CONCURRENCY")
        out["concurrency"] = int(value) if value and value.isdigit() else None
    return out


def knobs_of(containers: Sequence[Mapping[str, Any]], service: str) -> dict[str, str]:
    env = env_of(containers[0]) if containers else {}
    return {k: env[k] for k in KNOBS.get(service, ()) if k in env}


def restart_counts(containers: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, list[Any]]]:
    """Per service and container (docker inspect): [restart count, last exit was an OOM kill]."""
    return {
        service: {
            c.get("Name", "").lstrip("/"): [c.get("RestartCount", 0), bool(c.get("State", {}).get("OOMKilled"))]
            for c in cs
        }
        for service, cs in containers.items()
    }


def restarts_during(
    before: Mapping[str, Mapping[str, list[Any]]], after: Mapping[str, Mapping[str, list[Any]]]
) -> dict[str, Any]:
    """Restarts of each service's containers between two restart_counts(): a
    container restarted by its restart policy (a crash, an OOM kill) mid-run."""
    out = {}
    for service, containers in after.items():
        n, oom = 0, False
        for name, (count, oom_killed) in containers.items():
            earlier = before.get(service, {}).get(name)
            if earlier is not None and count > earlier[0]:
                n += count - earlier[0]
                oom = oom or oom_killed
        if n:
            out[service] = {"restarts": n, "oom_killed": oom}
    return out


def limits_table(inspected: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """`make limits`: (service, replica, CPUs, memory, container) of each running
    container of a compose project, sorted by service and replica; `-` for no limit."""
    rows = []
    for c in inspected:
        labels = c.get("Config", {}).get("Labels") or {}
        cpus = cpus_of(c.get("HostConfig", {}))
        rows.append(
            (
                labels.get("com.docker.compose.service", ""),
                labels.get("com.docker.compose.container-number", ""),
                f"{cpus:g}" if cpus else "-",
                mem_text(c.get("HostConfig", {}).get("Memory")),
                c.get("Name", "").lstrip("/"),
            )
        )
    return sorted(rows, key=lambda r: (r[0], int(r[1]) if r[1].isdigit() else 0))
