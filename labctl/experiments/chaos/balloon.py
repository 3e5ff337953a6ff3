"""The `oom` fault's memory hog, run by the worker container's python as root
(`docker exec -i -u 0 ... python - MiB`, this file on its stdin): it makes the
worker's main process the one the kernel kills first (root may raise another
process's oom_score_adj; no capability needed), then fills the container's
memory a MiB at a time. The worker's main process is the child of the
container's init (tini); `docker exec` processes have parent 0."""

import os
import sys
import time


def parent(pid: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("PPid:")).split()[1])


for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid() and parent(pid) == 1:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
hog = []
for _ in range(int(sys.argv[1])):
    hog.append(b"\x01" * 2**20)  # written, so really resident
    time.sleep(0.005)
