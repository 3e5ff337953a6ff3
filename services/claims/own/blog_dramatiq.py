"""The blog's Dramatiq worker: the Redis broker at its defaults; the post's 10 threads.

python blog_enqueue.py dramatiq io|cpu N               # enqueue
dramatiq blog_dramatiq -p 1 -t 10              # work
"""

import blog_jobs
import dramatiq
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker())


@dramatiq.actor
def io(i):
    blog_jobs.io_sync(i)


@dramatiq.actor
def cpu(i):
    blog_jobs.cpu_sync(i)


def enqueue(kind: str, n: int) -> None:
    actor = io if kind == "io" else cpu
    blog_jobs.timed_enqueue(lambda i: actor.send(i), n)
