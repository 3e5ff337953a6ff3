"""Dramatiq with its Redis broker: `broker.enqueue` pushes a message id onto the
Redis list `dramatiq:lab` (the message itself in the hash `dramatiq:lab.msgs`);
the worker's consumer thread fetches ids in batches into memory, its worker
threads run them.

The task body is async: Dramatiq's AsyncIO middleware runs one event loop per
worker process, in a thread, and each worker thread hands its task to that loop
and waits for it. Concurrency is the number of worker threads,
DRAMATIQ_THREADS (default CONCURRENCY; Dramatiq's own default is 8 threads in
each of as many processes as cores). The consumer keeps twice as many messages
fetched ahead (Dramatiq's default prefetch).

Delivery: a fetched message id moves to this worker's "acks" set and is
acknowledged (removed) after the task ran, success or failure. On SIGTERM the
worker stops fetching, waits up to SHUTDOWN_GRACE_S for running tasks, and
pushes the messages it had fetched but not started back onto the queue. A
killed worker's fetched and running messages stay in its acks set until a
live broker's housekeeping (a Lua step that runs on 10 % of its Redis calls
here, 0.1 % by default) finds the worker's heartbeat older than TASK_TIMEOUT_S
(Dramatiq's default 60 s) and requeues them. Ids left in a live worker's acks
set that it does not hold (a fetch Redis carried out but whose reply was lost
as Redis restarted) are requeued by the worker itself when its consumer
starts again (LabConsumer, below). No retries (`max_retries=0`, as
Celery's): a task that raised goes to the dead-letter set `dramatiq:lab.XQ`.

Dramatiq's own Prometheus metrics are kept too (LabPrometheus, below); the
worker's /metrics serves its `dramatiq_*` metrics beside the lab's
(lab/metrics.py says how).

The API's publish is redis-py's blocking call, made as Celery's is: on the
loop or in threads of its own (BLOCKING_PUBLISH), behind a breaker
(lab/blocking_publish.py).
"""

import logging
import signal
import threading
from functools import partial
from typing import Any

import redis
from dramatiq import Broker, Message, Middleware, Worker
from dramatiq import actor as dramatiq_actor
from dramatiq.asyncio import EventLoopThread, get_event_loop_thread
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.common import current_millis
from dramatiq.errors import ConnectionClosed
from dramatiq.middleware import AsyncIO
from dramatiq.middleware.prometheus import Prometheus

from lab.blocking_publish import BlockingPublisher, Probe
from lab.key_purge import delete_keys
from lab.metrics import REGISTRY, Count, LibraryMetrics, Observe, library_exporter
from lab.protocol import Queue, TaskMessage
from lab.queues import DRAMATIQ_MAINTENANCE_CHANCE
from lab.redis_clients import sync_client, worker_client
from lab.settings import Settings, get_settings
from lab.worker_runtime import WorkerRuntime, setup_logging

QUEUE = Queue("dramatiq")
QUEUE_NAME = "lab"  # keys dramatiq:lab (LIST of ids), dramatiq:lab.msgs (HASH), dramatiq:__acks__.*
QUEUE_KEY = f"dramatiq:{QUEUE_NAME}"
TASK_NAME = "lab_task"
PUBLISH_THREADS = 10
log = logging.getLogger("lab.dramatiq")


class LabConsumer(_RedisConsumer):
    """Dramatiq's Redis consumer, plus one step before its first fetch: ids in
    this worker's acks set that the worker does not hold go back on the queue.

    A fetch moves ids into the acks set in Redis. When Redis restarts under a
    fetch it may have carried out, the reply is lost; the ids then sit in the
    acks set of a worker that is alive and heartbeating, which Dramatiq's
    housekeeping never requeues (6 of 1489 tasks in a `restart-redis` chaos run
    never ran). Dramatiq starts a new consumer after every connection error,
    and only the consumer thread fetches, so at that point every id in the set
    is either held (handed to a worker thread, not yet acknowledged) or lost."""

    def __init__(self, broker: "LabRedisBroker", queue_name, prefetch, timeout):
        super().__init__(broker, queue_name, prefetch, timeout)
        self.checked = False

    def __next__(self):
        if not self.checked:
            try:
                self.requeue_lost()
            except redis.ConnectionError as e:
                raise ConnectionClosed(e) from None
            self.checked = True
        message = super().__next__()
        if message is not None:
            self.broker.held.add(message.options["redis_message_id"])
        return message

    def requeue_lost(self) -> None:
        acks = f"{self.broker.namespace}:__acks__.{self.broker.broker_id}.{self.queue_name}"
        in_acks = {i.decode() for i in self.broker.client.smembers(acks)}
        # An id acknowledged since SMEMBERS has left the set: requeue skips it.
        lost = in_acks - frozenset(self.broker.held)
        if lost:
            log.warning("requeueing %d fetched message(s) this worker never received", len(lost))
            self.broker.do_requeue(self.queue_name, *lost)

    # Let go of an id once Redis has its acknowledgement. Dramatiq retries one
    # that failed on a connection error every 5 s, but takes a timeout (a
    # connect to a restarting Redis) for a bug and gives up: the message would
    # then stay in the acks set. Here a timeout is retried too.
    def ack(self, message):
        self._let_go(super().ack, message)

    def nack(self, message):
        self._let_go(super().nack, message)

    def _let_go(self, acknowledge, message) -> None:
        try:
            acknowledge(message)
        except redis.TimeoutError as e:
            raise ConnectionClosed(e) from None
        self.broker.held.discard(message.options["redis_message_id"])


class LabRedisBroker(RedisBroker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: set[str] = set()  # ids handed to worker threads and not yet acknowledged

    @property
    def consumer_class(self):
        return LabConsumer


def make_broker(settings: Settings, client: redis.Redis, middleware: list | None = None) -> RedisBroker:
    return LabRedisBroker(
        client=client,
        middleware=middleware,
        heartbeat_timeout=settings.task_timeout_s * 1000,
        maintenance_chance=DRAMATIQ_MAINTENANCE_CHANCE,
    )


class Producer:
    def __init__(self, settings: Settings, broker: Broker | None = None, probe: Probe | None = None):
        """broker, probe: another broker (with the API's short timeouts) and how to ask it whether it answers."""
        # The client has the API's short timeouts (RedisBroker drops them when given a url).
        self.broker = broker or make_broker(settings, sync_client(settings), middleware=[])
        self.publisher = BlockingPublisher(settings, PUBLISH_THREADS, "dramatiq", probe=probe)

    async def start(self) -> None:
        pass

    async def enqueue(self, msg: TaskMessage) -> None:
        message: Message[None] = Message(
            queue_name=QUEUE_NAME,
            actor_name=TASK_NAME,
            args=(msg.payload(),),
            kwargs={},
            options={},
            message_id=msg.task_id,
        )
        await self.publisher.publish(partial(self.broker.enqueue, message))

    async def close(self) -> None:
        await self.publisher.close()


async def depth(redis) -> int:
    """Ids no worker has fetched yet (fetched ones wait in a worker's memory)."""
    return await redis.llen(QUEUE_KEY)


async def purge(redis) -> int:
    """(make purge, no worker running) What Dramatiq's own `flush` deletes (its queue, the
    messages and the delay queue's), and every worker's acknowledgement set of this queue;
    the dead letters (.XQ) are failed tasks, counted already, and stay."""
    names = (QUEUE_KEY, f"{QUEUE_KEY}.msgs", f"{QUEUE_KEY}.DQ", f"{QUEUE_KEY}.DQ.msgs")
    return await delete_keys(
        redis, (*names, f"dramatiq:__acks__.*.{QUEUE_NAME}", f"dramatiq:__acks__.*.{QUEUE_NAME}.DQ")
    )


# Worker: one process, DRAMATIQ_THREADS worker threads, one event loop.
class LabRuntime(Middleware):
    """Starts the lab's runtime (metrics endpoint, loop-lag watch, runner) on
    the AsyncIO middleware's loop once the worker runs, and stops it after
    the worker's threads have finished (added after AsyncIO, so the loop
    is still running on both sides)."""

    def __init__(self, runtime: WorkerRuntime):
        self.runtime = runtime

    def after_worker_boot(self, broker, worker) -> None:
        _loop_thread().run_coroutine(self.runtime.start())

    def after_worker_shutdown(self, broker, worker) -> None:
        _loop_thread().run_coroutine(self.runtime.stop())


def _loop_thread() -> EventLoopThread:
    """The AsyncIO middleware's loop thread (added before LabRuntime, so it runs)."""
    thread = get_event_loop_thread()
    if thread is None:
        raise RuntimeError("Dramatiq's AsyncIO middleware is not running")
    return thread


class LabPrometheus(Prometheus):
    """Dramatiq's Prometheus middleware: the same series, counted as its hooks
    count them, but through the lab's Count and Observe (as taskiq's,
    workers/taskiq_queue.py). Its own hooks look up four labelled children
    and take a lock for each update, in every task.

    Its hooks run in the worker threads, and a Count or Observe has one
    writer: each thread counts into series of its own, and every thread's
    flush adds to the same children."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def series(self, message) -> "_MessageSeries":
        mine = getattr(self._local, "series", None)
        if mine is None:
            mine = self._local.series = {}
        labels = (message.queue_name, message.actor_name)
        series = mine.get(labels)
        if series is None:
            series = mine[labels] = _MessageSeries(self, labels)
        return series

    def after_nack(self, broker, message):
        self.series(message).rejected.value += 1

    def after_enqueue(self, broker, message, delay):
        if "retries" in message.options:
            self.series(message).retried.value += 1

    def before_delay_message(self, broker, message):
        self.delayed_messages.add(message.message_id)
        self.series(message).delayed.value += 1

    def before_process_message(self, broker, message):
        series = self.series(message)
        if message.message_id in self.delayed_messages:
            self.delayed_messages.remove(message.message_id)
            series.delayed.value -= 1
        series.in_progress.value += 1
        self.message_start_times[message.message_id] = current_millis()

    def after_process_message(self, broker, message, *, result=None, exception=None):
        series = self.series(message)
        now = current_millis()
        series.duration(now - self.message_start_times.pop(message.message_id, now))
        series.in_progress.value -= 1
        series.total.value += 1
        if exception is not None:
            series.errors.value += 1

    after_skip_message = after_process_message


class _MessageSeries:
    """The children of Dramatiq's metrics for one queue and actor, in one thread."""

    __slots__ = ("total", "errors", "retried", "rejected", "in_progress", "delayed", "duration")

    def __init__(self, middleware: Prometheus, labels: tuple[str, str]):
        self.total = Count(middleware.total_messages.labels(*labels))
        self.errors = Count(middleware.total_errored_messages.labels(*labels))
        self.retried = Count(middleware.total_retried_messages.labels(*labels))
        self.rejected = Count(middleware.total_rejected_messages.labels(*labels))
        self.in_progress = Count(middleware.inprogress_messages.labels(*labels))
        self.delayed = Count(middleware.inprogress_delayed_messages.labels(*labels))
        self.duration = Observe(middleware.message_durations.labels(*labels))


def main() -> None:
    setup_logging()
    # No socket timeout on the worker's own connection: Dramatiq does not retry
    # an acknowledgement that timed out (the message would stay in the acks set
    # until this worker died). A Redis that is down fails the connect at once,
    # and Dramatiq retries its consumer every few seconds.
    run_worker(QUEUE, make_broker(get_settings(), worker_client(get_settings())))


def run_worker(queue: Queue, broker: Broker) -> None:
    """The worker of either broker: DRAMATIQ_THREADS threads, one event loop, until SIGTERM."""
    settings = get_settings()
    runtime = WorkerRuntime(settings, queue)
    broker.add_middleware(AsyncIO())
    broker.add_middleware(LabRuntime(runtime))
    prometheus = LabPrometheus()  # Dramatiq's own metrics (dramatiq_*), served on the lab's /metrics
    broker.add_middleware(prometheus)

    async def lab_task(message: dict) -> None:
        await runtime.runner.run(message)

    dramatiq_actor(
        broker=broker,
        actor_name=TASK_NAME,
        queue_name=QUEUE_NAME,
        max_retries=0,
        time_limit=settings.task_timeout_s * 1000,
    )(lab_task)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with library_exporter():
        broker.emit_after("process_boot")  # what Dramatiq's CLI does first: starts the time limit's watcher
    REGISTRY.register(LibraryMetrics(prometheus))
    worker = Worker(broker, queues={QUEUE_NAME}, worker_threads=settings.concurrency_for(queue))
    worker.start()
    while not stop.wait(1):
        pass
    log.info("stopping: waiting up to %s s for running tasks", settings.shutdown_grace_s)
    worker.stop(timeout=settings.shutdown_grace_s * 1000)
    broker.emit_before("process_stop")
    broker.close()


if __name__ == "__main__":
    main()
