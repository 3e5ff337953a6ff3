"""The APIs' rounds of `make bench`: the bare API and the lab's driven at the same time, round
after round, each round on a new process of each, and their rounds as one result per API."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labctl.errors import LabError
from labctl.experiments.bench.client import BenchStep
from labctl.platform import docker
from labctl.platform.cgroups import PeakMemory, cpu_seconds
from labctl.platform.lab import answers


class ApiRounds(BenchStep):
    def run(self, queue: str, run: str) -> dict[str, dict[str, Any]]:
        """Both APIs' rounds on the queue, each API's as one result ("bare", "lab")."""
        rounds: dict[str, list[dict[str, Any]]] = {"bare": [], "lab": []}
        apis = {
            "bare": (f"bare API, {self.args.requests} requests at concurrency {self.args.users}", "bench-api", ""),
            "lab": (f"lab API (run {run})", "api", run),
        }
        # Both APIs are driven at the same moment, each by its own client
        # process: both then meet the same machine, and a round's ratio no longer
        # moves with the machine's speed from one drive to the next (docs/bench.md).
        with ThreadPoolExecutor(2) as pool:
            for i in range(self.args.rounds):
                self.restart_apis(queue)
                self.say(
                    f"[{queue}] round {i + 1}/{self.args.rounds}: {apis['bare'][0]}, and the {apis['lab'][0]}"
                    f" at the same time ..."
                )
                drives = {
                    side: pool.submit(self.drive, service, queue, side_run)
                    for side, (_, service, side_run) in apis.items()
                }
                for side, drive in drives.items():
                    rounds[side].append(drive.result())
        return {"bare": combine(rounds["bare"]), "lab": combine(rounds["lab"])}

    def drive(self, service: str, queue: str, run: str) -> dict[str, Any]:
        ids = self.compose.ids(service)
        container = ids[0] if ids else None
        memory = PeakMemory(container) if container else None
        if memory:
            memory.start()
        cpu_before = cpu_seconds(container) if container else None
        state_before = docker.state(container) if container else None
        began = time.time()
        result = self.client.loadgen(service, queue, run, self.args.requests, self.args.warmup)
        if memory:
            result["api_peak_mb"] = memory.stop()
        if down := api_down(state_before, docker.state(container) if container else None):
            result["api_down"] = down  # its CPU counter went with it: no CPU figure
        # The API's own CPU over the whole drive, warm-up included: what the
        # lab costs per request, read directly, where RPS also carries the
        # quota's scheduling and the machine's other work.
        elif container and cpu_before is not None and (cpu_after := cpu_seconds(container)) is not None:
            result["api_cpu_s"] = round(cpu_after - cpu_before, 4)
        result["window"] = [round(began, 1), round(time.time(), 1)]  # for Prometheus: the event-loop lag meanwhile
        result["api_started"] = (state_before or {}).get("StartedAt")  # a new process each round
        return result

    def restart_apis(self, queue: str) -> None:
        """A new process of each API before each round. A process's speed is
        partly a draw (where its memory landed, say) that it keeps for all its
        drives, so one bench with one process of each read the draw as the
        lab's cost. Fresh processes each round make the rounds independent
        draws, and their mean carries that spread halved (docs/bench.md). The lab's
        API is ready once its producer of the queue is (the library imported), as
        the bare API's is at its start."""
        self.compose.restart("bench-api", "api", extra_env=self.env)
        for service, path in (("bench-api", "/healthz"), ("api", f"/readyz?queues={queue}")):
            if not answers(self.compose, service, 8000, path, every_s=0.2):
                raise LabError(f"{service} did not answer within 60 s of its restart: docker compose logs {service}")


def api_down(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    """Why an API stopped answering during a drive, or None if it ran throughout.
    The bare API's plain BackgroundTasks keep no bound on the tasks that wait
    to run after their responses: under a small memory limit it has been killed at
    its memory limit. The bench's API does not restart (docker-compose.yml),
    so such a kill shows here and in the record; a container that did restart
    (the lab's API) is a new process whose CPU counter started again at zero."""
    if after is None:
        return "not running"
    if after.get("Running"):
        return "restarted" if before and before.get("StartedAt") != after.get("StartedAt") else None
    if after.get("OOMKilled"):
        return "killed at its memory limit (OOM)"
    return f"exited with code {after.get('ExitCode')}"


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Several rounds of one API as one result: RPS over all measured requests,
    latency percentiles as the mean of the rounds', memory at its highest."""
    ok, elapsed = sum(r["ok"] for r in rounds), sum(r["elapsed_s"] for r in rounds)
    mean: Callable[[str], float | None] = lambda key: (
        round(sum(r[key] for r in rounds) / len(rounds), 1) if all(r.get(key) is not None for r in rounds) else None
    )
    peaks = [r["api_peak_mb"] for r in rounds if r.get("api_peak_mb")]
    sent = sum(r["requests"] + r.get("warmup", 0) for r in rounds)
    cpu = sum(r["api_cpu_s"] for r in rounds) if all(r.get("api_cpu_s") is not None for r in rounds) else None
    return {
        "requests": sum(r["requests"] for r in rounds),
        "ok": ok,
        "errors": sum(r["errors"] for r in rounds),
        "statuses": {
            s: sum(r["statuses"].get(s, 0) for r in rounds) for s in {s for r in rounds for s in r["statuses"]}
        },
        "enqueued": ok + sum(r.get("warmup_ok", 0) for r in rounds),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else None,
        "rps_rounds": [r["rps"] for r in rounds],
        "windows": [r["window"] for r in rounds],
        "api_started": [r.get("api_started") for r in rounds],
        "p50_ms": mean("p50_ms"),
        "p95_ms": mean("p95_ms"),
        "api_peak_mb": max(peaks) if peaks else None,
        "api_cpu_us_per_request": round(cpu / sent * 1e6) if cpu is not None and sent else None,
        "generator_cpu": max(r["generator_cpu"] or 0 for r in rounds),
        "generator_bound": any(r["generator_bound"] for r in rounds),
        "api_down": [f"round {i}: {r['api_down']}" for i, r in enumerate(rounds, 1) if r.get("api_down")],
    }
