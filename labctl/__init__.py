"""labctl: the lab's experiments from the host, one command line (`python -m labctl --help`).

Floors inside the package, each importing only from its own floor or lower ones
(tests/unit/test_layout.py checks it):

  config, errors, polling, params       the project root, .env, one error family, waiting
  platform, records                     the docker CLI (compose, swarm, stack file); the typed records and their store
  clients, render                       Prometheus, Grafana, the lab's API; tables, console, charts, report pages
  load_run                              one load run, step by step: what every experiment builds on
  experiments, tools                    make load/compare/bench/chaos/scale/sweep/results/report; measurement helpers
  commands, app                         the typer commands (options and nothing else), the entry point
"""
