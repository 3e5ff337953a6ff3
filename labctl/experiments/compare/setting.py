"""Where a comparison ran: the limits and knobs its runs recorded, the libraries'
versions, the machine; and what the lab's other records say of its queues (the
latest bench, chaos and capacity runs, the published experiment's rows for its setting)."""

from __future__ import annotations

import platform
import tomllib
from pathlib import Path
from typing import Any

from labctl.config import ROOT
from labctl.platform.docker import engine_info
from labctl.platform.lab import Lab
from labctl.records import published
from labctl.records.bench import BenchRatios, ratios
from labctl.records.capacity import CapacityRecord
from labctl.records.compare import CapacityBeside, ChaosBeside, CompareParams, Setting
from labctl.records.run import Limits, RunRecord, ServiceLimits, limit_text
from labctl.records.store import Store

LIBRARIES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "redis",
    "arq",
    "saq",
    "faststream",
    "celery",
    "kombu",
    "taskiq",
    "taskiq-redis",
    "dramatiq",
    "streaq",
    "rq",
    "huey",
    "pydocket",
    "prometheus-client",
    "locust",
)


def versions(lab: Lab) -> dict[str, str]:
    """The libraries' versions as uv.lock pins them (the image installs exactly these), and the image's Python."""
    try:
        packages = tomllib.loads((ROOT / "uv.lock").read_text()).get("package", [])
    except (OSError, tomllib.TOMLDecodeError):
        packages = []
    pinned = {p.get("name"): p.get("version") for p in packages}
    proc = lab.exec("api", "python", "-V")
    out = {"python (image)": proc.stdout.strip().removeprefix("Python ") if proc.returncode == 0 else "-"}
    out.update({name: pinned[name] for name in LIBRARIES if pinned.get(name)})
    return out


def machine() -> dict[str, str]:
    """The Docker engine's host as the engine describes it, and the CPU's model."""
    out = {"host": f"{platform.system()} {platform.machine()}"}
    info = engine_info()
    for key, name in (
        ("NCPU", "cores"),
        ("MemTotal", "memory"),
        ("OperatingSystem", "OS"),
        ("KernelVersion", "kernel"),
        ("ServerVersion", "Docker engine"),
        ("CgroupVersion", "cgroup version"),
    ):
        if info.get(key):
            out[name] = f"{info[key] / (1 << 30):.1f} GiB" if key == "MemTotal" else str(info[key])
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)
    if model is not None:
        out["CPU"] = model
    return out


def setting_of(records: list[RunRecord], lab: Lab) -> tuple[Setting, list[str]]:
    """The limits and knobs the runs recorded (the first run of each queue's), and notes where runs disagree."""
    api: ServiceLimits | None = None
    workers: dict[str, ServiceLimits] = {}
    knobs: dict[str, Any] = {}
    notes = []
    for record in records:
        queue = record.worker or ""
        if api is None:
            api = record.limits.api
        elif record.limits.api_text != limit_text(api):
            notes.append(f"{record.run}: the API ran under {record.limits.api_text}")
        worker = record.limits.workers.get(queue)
        first = workers.setdefault(queue, worker) if worker is not None else workers.get(queue)
        if limit_text(worker) != limit_text(first):
            notes.append(f"{record.run}: {queue} ran under {limit_text(worker)}, not {limit_text(first)}")
        for service, values in record.knobs.items():
            knobs.setdefault(service, values)
    return Setting(
        limits=Limits(api=api, workers=workers), knobs=knobs, versions=versions(lab), machine=machine()
    ), notes


def latest_bench(store: Store, queues: list[str]) -> dict[str, BenchRatios]:
    """Each queue's row of its latest bench."""
    out: dict[str, BenchRatios] = {}
    for record in store.benches():
        for row in ratios(record):
            if row.queue in queues:
                out[row.queue] = row
    return {q: out[q] for q in queues if q in out}


def latest_capacity(store: Store, queues: list[str]) -> dict[str, CapacityBeside]:
    """Each queue's result in its latest `make capacity`, with the limits it ran under."""
    out: dict[str, CapacityBeside] = {}
    for record in store.of(CapacityRecord):
        for queue, result in record.queues.items():
            if queue in queues:
                out[queue] = CapacityBeside.model_validate(
                    {
                        **result.as_json(),
                        "limits": f"{record.api_limits} / {record.worker_limits}",
                        "max_wait_s": record.params.max_wait_s,
                        "record": record.base,
                    }
                )
    return {q: out[q] for q in queues if q in out}


def latest_chaos(store: Store, queues: list[str]) -> list[ChaosBeside]:
    """Each queue's latest fault run per fault: what it lost and duplicated, and when work resumed."""
    latest: dict[tuple[str, str], ChaosBeside] = {}
    for record in store.runs():
        chaos = record.chaos
        if chaos and record.worker in queues:
            latest[(record.worker, chaos.fault or "")] = ChaosBeside(
                queue=record.worker,
                fault=chaos.fault,
                lost=chaos.lost,
                duplicates=chaos.duplicates,
                recovered_s=chaos.recovered_s,
                limits=f"{record.limits.api_text} / {record.limits.workers_text}",
                run=record.run,
            )
    return sorted(latest.values(), key=lambda c: (queues.index(c.queue), c.fault or ""))


def published_beside(setting: Setting, params: CompareParams) -> tuple[published.Published | None, str]:
    """The article's rows when the comparison ran its setting, and why not otherwise."""
    texts = {setting.limits.api_text} | {lim.text for lim in setting.limits.workers.values()}
    if len(texts) != 1:
        return None, f"the API and the workers ran under different limits ({', '.join(sorted(texts))})"
    (text,) = texts
    rows = published.beside(text, params.endpoint, params.users)
    if rows is not None:
        return rows, ""
    if text in published.SETTINGS and params.endpoint == published.ENDPOINT and params.users == published.USERS:
        return None, f"its table for {text} is not transcribed in labctl/records/data/published_article.toml"
    return None, f"this comparison ran {text}, {params.endpoint}, {params.users} users"
