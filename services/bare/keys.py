"""Where the bare baseline keeps its tasks in Redis: apart from the lab's own
queues, so a bench never feeds the lab's workers, and `make bench` can clear
them (`bench:*`, `saq:bench:*`) without touching anything else."""

ARQ_QUEUE = "bench:arq"  # arq ZSET (its jobs at arq:job:<id>, as arq names them)
SAQ_QUEUE = "bench"  # SAQ keys saq:bench:*
STREAM = "bench:faststream"  # FastStream stream, consumer group GROUP
GROUP = "bench"
CELERY_QUEUE = "bench-celery"  # kombu LIST
TASK = "bench_task"
# The broker queues that have a bare worker (services/bare/worker.py) and a
# bench-<queue> compose service; `make bench` measures these and background.
BARE_QUEUES = ("arq", "saq", "faststream", "celery")


def done_key(queue: str) -> str:
    """The counter every bare task INCRBYs: the tasks executed so far."""
    return f"bench:done:{queue}"


# What `make bench` deletes before a run (never anything outside these).
KEYS = (ARQ_QUEUE, STREAM, CELERY_QUEUE, "saq:bench:queued", "saq:bench:incomplete", "saq:bench:active",
        "saq:bench:schedule", "saq:bench:stats", "saq:bench:sweep")
