"""The lab's one metrics vocabulary, shared by the API and every worker (the
API's HTTP metrics are its own: services/api/http_metrics.py).

docs/metrics.md documents each of these. Task metrics carry the
labels `queue`, `kind`, `variant`.

Celery's prefork pool runs tasks in child processes, so its worker sets
PROMETHEUS_MULTIPROC_DIR before anything imports prometheus_client: every
process then writes its samples to files there and the parent's /metrics
adds them up (gauges say how: `livesum`, `livemax`). RQ's pool reads its
workers' and work horses' counts from a pipe instead (listen_to_children).
"""

import glob
import json
import os
import select
import threading
import time
from bisect import bisect_left
from contextlib import contextmanager

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
# Every counter and histogram would also export a `_created` series (when it
# was created): nothing in the lab reads them, and they are a quarter of the
# API's samples, each formatted on every scrape (docs/metrics.md, "What a
# scrape costs").
disable_created_metrics()

# In multi-process mode the live objects only write files; the registry that is
# served reads them all back through MultiProcessCollector instead.
_registry = None if MULTIPROCESS else REGISTRY


def metrics_registry():
    """Where a lab metric registers (registry=): REGISTRY, or none in multi-process mode."""
    return _registry


# -- Updates on the hot paths -------------------------------------------------------
# prometheus_client's inc() and observe() check the metric and take a lock on
# every call, and a lab API request makes ten such updates, a task eight. Fast
# path: the hot paths add up in plain Python instead (Count, Observe;
# docs/hot-path.md). flush() hands what was added
# since the last flush to the children: before every collection of REGISTRY,
# so that a scrape sees every update made before it, and, where updates leave
# the process, every FLUSH_S from a thread of its own, so that a process
# nobody scrapes (Celery's prefork children, API_WORKERS > 1) still writes its
# multi-process files and a child of a listening process still sends its
# counts. A process that holds its series in memory and serves them itself
# runs no such thread: only a collection reads them, and it flushes first. Each
# series is updated by one thread only: the event loop's, a Celery child's, or
# a Huey worker thread's (TaskRunner.for_thread gives each its own series).
# Both reach into prometheus_client's children (`_value`, `_sum`, `_buckets`,
# `_upper_bounds`), so tests/unit/test_metrics.py checks that they expose exactly
# what its public calls do.
FLUSH_S = 1.0
_pending: list = []  # every Count and Observe of this process
_flush_lock = threading.Lock()
_flusher_pid: int | None = None


def flush() -> None:
    """Hand every update made so far to prometheus_client's children (or, in a
    descendant of a listening process, to that process: listen_to_children)."""
    with _flush_lock:
        if _parent_fd is None:
            for series in _pending:
                series.flush()
        else:
            _send_deltas()


def _flush_every() -> None:
    while True:
        time.sleep(FLUSH_S)
        flush()


def _start_flusher() -> None:
    global _flusher_pid
    _flusher_pid = os.getpid()
    threading.Thread(target=_flush_every, name="metrics-flush", daemon=True).start()


def _updates_leave_process() -> bool:
    """Whether a flush writes files or sends to a parent (not only a collection reads them)."""
    return MULTIPROCESS or _parent_fd is not None


def _track(series) -> None:
    with _flush_lock:
        _pending.append(series)
        if _flusher_pid != os.getpid() and _updates_leave_process():
            _start_flusher()


# -- Processes that send their counts to a parent -------------------------------
# RQ's pool forks its workers, and each worker forks a work horse per task. In
# prometheus_client's multi-process mode every one of them would write files
# that each scrape reads back and adds up (MultiProcessCollector: twice the
# CPU of a scrape of the same series held in memory, docs/hot-path.md), and a
# horse would open its files and start a flusher for every task. Instead the
# pool makes every series before it forks and reads, from one pipe, what its
# descendants counted: a worker sends it every FLUSH_S (its flush), a horse
# once, as it ends (flush). A series is named by its place in `_pending`,
# which a child inherits; one a child made itself has no twin in the parent
# and is not sent.
_children_fd: int | None = None  # in the listening parent: the pipe's write end
_parent_fd: int | None = None  # in a descendant: where flush() sends
_inherited = 0  # in a descendant: how many of _pending the parent has too
_children_flush = True  # whether a child forked from here runs a flusher thread


def listen_to_children() -> None:
    """Processes forked from now on (and theirs) send what they count to this
    one, which adds it to its own series: make every series first."""
    global _children_fd
    read_fd, _children_fd = os.pipe()
    threading.Thread(target=_add_children_deltas, args=(read_fd,), name="metrics-children", daemon=True).start()


def children_flush_at_exit() -> None:
    """Children forked from here on run no flusher thread: each flushes once,
    before it ends (an RQ work horse, which lives for one task)."""
    global _children_flush
    _children_flush = False


def _send_deltas() -> None:
    """What each series counted since the last send, one JSON line per series,
    in writes of at most PIPE_BUF bytes: a pipe never interleaves those."""
    batch = b""
    for i in range(_inherited):
        series = _pending[i]
        delta = series.delta()
        if delta:
            series.mark_flushed()
            line = json.dumps((i, delta)).encode() + b"\n"
            if len(batch) + len(line) > select.PIPE_BUF:
                os.write(_parent_fd, batch)  # type: ignore[arg-type]  # set: flush() checked
                batch = b""
            batch += line
    if batch:
        os.write(_parent_fd, batch)  # type: ignore[arg-type]  # as above


def _add_children_deltas(fd: int) -> None:
    """In the listening parent, a thread of its own: every child's deltas added
    here (the only thread that updates these series: the parent runs no task)."""
    rest = b""
    while chunk := os.read(fd, 65536):
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            i, delta = json.loads(line)
            _pending[i].add(delta)


def _after_fork_in_child() -> None:
    """A forked child (Celery's prefork pool) flushes its own updates: what
    the parent had not flushed yet is the parent's, and the parent's flusher
    thread did not come along. The fork waited for any flush in progress
    (register_at_fork below), so no prometheus_client lock was held by it.
    A child of a listening process sends to it instead (listen_to_children)."""
    global _flush_lock, _flusher_pid, _parent_fd, _inherited
    _flush_lock, _flusher_pid = threading.Lock(), None
    for series in _pending:
        series.mark_flushed()
    if _children_fd is not None:
        _parent_fd, _inherited = _children_fd, len(_pending)
    if _pending and _children_flush and _updates_leave_process():
        _start_flusher()


# A fork waits for a flush in progress: a child that inherited a lock taken by
# the parent's flusher (this one, or a value's) would block on its first flush.
os.register_at_fork(
    before=lambda: _flush_lock.acquire(),
    after_in_parent=lambda: _flush_lock.release(),
    after_in_child=_after_fork_in_child,
)


class _FlushFirst:
    """Registered on REGISTRY before any metric: every collection flushes first."""

    def describe(self) -> list:
        return []

    def collect(self) -> list:
        flush()
        return []


class SizedFilesCollector(MultiProcessCollector):
    """prometheus_client's MultiProcessCollector, minus the files a process has
    created but not yet sized. A process creates its file empty and sizes it a
    moment later; read in that moment, the one empty file fails the whole
    collection (prometheus/client_python#1199), and a scrape of Celery's
    prefork or Huey's process workers can meet one whenever a child makes its
    first series. An empty file holds no samples yet: skipping it loses none."""

    def collect(self):
        files = [path for path in glob.glob(os.path.join(self._path, "*.db")) if _holds_data(path)]
        return self.merge(files, accumulate=True)


def _holds_data(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except FileNotFoundError:  # a dead process's live gauges, removed meanwhile (mark_process_dead)
        return False


REGISTRY.register(_FlushFirst())
if MULTIPROCESS:
    SizedFilesCollector(REGISTRY)

TASK = ("queue", "kind", "variant")
# From a millisecond to 20 minutes: tasks wait behind a backlog for a long time.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1200,
)

# API side
ENQUEUED = Counter(
    "lab_enqueued", "Tasks accepted by their queue (after the broker said yes).", TASK, registry=_registry
)
ENQUEUE_ERRORS = Counter(
    "lab_enqueue_errors",
    "Enqueue attempts that failed, by reason (timeout, connection, broker).",
    ("queue", "reason"),
    registry=_registry,
)
ENQUEUE_SECONDS = Histogram(
    "lab_enqueue_seconds",
    "Time to hand one task to its queue.",
    ("queue",),
    buckets=LATENCY_BUCKETS,
    registry=_registry,
)

# Worker side (and the API, for the `background` queue)
TASK_STARTED = Counter("lab_task_started", "Task executions started.", TASK, registry=_registry)
TASK_COMPLETED = Counter(
    "lab_task_completed", "Tasks completed for the first time (per task_id).", TASK, registry=_registry
)
TASK_FAILED = Counter("lab_task_failed", "Tasks whose work raised.", TASK, registry=_registry)
TASK_DUPLICATES = Counter(
    "lab_task_duplicates", "Executions of a task that had already been settled.", TASK, registry=_registry
)
TASK_DURATION = Histogram(
    "lab_task_duration_seconds",
    "Execution time of a task's work.",
    TASK,
    buckets=LATENCY_BUCKETS,
    registry=_registry,
)
TASK_WAIT = Histogram(
    "lab_task_wait_seconds",
    "From enqueued_at to the start of execution.",
    TASK,
    buckets=LATENCY_BUCKETS,
    registry=_registry,
)
TASK_LATENCY = Histogram(
    "lab_task_latency_seconds",
    "From enqueued_at to completion (end to end).",
    TASK,
    buckets=LATENCY_BUCKETS,
    registry=_registry,
)
TASKS_IN_PROGRESS = Gauge(
    "lab_tasks_in_progress",
    "Tasks executing right now.",
    TASK,
    multiprocess_mode="livesum",
    registry=_registry,
)

# Every process
EVENT_LOOP_LAG = Gauge(
    "lab_event_loop_lag_seconds",
    "Worst delay of the event loop over the last few seconds (how late a timer fired).",
    ("service",),
    multiprocess_mode="livemax",
    registry=_registry,
)

# Backlog: the queue monitor for broker queues, the API for `background`.
QUEUE_DEPTH = Gauge(
    "lab_queue_depth",
    "Tasks waiting in the queue, not yet started.",
    ("queue",),
    multiprocess_mode="livesum",
    registry=_registry,
)


class Count:
    """One labelled Counter or Gauge child, counted in plain Python: the hot
    path adds to `value` (`count.value += 1`, a gauge's `-= 1`), which costs no call;
    flush() hands the child what was added since."""

    __slots__ = ("value", "_flushed", "_inc")

    def __init__(self, child):
        self.value = self._flushed = 0
        self._inc = child._value.inc
        _track(self)

    def flush(self) -> None:
        n = self.value
        if n != self._flushed:
            self._inc(n - self._flushed)
            self._flushed = n

    def mark_flushed(self) -> None:
        self._flushed = self.value

    def delta(self) -> int:
        return self.value - self._flushed

    def add(self, delta: int) -> None:
        self.value += delta


class Observe:
    """`observe` of one labelled Histogram child (or of an unlabelled
    histogram): the bucket found by bisection and counted in plain Python,
    the sum added up; flush() hands the child what was observed since.

    Given a labelled histogram and its `labels`, the child is made at the
    first flush with something to hand it: series made ahead of their first
    task (RQ's pool makes every task shape's before it forks) are then not
    in the exposition, twenty-two lines each, until a task of theirs has run,
    as in a process that makes each on its first task."""

    __slots__ = (
        "_bounds",
        "_counts",
        "_sum",
        "_flushed",
        "_flushed_sum",
        "_bucket_inc",
        "_sum_inc",
        "_histogram",
        "_labels",
    )

    def __init__(self, histogram, labels: dict | None = None):
        self._bounds = histogram._upper_bounds
        self._counts = [0] * len(self._bounds)
        self._flushed = [0] * len(self._bounds)
        self._sum = self._flushed_sum = 0.0
        self._histogram, self._labels = histogram, labels or {}
        self._bucket_inc: list | None = None
        if labels is None:
            self._bind(histogram)
        _track(self)

    def _bind(self, child) -> list:
        self._bucket_inc = [bucket.inc for bucket in child._buckets]
        self._sum_inc = child._sum.inc
        return self._bucket_inc

    def __call__(self, amount: float) -> None:
        self._counts[bisect_left(self._bounds, amount)] += 1
        self._sum += amount

    def flush(self) -> None:
        flushed, bucket_inc = self._flushed, self._bucket_inc
        if bucket_inc is None:
            if self._counts == flushed:
                return
            bucket_inc = self._bind(self._histogram.labels(**self._labels))
        for i, n in enumerate(self._counts):
            if n != flushed[i]:
                bucket_inc[i](n - flushed[i])
                flushed[i] = n
        total = self._sum
        if total != self._flushed_sum:
            self._sum_inc(total - self._flushed_sum)
            self._flushed_sum = total

    def mark_flushed(self) -> None:
        self._flushed, self._flushed_sum = list(self._counts), self._sum

    def delta(self) -> tuple[list[int], float] | None:
        if self._counts == self._flushed:
            return None
        return [n - f for n, f in zip(self._counts, self._flushed)], self._sum - self._flushed_sum

    def add(self, delta: tuple[list[int], float]) -> None:
        counts, total = delta
        for i, n in enumerate(counts):
            self._counts[i] += n
        self._sum += total


def touch_task_series(queues) -> None:
    """Create every task series at 0 when a process starts, so that rate() sees
    the very first tasks instead of starting its series at their count."""
    from lab.protocol import ENDPOINTS

    for queue in queues:
        for kind, variant in ENDPOINTS:
            labels = {"queue": queue, "kind": kind, "variant": variant}
            for metric in (TASK_STARTED, TASK_COMPLETED, TASK_FAILED, TASK_DUPLICATES, TASKS_IN_PROGRESS):
                metric.labels(**labels)


# A library's own metrics. Dramatiq's and taskiq's Prometheus middlewares are
# written for prometheus_client's multi-process mode: they set
# PROMETHEUS_MULTIPROC_DIR and serve the files from a server of their own (a
# process Dramatiq's CLI forks, a thread taskiq starts on port 9000). Mode is
# chosen when prometheus_client is first imported, which the lab has done
# before: their metrics are then ordinary in-memory ones, and the worker's own
# /metrics serves them beside the lab's. Multi-process mode would put every
# lab metric of these workers in files too, a cost the bare workers do not pay.
class LibraryMetrics:
    """Serves, on the lab's registry, the metrics a library's middleware holds
    (it created them on a registry of its own): every one, whatever its version adds."""

    def __init__(self, middleware):
        self.metrics = [v for v in vars(middleware).values() if isinstance(v, MetricWrapperBase)]

    def collect(self):
        for metric in self.metrics:
            yield from metric.collect()


@contextmanager
def library_exporter():
    """Around a library middleware's set-up: whatever it does to
    PROMETHEUS_MULTIPROC_DIR is undone, so nothing later in the process
    takes it for a multi-process one."""
    before = {name: os.environ.get(name) for name in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir")}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
