"""Every job of a claims run counted, without changing what the job measures.

The authors' job bodies get one call: `hit(job_id, start)`. In a process that
ends normally (a burst worker, a script, a worker stopped by SIGTERM) the call
appends to a list in memory, written to Redis in one pipeline when the process
exits (atexit, and multiprocessing's finalizers for the children that the
saq, streaq and taskiq CLIs start, which leave by os._exit after them). Where a
job runs in a process that leaves by os._exit with no finalizer (RQ's work
horse), `hit_now` writes at once (`hit_rq` chooses). A job with no id at hand
(taskiq's body takes no context) passes None: its execution and times are
counted, not its id.

Keys, under CLAIMS_RUN (no CLAIMS_RUN: nothing is counted):
    claims:<run>:exec   executions (INCRBY)
    claims:<run>:ids    the distinct job ids (SADD)
    claims:<run>:times  "start end" of each execution (RPUSH)
"""

import atexit
import os
import time

RUN = os.environ.get("CLAIMS_RUN", "")
URL = os.environ.get("CLAIMS_REDIS_URL", "redis://localhost:6379/0")
_hits: list = []
_import_pid = os.getpid()
_flushed_pid = 0
_hooked_pid = 0


def now() -> float:
    return time.time()


def _write(hits: list) -> None:
    if not RUN or not hits:
        return
    import redis

    client = redis.Redis.from_url(URL)
    pipe = client.pipeline(transaction=False)
    pipe.incrby(f"claims:{RUN}:exec", len(hits))
    ids = [job_id for job_id, _, _ in hits if job_id is not None]
    if ids:
        pipe.sadd(f"claims:{RUN}:ids", *ids)
    pipe.rpush(f"claims:{RUN}:times", *(f"{start:.6f} {end:.6f}" for _, start, end in hits))
    pipe.execute()
    client.close()


def _hook() -> None:
    """flush() at this process's exit: atexit, and multiprocessing's finalizers, which a
    child it started runs before os._exit (registered here, after the child cleared its parent's)."""
    global _hooked_pid
    _hooked_pid = os.getpid()
    try:
        from multiprocessing import util

        util.Finalize(None, flush, exitpriority=100)
    except ImportError:
        pass


def hit(job_id=None, start=None) -> None:
    """One execution, kept in memory until the process exits."""
    end = time.time()
    if _hooked_pid != os.getpid():
        _hook()
    _hits.append((job_id, end if start is None else start, end))


def hit_now(job_id=None, start=None) -> None:
    """One execution, written at once (a process that leaves by os._exit)."""
    end = time.time()
    _write([(job_id, end if start is None else start, end)])


def hit_rq(start=None) -> None:
    """One execution of the RQ job running now: written at once in a work horse (forked, it
    leaves by os._exit), kept until exit where the job runs in the worker itself (SimpleWorker)."""
    from rq import get_current_job

    job_id = get_current_job().id
    if os.getpid() == _import_pid:
        hit(job_id, start)
    else:
        hit_now(job_id, start)


def flush() -> None:
    """What this process counted, written once (a forked child starts with its parent's list emptied)."""
    global _flushed_pid
    if _flushed_pid == os.getpid():
        return
    _flushed_pid = os.getpid()
    hits = list(_hits)
    _hits.clear()
    _write(hits)


def _forked() -> None:
    _hits.clear()


atexit.register(flush)
os.register_at_fork(after_in_child=_forked)
