"""One step of a claims run, inside its container: start the processes a
benchmark's author starts (one script, or W copies of a worker command), know
when the work is done, stop what does not stop by itself, and print one JSON
line: the times, the exit codes, each process's output tail, the tally
(claims_tally.py) and Redis's client counts.

    python harness.py '<spec as JSON>'

spec: run (the tally's name), procs (argv lists, started together, each in its
own session), env, timeout_s, keep (a pattern: the lines of every log that match
it are returned whole, under "kept"), and `done`, how the end is known:
    {"kind": "exit"}                              every process has exited
    {"kind": "xgroup", "stream": S, "n": N}       taskiq: its group read N entries, none pending
    {"kind": "scard", "key": K, "n": N}           N distinct ids in a set
    {"kind": "counter", "key": K, "n": N}         a counter reached N (Dramatiq's benchmark)
    {"kind": "log", "n": N}                       N distinct `Job <num> finished at <t>` lines
    {"kind": "ledger", "key": K, "field": F, "n": N}   the lab's ledger settled N tasks (F:completed
                                                  + F:failed); when F:started was first seen is kept
Processes still running once done get SIGTERM, then SIGKILL after grace_s.
The figures: spawn_done_s (processes started -> done), and the tally's first and
last task (first_last_s). Times are the container's clock, which is the host's.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import redis

JOB_LINE = re.compile(rb"Job (\d+) finished at ([0-9.]+)")


def tail(path: str, lines: int = 25) -> str:
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 8000))
        return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")


class JobLines:
    """The `Job <num> finished at <t>` lines of the logs, read on from where the last read stopped."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self.offsets = [0] * len(paths)
        self.seen: set[bytes] = set()
        self.lines = 0
        self.first: float | None = None
        self.last: float | None = None

    def read(self) -> int:
        for k, path in enumerate(self.paths):
            with open(path, "rb") as f:
                f.seek(self.offsets[k])
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[k] += end
            for m in JOB_LINE.finditer(data[:end]):
                self.lines += 1
                self.seen.add(m.group(1))
                t = float(m.group(2))
                self.first = t if self.first is None else min(self.first, t)
                self.last = t if self.last is None else max(self.last, t)
        return len(self.seen)


class Done:
    def __init__(self, spec: dict, client: redis.Redis, logs: list[str]):
        self.spec, self.client, self.logs = spec, client, logs
        self.kind = spec["kind"]
        self.job_lines = JobLines(logs)
        self.first_started: float | None = None

    def __call__(self, procs: list[subprocess.Popen]) -> bool:
        s, c = self.spec, self.client
        if self.kind == "exit":
            return all(p.poll() is not None for p in procs)
        if self.kind == "xgroup":
            groups = c.xinfo_groups(s["stream"])
            return bool(groups) and all(
                (g.get("entries-read") or 0) >= s["n"] and g["pending"] == 0 and not g.get("lag") for g in groups
            )
        if self.kind == "scard":
            return c.scard(s["key"]) >= s["n"]
        if self.kind == "counter":
            return int(c.get(s["key"]) or 0) >= s["n"]
        if self.kind == "log":
            return self.job_lines.read() >= s["n"]
        if self.kind == "ledger":
            f = s["field"]
            started, completed, failed = c.hmget(s["key"], f"{f}:started", f"{f}:completed", f"{f}:failed")
            if self.first_started is None and int(started or 0) > 0:
                self.first_started = time.time()
            return int(completed or 0) + int(failed or 0) >= s["n"]
        raise ValueError(f"unknown done kind {self.kind}")


def stop(procs: list[subprocess.Popen], grace_s: float) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + grace_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # a session's children, whether or not its leader is gone
        except ProcessLookupError:
            pass
        p.wait()


def peak_rss_mb(procs: list[subprocess.Popen]) -> float:
    """The peak resident memory (VmHWM) of every process in the started sessions, summed."""
    sessions = {p.pid for p in procs}
    total_kb = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                sid = int(f.read().rsplit(")", 1)[1].split()[3])
            if sid not in sessions:
                continue
            with open(f"/proc/{entry}/status") as f:
                total_kb += next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
        except (OSError, ValueError, IndexError):
            continue
    return round(total_kb / 1024, 1)


def tally(client: redis.Redis, run: str) -> dict:
    times = [line.split() for line in client.lrange(f"claims:{run}:times", 0, -1)]
    starts = [float(a) for a, _ in times]
    ends = [float(b) for _, b in times]
    return {
        "executions": int(client.get(f"claims:{run}:exec") or 0),
        "distinct": client.scard(f"claims:{run}:ids"),
        "first_start": min(starts) if starts else None,
        "last_end": max(ends) if ends else None,
    }


def main(spec: dict) -> dict:
    client = redis.Redis.from_url(os.environ.get("CLAIMS_REDIS_URL", "redis://localhost:6379/0"))
    env = {**os.environ, **spec.get("env", {}), "CLAIMS_RUN": spec["run"]}
    logdir = tempfile.mkdtemp(prefix="claims-")
    logs = [os.path.join(logdir, f"proc{i}.log") for i in range(len(spec["procs"]))]
    done = Done(spec["done"], client, logs)
    rejected_before = client.info("stats")["rejected_connections"]
    peak_clients = 0
    poll_s = spec.get("poll_s", 0.01)
    started = time.time()
    procs = []
    for argv, log in zip(spec["procs"], logs):
        with open(log, "wb") as out:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
    status, done_at, polls = "ok", None, 0
    while True:
        if done(procs):
            done_at = time.time()
            break
        if done.kind != "exit" and all(p.poll() is not None for p in procs):
            status = "failed: every process exited before the work was done"
            break
        if time.time() - started > spec["timeout_s"]:
            status = f"timeout: not done within {spec['timeout_s']:.0f} s"
            break
        if polls % max(1, int(0.2 / poll_s)) == 0:
            peak_clients = max(peak_clients, client.info("clients")["connected_clients"])
        polls += 1
        time.sleep(poll_s)
    rss_mb = peak_rss_mb(procs)
    stop(procs, spec.get("grace_s", 10.0))
    ended = time.time()
    codes = [p.returncode for p in procs]
    result = {
        "status": status,
        "started": started,
        "done_at": done_at,
        "spawn_done_s": None if done_at is None else done_at - started,
        "ended": ended,
        "exit_codes": codes,
        "tally": tally(client, spec["run"]),
        "peak_rss_mb": rss_mb,
        "peak_connected_clients": peak_clients,
        "rejected_connections": client.info("stats")["rejected_connections"] - rejected_before,
        "output": [tail(log, spec.get("tail_lines", 25)) for log in logs[:4]],
    }
    if spec["done"]["kind"] == "log":
        jobs = done.job_lines
        jobs.read()
        result["job_lines"] = {"lines": jobs.lines, "distinct": len(jobs.seen), "first": jobs.first, "last": jobs.last}
    if done.kind == "ledger":
        result["first_started_seen"] = done.first_started
    if spec.get("keep"):  # the lines the figures are read from, wherever they fell among the logs'
        keep = re.compile(spec["keep"].encode())
        result["kept"] = []
        for log in logs:
            with open(log, "rb") as f:
                result["kept"] += [line.decode("utf-8", "replace") for line in f if keep.search(line)]
    return result


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
