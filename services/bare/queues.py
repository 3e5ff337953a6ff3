"""Each broker queue's bare counterpart in `make bench`, one class per library.

`publish` is the library's plain documented call (what the bare API does per
request); `worker` runs the library's own worker with the settings the lab's
worker uses (concurrency, acknowledgement, pool, ...) on a task that only does
INCRBY on `bench:done:<queue>`; `backlog` is the Redis command that counts
the tasks waiting in its queue before a worker has read any. Nothing here
touches the ledger or the lab's metrics. The libraries are imported inside
the methods, so the bare API and each bare worker load only what they use.
Their queues live apart from the lab's (`bench...` names), so a bench never
feeds the lab's workers.
"""

import asyncio
import os
import signal
import socket
from datetime import timedelta

import redis
import redis.asyncio as aioredis

from lab.queues import DRAMATIQ_MAINTENANCE_CHANCE, RQ_MAINTENANCE_INTERVAL_S, RQ_WORKER_TTL_S
from lab.settings import Settings, get_settings
from services.bare.bench_task import TASK, done_key
from services.bare.dramatiq_worker import run_dramatiq_worker
from services.bare.postgres_queues import BARE_POSTGRES
from services.bare.rabbitmq_queues import BARE_RABBITMQ


class Arq:
    QUEUE = "bench:arq"  # a ZSET; the jobs at arq:job:<id>, as arq names them
    keys = (QUEUE,)
    backlog = ("ZCARD", QUEUE)

    async def start(self, url: str) -> None:
        from arq import create_pool
        from arq.connections import RedisSettings

        self.pool = await create_pool(RedisSettings.from_dsn(url), default_queue_name=self.QUEUE)

    async def publish(self, message: dict) -> None:
        await self.pool.enqueue_job(TASK, message)

    async def close(self) -> None:
        await self.pool.aclose()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from arq.connections import RedisSettings
        from arq.worker import Worker, func

        async def bench_task(ctx: dict, message: dict) -> None:
            await ctx["redis"].incrby(done_key("arq"), message["value"])

        Worker(
            functions=[func(bench_task, name=TASK)],
            redis_settings=RedisSettings.from_dsn(settings.redis_url),
            queue_name=cls.QUEUE,
            max_jobs=settings.concurrency_for("arq"),
            poll_delay=settings.arq_poll_delay,
            job_timeout=settings.task_timeout_s,
            keep_result=60,
        ).run()


class Saq:
    NAME = "bench"  # keys saq:bench:*
    keys = tuple(f"saq:bench:{k}" for k in ("queued", "incomplete", "active", "schedule", "stats", "sweep"))
    backlog = ("LLEN", "saq:bench:queued")

    async def start(self, url: str) -> None:
        from saq import Queue

        self.queue = Queue.from_url(url, name=self.NAME)
        self.timeout_s = get_settings().task_timeout_s
        await self.queue.connect()

    async def publish(self, message: dict) -> None:
        # The lab's job options (workers/saq_queue.py's Producer): SAQ stores
        # them in the job it serialises at every status update, which costs
        # its worker for settings of SAQ's delivery, not for the lab
        # (docs/hot-path.md).
        await self.queue.enqueue(TASK, message=message, timeout=self.timeout_s, retries=2)

    async def close(self) -> None:
        await self.queue.disconnect()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from saq import Queue, Worker

        client = aioredis.Redis.from_url(settings.redis_url)

        async def bench_task(ctx: dict, *, message: dict) -> None:
            await client.incrby(done_key("saq"), message["value"])

        async def run() -> None:
            queue = Queue.from_url(settings.redis_url, name=cls.NAME)
            await Worker(
                queue, functions=[(TASK, bench_task)], concurrency=settings.concurrency_for("saq"), dequeue_timeout=1.0
            ).start()  # as the lab's worker

        asyncio.run(run())


class FastStream:
    STREAM, GROUP = "bench:faststream", "bench"
    keys = (STREAM,)
    backlog = ("XLEN", STREAM)

    async def start(self, url: str) -> None:
        from faststream.redis import RedisBroker
        from redis.exceptions import ResponseError

        self.broker = RedisBroker(url)
        await self.broker.connect()
        client = aioredis.Redis.from_url(url)
        try:  # the group starts at 0, like the lab's: tasks published before the worker runs are kept
            await client.xgroup_create(self.STREAM, self.GROUP, id="0", mkstream=True)
        except ResponseError:
            pass  # BUSYGROUP: it exists
        finally:
            await client.aclose()

    async def publish(self, message: dict) -> None:
        await self.broker.publish(message, stream=self.STREAM)

    async def close(self) -> None:
        await self.broker.stop()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from faststream import AckPolicy
        from faststream import FastStream as App
        from faststream.redis import RedisBroker, StreamSub

        broker = RedisBroker(settings.redis_url, logger=None)
        client = aioredis.Redis.from_url(settings.redis_url)
        read = StreamSub(cls.STREAM, group=cls.GROUP, consumer=f"{socket.gethostname()}-{os.getpid()}", max_records=1)

        @broker.subscriber(stream=read, max_workers=settings.concurrency_for("faststream"), ack_policy=AckPolicy.ACK)
        async def bench_task(message: dict) -> None:
            await client.incrby(done_key("faststream"), message["value"])

        asyncio.run(App(broker, logger=None).run())


class Celery:
    QUEUE = "bench-celery"  # a kombu LIST
    keys = (QUEUE,)
    backlog = ("LLEN", QUEUE)

    async def start(self, url: str) -> None:
        from celery import Celery as App

        self.app = App("bench", broker=url)
        self.app.conf.task_default_queue = self.QUEUE

    async def publish(self, message: dict) -> None:
        self.app.send_task(TASK, args=[message])  # on the event loop, as the docs and the published experiment call it

    async def close(self) -> None:
        pass

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from celery import Celery as App

        app = App("bench", broker=settings.redis_url)
        app.conf.update(
            task_default_queue=cls.QUEUE,
            task_ignore_result=True,
            task_acks_late=True,
            task_reject_on_worker_lost=True,
            worker_prefetch_multiplier=settings.celery_prefetch_multiplier,
            worker_send_task_events=settings.celery_task_events,  # as the lab's worker: Flower's events
            worker_hijack_root_logger=False,
            # The lab worker's limits, as the other bare workers take theirs: the
            # pool's parent sets and cancels a timer per task for the time limit.
            task_time_limit=settings.task_timeout_s,
            broker_transport_options={"visibility_timeout": 2 * settings.task_timeout_s},
        )
        client = redis.Redis.from_url(settings.redis_url)

        @app.task(name=TASK)
        def bench_task(message: dict) -> None:
            client.incrby(done_key("celery"), message["value"])

        app.worker_main(
            [
                "worker",
                f"--pool={settings.celery_pool}",
                f"--concurrency={settings.concurrency_for('celery')}",
                f"--queues={cls.QUEUE}",
                f"--loglevel={settings.library_log_level}",
                *(["--events"] if settings.celery_task_events else []),
            ]
        )


class Taskiq:
    STREAM, GROUP = "bench:taskiq", "bench"
    keys = (STREAM,)
    backlog = ("XLEN", STREAM)

    @classmethod
    def make_broker(cls, url: str, worker: bool):
        from taskiq_redis import RedisStreamBroker

        return RedisStreamBroker(
            url,
            queue_name=cls.STREAM,
            consumer_group_name=cls.GROUP,
            consumer_name=f"{socket.gethostname()}-{os.getpid()}" if worker else None,
            consumer_id="0",
            xread_count=1,  # as the lab's: see workers/taskiq_queue.py
            idle_timeout=int(get_settings().taskiq_reclaim_s * 1000),
        )

    async def start(self, url: str) -> None:
        self.broker = self.make_broker(url, worker=False)

        @self.broker.task(task_name=TASK)
        async def bench_task(message: dict) -> None: ...

        self.task = bench_task
        await self.broker.startup()  # creates the group (at "0"), as the worker would

    async def publish(self, message: dict) -> None:
        await self.task.kiq(message)

    async def close(self) -> None:
        await self.broker.shutdown()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from taskiq.acks import AcknowledgeType
        from taskiq.receiver import Receiver

        broker = cls.make_broker(settings.redis_url, worker=True)
        broker.is_worker_process = True
        client = aioredis.Redis.from_url(settings.redis_url)

        @broker.task(task_name=TASK)
        async def bench_task(message: dict) -> None:
            await client.incrby(done_key("taskiq"), message["value"])

        async def run() -> None:
            # taskiq's receiver in this process, as the lab's worker runs it (not
            # `taskiq worker`, which forks worker processes)
            finish = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, finish.set)
            await broker.startup()
            # As the lab's worker starts (workers/taskiq_queue.py): no claim lock
            # left by a worker stopped while it held it. taskiq-redis 1.0 sets it
            # without an expiry, and a worker that finds it held skips the claim
            # after every read, which changes its drain rate (what it did to a
            # bench: docs/results/what-the-lab-cost-before.md, "suspect").
            await client.delete(f"autoclaim:{cls.GROUP}:{cls.STREAM}")
            receiver = Receiver(
                broker,
                max_async_tasks=settings.concurrency_for("taskiq"),
                ack_type=AcknowledgeType.WHEN_EXECUTED,
                run_startup=False,
            )
            await receiver.listen(finish)
            await broker.shutdown()

        asyncio.run(run())


class Dramatiq:
    QUEUE = "bench-dramatiq"  # keys dramatiq:bench-dramatiq (LIST of ids), ...msgs (HASH)
    keys = (f"dramatiq:{QUEUE}", f"dramatiq:{QUEUE}.msgs")
    backlog = ("LLEN", f"dramatiq:{QUEUE}")

    async def start(self, url: str) -> None:
        from dramatiq import actor
        from dramatiq.brokers.redis import RedisBroker

        self.actor = actor(lambda message: None, broker=RedisBroker(url=url), actor_name=TASK, queue_name=self.QUEUE)

    async def publish(self, message: dict) -> None:
        self.actor.send(message)  # Dramatiq's call is blocking: on the event loop, as Celery's is here

    async def close(self) -> None:
        self.actor.broker.close()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from dramatiq.brokers.redis import RedisBroker

        # The lab worker's settings (workers/dramatiq_queue.py): its housekeeping
        # chance, heartbeat timeout TASK_TIMEOUT_S, no retries, an async task on
        # the AsyncIO middleware's loop, DRAMATIQ_THREADS threads.
        broker = RedisBroker(
            url=settings.redis_url,
            heartbeat_timeout=settings.task_timeout_s * 1000,
            maintenance_chance=DRAMATIQ_MAINTENANCE_CHANCE,
        )
        run_dramatiq_worker(settings, broker, "dramatiq", cls.QUEUE)


class Streaq:
    NAME = "bench"  # keys streaq:bench:*
    keys = ("streaq:bench:queues:normal",)
    backlog = ("XLEN", "streaq:bench:queues:normal")

    @classmethod
    def worker_for(cls, settings: Settings):
        from streaq import Worker

        worker = Worker(
            redis_url=settings.redis_url,
            queue_name=cls.NAME,
            concurrency=settings.concurrency_for("streaq"),
            idle_timeout=settings.streaq_idle_timeout_s,
            grace_period=settings.shutdown_grace_s,
        )
        client = aioredis.Redis.from_url(settings.redis_url)

        @worker.task(name=TASK, timeout=settings.task_timeout_s, ttl=0)
        async def bench_task(message: dict) -> None:
            await client.incrby(done_key("streaq"), message["value"])

        return worker, bench_task

    async def start(self, url: str) -> None:
        self.worker_, self.task = self.worker_for(get_settings().model_copy(update={"redis_url": url}))
        await self.worker_.__aenter__()  # `async with worker:` around the app's life: connects, loads its functions

    async def publish(self, message: dict) -> None:
        await self.task.enqueue(message)

    async def close(self) -> None:
        await self.worker_.__aexit__(None, None, None)

    @classmethod
    def worker(cls, settings: Settings) -> None:
        worker, _ = cls.worker_for(settings)
        worker.run_sync()


# RQ's and Huey's jobs name a function by its module: these two are theirs.
_done_client: redis.Redis | None = None


def _incr(queue: str, message: dict) -> None:
    global _done_client
    if _done_client is None:
        _done_client = redis.Redis.from_url(get_settings().redis_url)
    _done_client.incrby(done_key(queue), message["value"])


def rq_bench_task(message: dict) -> None:
    _incr("rq", message)


def huey_bench_task(message: dict) -> None:
    _incr("huey", message)


class Rq:
    NAME = "bench-rq"  # keys rq:queue:bench-rq (LIST of job ids), rq:job:<id>
    keys = (f"rq:queue:{NAME}", f"rq:queue:{NAME}:intermediate")
    backlog = ("LLEN", f"rq:queue:{NAME}")

    async def start(self, url: str) -> None:
        from rq import Queue

        self.queue = Queue(self.NAME, connection=redis.Redis.from_url(url))
        self.timeout_s = get_settings().task_timeout_s

    async def publish(self, message: dict) -> None:
        from rq import Retry

        # RQ's call is blocking: on the event loop, as Celery's is here. The
        # lab's job options (workers/rq_queue.py's Producer): RQ keeps them in
        # the job, and its worker acts on them (retries, no result kept).
        self.queue.enqueue(
            f"{__name__}.rq_bench_task", message, job_timeout=self.timeout_s, result_ttl=0, retry=Retry(max=2)
        )

    async def close(self) -> None:
        self.queue.connection.close()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from rq import SimpleWorker, Worker
        from rq.worker_pool import WorkerPool

        base = {"Worker": Worker, "SimpleWorker": SimpleWorker}[settings.rq_worker_class]

        class BenchWorker(base):  # type: ignore[valid-type,misc]  # RQ's class, chosen at run time
            # The lab worker's maintenance interval and TTL (lab/queues.py): WorkerPool passes neither.
            def __init__(self, *args, **kwargs):
                kwargs.setdefault("maintenance_interval", RQ_MAINTENANCE_INTERVAL_S)
                kwargs.setdefault("worker_ttl", RQ_WORKER_TTL_S)
                super().__init__(*args, **kwargs)

        WorkerPool(
            [cls.NAME],
            connection=redis.Redis.from_url(settings.redis_url),
            num_workers=settings.concurrency_for("rq"),
            worker_class=BenchWorker,
        ).start(logging_level=settings.library_log_level)


class Huey:
    NAME = "bench"  # keys huey.redis.bench (LIST), huey.schedule.bench
    keys = (f"huey.redis.{NAME}",)
    backlog = ("LLEN", f"huey.redis.{NAME}")

    @classmethod
    def make(cls, url: str):
        from huey import RedisHuey

        huey = RedisHuey(cls.NAME, url=url)
        return huey, huey.task(name=TASK, timeout=get_settings().task_timeout_s)(huey_bench_task)

    async def start(self, url: str) -> None:
        self.huey, self.task = self.make(url)

    async def publish(self, message: dict) -> None:
        self.task(message)  # calling the task enqueues it (blocking: on the event loop, as Celery's)

    async def close(self) -> None:
        self.huey.storage.close()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        huey, _ = cls.make(settings.redis_url)
        huey.create_consumer(
            workers=settings.concurrency_for("huey"),
            worker_type=settings.huey_worker_type,
            graceful_signal="TERM",  # as the lab's worker
            shutdown_timeout=settings.shutdown_grace_s,
        ).run()


class Docket:
    NAME = "docket:bench"  # keys docket:bench:* (the stream docket:bench:stream), as docket names them
    keys = (f"{NAME}:stream",)
    backlog = ("XLEN", f"{NAME}:stream")

    @classmethod
    def docket_for(cls, settings: Settings):
        """A Docket with the lab's (no results kept) and the task registered on it, with the lab's timeout."""
        from docket import Docket, Timeout

        docket = Docket(name=cls.NAME, url=settings.redis_url, execution_ttl=timedelta(0))
        client = aioredis.Redis.from_url(settings.redis_url)

        async def bench_task(
            message: dict, timeout: Timeout = Timeout(timedelta(seconds=settings.task_timeout_s))
        ) -> None:
            await client.incrby(done_key("docket"), message["value"])

        docket.register(bench_task)
        return docket, bench_task

    async def start(self, url: str) -> None:
        self.docket, self.task = self.docket_for(get_settings().model_copy(update={"redis_url": url}))
        await self.docket.__aenter__()  # `async with docket:` around the app's life

    async def publish(self, message: dict) -> None:
        await self.docket.add(self.task)(message)

    async def close(self) -> None:
        await self.docket.__aexit__(None, None, None)

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from docket import Worker

        async def run() -> None:
            docket, _ = cls.docket_for(settings)
            async with (
                docket,
                Worker(  # the lab worker's settings (workers/docket_queue.py)
                    docket,
                    concurrency=settings.concurrency_for("docket"),
                    redelivery_timeout=timedelta(seconds=settings.docket_redelivery_timeout_s),
                    reconnection_delay=timedelta(seconds=1),
                    minimum_check_interval=timedelta(seconds=settings.docket_minimum_check_interval_s),
                    schedule_automatic_tasks=False,
                ) as worker,
            ):
                running = asyncio.create_task(worker.run_forever())
                for sig in (signal.SIGTERM, signal.SIGINT):  # as docket's own `docket worker` stops
                    asyncio.get_running_loop().add_signal_handler(sig, running.cancel)
                try:
                    await running
                except asyncio.CancelledError:
                    pass

        asyncio.run(run())


# The broker queues that have a bare counterpart (a class above and a
# bench-<queue> compose service); `make bench` measures these and background.
BARE = {
    "arq": Arq,
    "saq": Saq,
    "faststream": FastStream,
    "celery": Celery,
    "taskiq": Taskiq,
    "dramatiq": Dramatiq,
    "streaq": Streaq,
    "rq": Rq,
    "huey": Huey,
    "docket": Docket,
    **BARE_RABBITMQ,  # on RabbitMQ: services/bare/rabbitmq_queues.py
    **BARE_POSTGRES,  # on PostgreSQL: services/bare/postgres_queues.py
}
# What `make bench` deletes from Redis before a run (never anything outside these).
KEYS = tuple(key for bare in BARE.values() for key in getattr(bare, "keys", ()))
