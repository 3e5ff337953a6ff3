"""`make sweep`: the same load run under every combination of worker limits.

    make sweep worker=arq cpus="0.2 0.5 1" mems="200M 500M" iterations=2000 [endpoint= users= services=]

For each CPU limit and memory limit it re-creates the lab with them (`make up
WORKER_CPUS=.. WORKER_MEM=..`, which recreates only the workers whose limits
changed), runs `make load` with the other parameters under the run name
<run or sweep-TIMESTAMP-WORKER>-<cpus>cpu-<mem>, and prints the comparison
table of the sweep's runs at the end. Each run but the last waits until its
tasks settled (`wait=1`): the next run must start with an empty backlog. The
last one watches its drain like `make load` unless wait=1 is given. Afterwards the lab is brought back to its
own limits (.env or the defaults). `services=` is passed to `make up` (here:
every service but Grafana, which has no offline image).

Knobs given on the command line (ARQ_POLL_DELAY=0.05, CONCURRENCY=10, ...) reach
every `make up`, as they would by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from scripts import lab_results as R
from scripts.compose import LoadError
from scripts.load import parser as load_parser
from scripts.load import run_load
from scripts.locust_run import raw_params
from scripts.params import load_params

ROOT = Path(__file__).resolve().parents[1]
# The outer make's own variables must not reach the inner `make up` (a
# WORKER_CPUS given to `make sweep` would override the sweep's value).
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def make_up(services: str, env: dict[str, str], **variables: str) -> None:
    cmd = ["make", "--no-print-directory", "-C", str(ROOT), "up", *(f"{k}={v}" for k, v in variables.items())]
    if services.strip():
        cmd.append(f"services={services.strip()}")
    print(f"\n== {' '.join(cmd[4:]) or 'make up'}", flush=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LoadError(f"make up {variables} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = load_parser()
    parser.prog = "python -m scripts.sweep"
    parser.description = __doc__
    parser.add_argument("--cpus", default="", help='worker CPU limits, e.g. "0.2 0.5 1"')
    parser.add_argument("--mems", default="", help='worker memory limits, e.g. "200M 500M"')
    parser.add_argument("--services", default="", help="passed to make up (default: every service)")
    args = parser.parse_args(argv)
    cpus, mems = args.cpus.split(), args.mems.split()
    if not cpus or not mems:
        print('make sweep: give cpus="0.2 0.5 ..." and mems="200M ..."', file=sys.stderr)
        return 2
    try:
        params = load_params.parse_params(raw_params(args))  # fail before recreating anything
    except load_params.ParamError as exc:
        print(f"make sweep: {exc}", file=sys.stderr)
        return 2
    base = args.run or f"sweep-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{params.worker_label or params.scenario}"
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES and k not in ("WORKER_CPUS", "WORKER_MEM")}
    runs, failures = [], []
    steps = [(cpu, mem) for cpu in cpus for mem in mems]
    try:
        for i, (cpu, mem) in enumerate(steps):
            make_up(args.services, env, WORKER_CPUS=cpu, WORKER_MEM=mem)
            run = f"{base}-{cpu}cpu-{mem}"[-64:].lstrip("-._")
            # Every run but the last waits for its tasks: the next one changes the
            # workers' limits, and must start with an empty backlog.
            last = i == len(steps) - 1
            one = argparse.Namespace(**{**vars(args), "run": run, "wait": args.wait or not last})
            try:
                code = run_load(one)
            except LoadError as exc:
                print(f"run {run} failed: {exc}", file=sys.stderr)
                failures.append(run)
                continue
            runs.append(run)
            if code != 0:
                failures.append(run)
    finally:
        try:
            make_up(args.services, env)  # back to the lab's own limits
            print("the lab is back to its own limits (.env or the defaults)")
        except LoadError as exc:
            print(f"could not restore the lab's limits: {exc}", file=sys.stderr)
    records = [
        json.loads((Path(args.results_dir) / f"{run}.json").read_text())
        for run in runs
        if (Path(args.results_dir) / f"{run}.json").exists()
    ]
    print(f"\nsweep {base}: {len(records)} run(s)\n")
    print(R.table(records))
    if failures:
        print(f"\nnot settled or failed: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
