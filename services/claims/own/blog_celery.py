"""The blog's Celery worker: the post's worker_prefetch_multiplier=10, no result
backend; the pool is not stated in the post: threads, 10 (its "threading pool
overhead").

    python blog_enqueue.py celery io|cpu N                       # enqueue
    celery -A blog_celery worker -P threads -c 10        # work
"""

import blog_jobs
from celery import Celery

app = Celery("blog", broker="redis://localhost:6379/0")
app.conf.worker_prefetch_multiplier = 10


@app.task(name="io")
def io(i):
    blog_jobs.io_sync(i)


@app.task(name="cpu")
def cpu(i):
    blog_jobs.cpu_sync(i)


def enqueue(kind: str, n: int) -> None:
    task = io if kind == "io" else cpu
    blog_jobs.timed_enqueue(lambda i: task.delay(i), n)
