"""The queue authors' published benchmarks, as they print them, and the claims
`make claims` decides: the figures are another machine's (mostly Apple laptops),
so the claims are read on the ratios between queues, never on the seconds.

BENCHES: per benchmark, its source (repository, commit, file, licence), what it
measured, its N and worker processes as published (streaq's: per column), the
queue rows and their figures as published. The row keys are
the lab's labels of what ran (`rq-simple` is RQ's SimpleWorker, `celery-threads`
Celery with `-P threads`, ...). Figures in seconds unless the name says a rate
(`rate`: tasks per second).

CLAIMS: each claim with the ratio it rests on (a figure of one row over the same
figure of another, in the same benchmark and setup, repetition by repetition)
and the rule that decides it (records/claims.py, `decide`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAQ = "tobymao/saq"
STREAQ = "tastyware/streaq"
RQ = "rq/rq"
STEVENTEN = "steventen/python_queue_benchmark"
DRAMATIQ = "Bogdanp/dramatiq"
BLOG = "https://bytay.dev/blog/celery-is-not-always-the-answer"

# Columns of streaq's noop table and their scaled process counts here (2/10 per core: 1 stays 1).
STREAQ_NOOP_WORKERS = {1: 1, 10: 2, 20: 4, 40: 8}
STREAQ_SLEEP_WORKERS = (10, 20, 40)
STREAQ_SLEEP_ROUNDS = 5  # N = rounds x workers x 32: the ideal time is rounds x 1 s
STREAQ_CONCURRENCY = 32

BENCHES: dict[str, dict[str, Any]] = {
    "saq_simple": {
        "title": "SAQ benchmarks/simple.py",
        "source": {"repo": SAQ, "commit": "b40e3af", "files": ["benchmarks/simple.py", "benchmarks/funcs.py"],
                   "licence": "MIT", "versions": "saq 0.13.3, arq 0.26.x, rq <= 1.16 (2024-08)"},
        "setup": "1,000 jobs per phase, one process: enqueue, then noop, then sleep(random()/20); SAQ concurrency 10, "
                 "arq max_jobs 10 in burst, RQ one forking Worker in burst",
        "n": 1000,
        "workers": 1,
        "figures": ("enqueue_s", "noop_s", "sleep_s", "noop_own_s", "sleep_own_s"),
        "published": {
            # SAQ's and arq's timers are reset per phase: their own times are the printed ones.
            "saq": {"enqueue_s": 0.09466, "noop_s": 0.40511, "sleep_s": 2.92441, "noop_own_s": 0.40511,
                    "sleep_own_s": 2.92441},
            "arq": {"enqueue_s": 0.15670, "noop_s": 5.02181, "sleep_s": 29.5913, "noop_own_s": 5.02181,
                    "sleep_own_s": 29.5913},
            # RQ's timer is never reset: noop includes the enqueue, sleep counts from the start.
            "rq": {"enqueue_s": 0.21894, "noop_s": 15.0959, "sleep_s": 80.0692,
                   "noop_own_s": 15.0959 - 0.21894, "sleep_own_s": 80.0692 - 15.0959 - 0.21894},
        },
    },
    "rq_doc": {
        "title": "RQ docs/benchmark.md",
        "source": {"repo": RQ, "commit": "eda19b1", "files": ["docs/benchmark.md", "tests/fixtures.py"],
                   "licence": "BSD-2-Clause", "versions": "rq 2.4.x, Python 3.13.2, Redis 7.2.7, M4 MacBook Air"},
        "setup": "1,000 say_hello jobs enqueued, then one worker in burst mode, timed from its construction",
        "n": 1000,
        "workers": 1,
        "figures": ("process_s",),
        "published": {"rq-worker": {"process_s": 6.64}, "rq-simple": {"process_s": 1.02}},
    },
    "streaq_noop": {
        "title": "streaq benchmarks/, no-op",
        "source": {"repo": STREAQ, "commit": "c16c846 (saq, arq, taskiq files), 56567dc (streaq's)",
                   "files": ["benchmarks/bench_saq.py", "benchmarks/bench_arq.py", "benchmarks/bench_taskiq.py",
                             "benchmarks/bench_streaq.py"],
                   "licence": "MIT",
                   "versions": "streaq 6.0.0, saq 0.25.2, taskiq 0.11.18 / taskiq-redis 1.1.0, arq 0.26.3 (a fork "
                               "with --workers), uvloop, M4 Mac mini"},
        "setup": "20,000 no-op tasks, concurrency 32 per worker process, 1/10/20/40 processes; here 1/2/4/8 "
                 "processes (2/10 per core) and N scaled by 1/5, enqueue first, then the workers",
        "n": 20000,
        "figures": ("enqueue_s", "spawn_done_s", "first_last_s"),
        # published seconds per process count: {"w1": .., "w10": ..}; enqueue apart
        "published": {
            "streaq": {"enqueue_s": 0.45, "w1": 8.61, "w10": 3.90, "w20": 4.18, "w40": 4.84},
            "saq": {"enqueue_s": 1.67, "w1": 9.86, "w10": 3.46, "w20": 3.45, "w40": 3.93},
            "taskiq": {"enqueue_s": 1.68, "w1": 6.36, "w10": 3.26, "w20": 3.38, "w40": 6.43},
            "arq": {"enqueue_s": 2.31, "w1": 62.66, "w10": 28.10, "w20": 43.33, "w40": None},
        },
    },
    "streaq_sleep": {
        "title": "streaq benchmarks/, sleep(1)",
        "source": {"repo": STREAQ, "commit": "c16c846 / 56567dc", "files": ["benchmarks/"], "licence": "MIT",
                   "versions": "as the no-op table"},
        "setup": "20,000 tasks of sleep(1), concurrency 32 per process, 10/20/40 processes; here the same process "
                 "counts, N = 5 rounds x processes x 32 (ideal 5 s) at 10 and 20, the author's 20,000 at 40; "
                 "efficiency = ideal / measured",
        "n": 20000,
        "figures": ("enqueue_s", "spawn_done_s", "first_last_s", "efficiency"),
        "published": {
            "streaq": {"enqueue_s": 0.44, "w10": 64.56, "w20": 32.80, "w40": 17.88},
            "saq": {"enqueue_s": 1.69, "w10": 64.51, "w20": 33.56, "w40": 17.74},
            "taskiq": {"enqueue_s": 1.68, "w10": 67.53, "w20": 34.42, "w40": 18.55},
            "arq": {"enqueue_s": 2.27, "w10": 176.87, "w20": 169.47, "w40": None},
        },
    },
    "steventen": {
        "title": "steventen/python_queue_benchmark",
        "source": {"repo": STEVENTEN, "commit": "6f50a12", "files": ["*/tasks.py", "*/enqueue_jobs.py", "README.md"],
                   "licence": "MIT (pyproject.toml)",
                   "versions": "rq 1.16.2, arq 0.26.0, celery 5.4.0, huey 2.5.1, dramatiq 1.17.0, taskiq 0.11.19; "
                               "M2 Pro, redis:7-alpine"},
        "setup": "20,000 jobs that print the time, 10 workers, enqueue alone (a print per job), then the workers; "
                 "the author's measure: worker start -> the last job's printed time; here N = 4,000",
        "n": 20000,
        "workers": 10,
        "figures": ("enqueue_s", "start_last_s", "first_last_s"),
        "published": {
            "rq": {"enqueue_s": 4.03, "start_last_s": 51.05},
            "arq": {"enqueue_s": 9.34, "start_last_s": 35.37},
            "celery-threads": {"enqueue_s": 6.34, "start_last_s": 11.68},
            "celery-processes": {"enqueue_s": 6.34, "start_last_s": 17.60},
            "huey-threads": {"enqueue_s": 2.40, "start_last_s": 4.15},
            "huey-processes": {"enqueue_s": 2.40, "start_last_s": 3.62},
            "dramatiq-1x10": {"enqueue_s": 3.27, "start_last_s": 4.12},
            "dramatiq-10x1": {"enqueue_s": 3.27, "start_last_s": 4.35},
            "dramatiq-defaults": {"enqueue_s": 3.27, "start_last_s": 1.53},
            "taskiq": {"enqueue_s": 5.97, "start_last_s": 2.03},
        },
    },
    "blog_io": {
        "title": "blog comparison, io task (sleep 0.1 s)",
        "source": {"repo": BLOG, "commit": "2026-05-28", "files": ["the post (its code repository is not public)"],
                   "licence": "-", "versions": "Python 3.13, Redis 7; library versions not stated"},
        "setup": "1,000 tasks, one worker process, 10 at a time; tasks/s over first start -> last end",
        "n": 1000,
        "workers": 1,
        "figures": ("rate",),
        "published": {
            "taskiq": {"rate": 95.90}, "dramatiq": {"rate": 90.79}, "streaq": {"rate": 85.70},
            "arq": {"rate": 84.56}, "celery": {"rate": 68.10},
        },
    },
    "blog_cpu": {
        "title": "blog comparison, cpu task (SHA-256, 1 KB x 1000)",
        "source": {"repo": BLOG, "commit": "2026-05-28", "files": ["the post"], "licence": "-",
                   "versions": "as the io task"},
        "setup": "1,000 tasks, one worker process, 10 at a time; tasks/s over first start -> last end",
        "n": 1000,
        "workers": 1,
        "figures": ("rate",),
        "published": {
            "taskiq": {"rate": 235.16}, "dramatiq": {"rate": 56.35}, "streaq": {"rate": 251.14},
            "arq": {"rate": 189.63}, "celery": {"rate": 54.63},
        },
    },
    "dramatiq_fib": {
        "title": "Dramatiq benchmarks/bench.py, fib (ported to Redis)",
        "source": {"repo": DRAMATIQ, "commit": "763b772", "files": ["benchmarks/bench.py"],
                   "licence": "LGPL-3.0 (ported, not copied)", "versions": "dramatiq 1.0 era, Celery 4 (2018)"},
        "setup": "N fib(randint(1,200)) jobs sent, then `dramatiq -p 8` / `celery worker -c 8` (acks_late) / "
                 "`rq worker-pool -n 8`; timed from the worker's Popen until the counter reaches N (0.1 s polls)",
        "n": 10000,
        "workers": 8,
        "figures": ("process_s", "rate"),
        "published": {},
    },
    "lab_path": {
        "title": "The same jobs through the lab's own path",
        "source": {"repo": "this lab", "commit": "-", "files": ["services/api", "workers/", "lab/ledger"],
                   "licence": "-", "versions": "the lab's"},
        "setup": "N io/simple tasks through the lab's API (20 connections) while no worker runs, then the lab's "
                 "worker of the queue drains them; the ledger counts; the author's job shape as the lab's task "
                 "bodies express it (IO_LATENCY_MS: 0 for a no-op, 25 for sleep(random()/20), 100 for the blog's io)",
        "n": 1000,
        "figures": ("enqueue_s", "api_rps", "spawn_done_s", "first_last_s"),
        "published": {},
    },
}  # fmt: skip


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str
    bench: str
    num: str  # the row whose figure is divided
    den: str  # by this row's
    figure: str  # the figure (a time: num/den = how many times slower num is; a rate: how many times faster)
    published: float | None  # the published ratio, None for a claim in words
    rule: str  # magnitude | parity | slightly | much | event | absolute (the figure itself, against the published)
    setup: str = "unlimited"
    column: str = ""  # streaq: the published process-count column (w1, w10, ...)
    note: str = ""  # what the ratio rests on, and what moves it between machines


def _ratio(bench: str, num: str, den: str, key: str) -> float | None:
    rows = BENCHES[bench]["published"]
    a, b = rows.get(num, {}).get(key), rows.get(den, {}).get(key)
    return round(a / b, 3) if a and b else None


CLAIMS: tuple[Claim, ...] = (
    Claim("C1-noop", "SAQ up to 8x faster than arq (README); its table: arq/SAQ noop", SAQ, "saq_simple", "arq",
          "saq", "noop_s", _ratio("saq_simple", "arq", "saq", "noop_s"), "magnitude",
          note="arq at its defaults is poll-bound (a poll every 0.5 s, at most 100 jobs read): its time is a floor that no machine moves, SAQ's is CPU-bound, so the ratio follows the machine's speed"),
    Claim("C1-sleep", "its table: arq/SAQ sleep", SAQ, "saq_simple", "arq", "saq", "sleep_s",
          _ratio("saq_simple", "arq", "saq", "sleep_s"), "magnitude",
          note="arq 0.26's job counter (python-arq/arq#408) starts at most about max_jobs jobs a poll: 1,000 sleepers take about 1000/max_jobs polls of 0.5 s; SAQ's README read 5.01 s for arq in 2022 (arq 0.22)"),
    Claim("C2-noop", "its table: RQ/SAQ noop (RQ's own time, its enqueue taken out)", SAQ, "saq_simple", "rq",
          "saq", "noop_own_s", _ratio("saq_simple", "rq", "saq", "noop_own_s"), "magnitude",
          note="RQ forks a work horse per job (fork-bound, its cost is the OS's: macOS then, Linux here) against SAQ's CPU-bound loop"),
    Claim("C2-sleep", "its table: RQ/SAQ sleep (RQ's own time)", SAQ, "saq_simple", "rq", "saq", "sleep_own_s",
          _ratio("saq_simple", "rq", "saq", "sleep_own_s"), "magnitude",
          note="the printed RQ figure counts from the start (its timer is never reset); RQ's own time is read from the prints"),
    Claim("C9", "arq about 7x faster than RQ for short jobs (arq's docs); read on SAQ's noop, RQ's own time over "
          "arq's (SAQ's published data give 2.96x)", "python-arq/arq", "saq_simple", "rq", "arq", "noop_own_s",
          7.0, "magnitude",
          note="written in 2016 with no script; SAQ's own published figures give 2.96x and steventen's 1.44x"),
    Claim("C6", "SimpleWorker roughly a 6x speedup over the forking Worker (RQ docs)", RQ, "rq_doc", "rq-worker",
          "rq-simple", "process_s", _ratio("rq_doc", "rq-worker", "rq-simple", "process_s"), "magnitude",
          note="fork and the horse's set-up per job against none: an OS and machine cost"),
    Claim("C3-w1", "streaq up to 5x faster than arq (README); its table: arq/streaq noop, 1 worker", STREAQ,
          "streaq_noop", "arq", "streaq", "spawn_done_s", _ratio("streaq_noop", "arq", "streaq", "w1"), "magnitude",
          column="w1",
          note="arq at 1 worker sits at its poll floor (ceil(N/160) x 0.5 s): the ratio is that floor over streaq's CPU-bound time"),
    Claim("C3-w10", "its table: arq/streaq noop, 10 workers (2 here)", STREAQ, "streaq_noop", "arq", "streaq",
          "spawn_done_s", _ratio("streaq_noop", "arq", "streaq", "w10"), "magnitude", column="w10",
          note="with several processes arq's workers contend for the same 160 head ids of its queue"),
    Claim("C3-sleep10", "its table: arq/streaq sleep(1), 10 workers", STREAQ, "streaq_sleep", "arq", "streaq",
          "first_last_s", _ratio("streaq_sleep", "arq", "streaq", "w10"), "magnitude", column="w10",
          note="arq's processes contend for the same head of its queue; the job counter caps the jobs a poll starts"),
    Claim("C3-sleep20", "its table: arq/streaq sleep(1), 20 workers", STREAQ, "streaq_sleep", "arq", "streaq",
          "first_last_s", _ratio("streaq_sleep", "arq", "streaq", "w20"), "magnitude", column="w20",
          note="as at 10 workers, with more processes contending"),
    Claim("C4-saq", "streaq on par with SAQ (benchmarks README): SAQ/streaq noop, 1 worker", STREAQ, "streaq_noop",
          "saq", "streaq", "spawn_done_s", _ratio("streaq_noop", "saq", "streaq", "w1"), "parity", column="w1",
          note="CPU-bound against CPU-bound; SAQ's burst exit waits its dequeue_timeout (1 s) on an empty queue, in its printed figure too"),
    Claim("C4-taskiq", "streaq on par with taskiq: taskiq/streaq noop, 1 worker", STREAQ, "streaq_noop", "taskiq",
          "streaq", "spawn_done_s", _ratio("streaq_noop", "taskiq", "streaq", "w1"), "parity", column="w1",
          note="CPU-bound against CPU-bound; taskiq has no burst mode: its end is its group's read and pending entries"),
    Claim("C5", "arq fails at 40 workers (streaq's table: ☠️)", STREAQ, "streaq_sleep", "arq", "arq", "first_last_s",
          None, "event", column="w40",
          note="no reason was published; a guess: a connection per concurrent pipeline (about 40 x 32) against a macOS Redis whose maxclients follows a 256-file ulimit"),
    Claim("C7", "Dramatiq slightly faster than Celery (Dramatiq #25): rate ratio", DRAMATIQ, "dramatiq_fib",
          "dramatiq", "celery", "rate", None, "slightly",
          note="no figure was published (2018); Dramatiq's 8 processes x 8 threads against Celery's 8 prefork children on the same CPU-light job"),
    Claim("C8", "Dramatiq much faster than RQ (Dramatiq #25): rate ratio", DRAMATIQ, "dramatiq_fib", "dramatiq",
          "rq", "rate", None, "much",
          note="RQ's worker pool forks a horse per job"),
    Claim("B-io-taskiq", "blog: taskiq's io rate, 95.9 tasks/s published (here over published)", BLOG, "blog_io", "taskiq",
          "taskiq", "rate", 1.0, "absolute", note="ten tasks of 0.1 s at a time: at most 100 tasks/s on any machine; "
          "what a queue loses below that is its own overhead between tasks"),
    Claim("B-io-dramatiq", "blog: dramatiq's io rate, 90.79 tasks/s published (here over published)", BLOG, "blog_io", "dramatiq",
          "dramatiq", "rate", 1.0, "absolute", note="ten tasks of 0.1 s at a time: at most 100 tasks/s on any machine; "
          "what a queue loses below that is its own overhead between tasks"),
    Claim("B-io-streaq", "blog: streaq's io rate, 85.7 tasks/s published (here over published)", BLOG, "blog_io", "streaq",
          "streaq", "rate", 1.0, "absolute", note="ten tasks of 0.1 s at a time: at most 100 tasks/s on any machine; "
          "what a queue loses below that is its own overhead between tasks"),
    Claim("B-io-arq", "blog: arq's io rate, 84.56 tasks/s published (here over published)", BLOG, "blog_io", "arq",
          "arq", "rate", 1.0, "absolute", note="ten tasks of 0.1 s at a time: at most 100 tasks/s on any machine; "
          "what a queue loses below that is its own overhead between tasks"),
    Claim("B-io-celery", "blog: celery's io rate, 68.1 tasks/s published (here over published)", BLOG, "blog_io", "celery",
          "celery", "rate", 1.0, "absolute", note="ten tasks of 0.1 s at a time: at most 100 tasks/s on any machine; "
          "what a queue loses below that is its own overhead between tasks"),
    Claim("B-cpu-streaq", "blog: streaq/Celery on the cpu task (rate)", BLOG, "blog_cpu", "streaq", "celery",
          "rate", _ratio("blog_cpu", "streaq", "celery", "rate"), "magnitude",
          note="the SHA-256 job is cheaper on this CPU (SHA-NI): queue overhead is a larger share, so the ratios between queues shrink"),
    Claim("B-cpu-taskiq", "blog: taskiq/Celery on the cpu task (rate)", BLOG, "blog_cpu", "taskiq", "celery",
          "rate", _ratio("blog_cpu", "taskiq", "celery", "rate"), "magnitude",
          note="as streaq's"),
    Claim("B-cpu-arq", "blog: arq/Celery on the cpu task (rate)", BLOG, "blog_cpu", "arq", "celery", "rate",
          _ratio("blog_cpu", "arq", "celery", "rate"), "magnitude",
          note="as streaq's; arq polls every 0.01 s here, as in the post"),
    Claim("S-taskiq", "steventen: taskiq against RQ (start -> last job)", STEVENTEN, "steventen", "rq", "taskiq",
          "start_last_s", _ratio("steventen", "rq", "taskiq", "start_last_s"), "magnitude",
          note="his measure carries the boot of 10 processes, which weighs more on 2 cores than on his 10-12"),
    Claim("S-arq", "steventen: arq against RQ (the only third-party check of arq's 7x)", STEVENTEN, "steventen",
          "rq", "arq", "start_last_s", _ratio("steventen", "rq", "arq", "start_last_s"), "magnitude",
          note="arq not at its defaults in his files (poll_delay 0.01, max_jobs 1000) against RQ's fork per job"),
    Claim("S-huey", "steventen: Huey (threads) against RQ", STEVENTEN, "steventen", "rq", "huey-threads",
          "start_last_s", _ratio("steventen", "rq", "huey-threads", "start_last_s"), "magnitude",
          note="Huey's 10 threads poll every 1 ms (-d 0.001)"),
    Claim("S-dramatiq", "steventen: Dramatiq (1 x 10) against RQ", STEVENTEN, "steventen", "rq", "dramatiq-1x10",
          "start_last_s", _ratio("steventen", "rq", "dramatiq-1x10", "start_last_s"), "magnitude",
          note="one Dramatiq process, 10 threads"),
    Claim("S-celery", "steventen: Celery (threads) against RQ", STEVENTEN, "steventen", "rq", "celery-threads",
          "start_last_s", _ratio("steventen", "rq", "celery-threads", "start_last_s"), "magnitude",
          note="Celery keeps each result in Redis and logs every task at info"),
)  # fmt: skip
