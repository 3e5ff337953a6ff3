"""`make compare`: every chosen queue under the same limits and the same load,
in turn, each several times; one report to share.

    uv run python -m labctl compare [--workers "arq saq"] [--duration 25 | --requests N] [--reps 2]
                                    [--warmup-s 5] [--drain-watch 20] [--users 100] [--spawn 100]
                                    [--endpoint io/simple] [--locust-workers 2] [--backlog-wait-s 600]
                                    [--setting article] [--results-dir results]

Under the limits of the running stack (read from the engine, never changed:
`make up WORKER_CPUS=0.5 WORKER_MEM=500M` first for others), for rep 1..reps and
each queue in turn (q1 q2 ... q1 q2 ...: the machine's drift spreads over the
queues):
  1. waits until no queue holds a backlog (lab_queue_depth 0 everywhere: this
     run's tasks must not wait behind others, and no other drain may share the CPU);
  2. runs `make load worker=Q duration=25s drain_watch=20` (labctl/load_run): a
     load long enough to reach and hold its steady rate, whose RPS is read over
     its steady part (after --warmup-s, from the run's ledger timeline), then a
     watch of its tasks for at most --drain-watch seconds;
  3. a queue that drains slower than its API enqueued (arq at its poll, RQ forking
     a process per task) is measured over that watch, its time to run every task
     projected from the rate it held, and the rest of its backlog run by a one-off
     worker of the same queue with its CPU limit lifted, so that the next run
     starts on an empty queue; the ledger counts every task, whichever worker ran it;
  4. reads from Prometheus the run's request rate, throughput, backlog and
     completed tasks over time, and the CPU seconds its worker and the API used.
Then writes results/compare-<time>.json (the record), .md (the table) and
.html (the report: labctl/render/compare_page.py), and prints the table.

`--setting article` runs the published experiment's two settings in one go
(0.2 CPU / 200M and 0.5 CPU / 500M for the API and every worker, ARQ, SAQ and
Celery at concurrency 1, io/simple, 100 users, its queues and `background`),
restarting the compose lab under each, then under its own settings again, and
writes one report with both tables beside the article's (compare-article-<time>).
"""

from __future__ import annotations

from collections.abc import Callable

from labctl.errors import EXIT_FAILED, EXIT_OK
from labctl.experiments.compare.article import article, article_env
from labctl.experiments.compare.comparison import compare_once
from labctl.experiments.compare.options import ARTICLE_SETTING, CompareOptions, check_params, command_line, run_options
from labctl.experiments.compare.series import middle_rate
from labctl.experiments.compare.setting import published_beside
from labctl.platform.lab import Lab
from labctl.queues import parse_workers
from labctl.render.console import Console

__all__ = [
    "CompareOptions",
    "article_env",
    "check_params",
    "command_line",
    "compare",
    "middle_rate",
    "parse_workers",
    "published_beside",
    "run_options",
]


def compare(options: CompareOptions, lab: Lab, ui: Console, before: Callable[[list[str]], object] | None = None) -> int:
    """`before(queues)` runs ahead of each comparison (make compare capacity=1: make capacity)."""
    if options.setting == ARTICLE_SETTING:
        return article(options, lab, ui, before)
    queues = parse_workers(options.workers)
    options = options.quickened()
    check_params(options, queues)
    _, failed = compare_once(options, queues, lab, ui, before=before)
    return EXIT_FAILED if failed else EXIT_OK
