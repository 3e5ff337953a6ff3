"""The bare counterparts of the queues on RabbitMQ in `make bench`, as
services/bare/queues.py has those on Redis: the library's plain call to
publish, and its own worker with the lab worker's settings (concurrency,
prefetch, acknowledgement after the task, publisher confirms) on a task that
only does INCRBY on `bench:done:<queue>` (on Redis, as the ledger is).

Their queues are RabbitMQ's, apart from the lab's (`bench-...` names):
`rabbitmq_queues` names them, for their backlog (the ready messages) and for
emptying them before a bench (services/bare/drain.py)."""

import asyncio
import signal

import redis
import redis.asyncio as aioredis

from lab import rabbitmq
from lab.settings import Settings, get_settings
from services.bare.bench_task import TASK, done_key
from services.bare.dramatiq_worker import run_dramatiq_worker


class CeleryRabbitmq:
    QUEUE = "bench-celery"
    rabbitmq_queues = (QUEUE,)

    @classmethod
    def app(cls, settings: Settings):
        from celery import Celery as App

        app = App("bench", broker=settings.rabbitmq_url)
        app.conf.update(
            task_default_queue=cls.QUEUE,
            broker_transport_options={"confirm_publish": True},  # as the lab's (workers/celery_rabbitmq_queue.py)
        )
        return app

    async def start(self, url: str) -> None:
        self.app_ = self.app(get_settings())

    async def publish(self, message: dict) -> None:
        self.app_.send_task(TASK, args=[message])  # on the event loop, as the Redis one

    async def close(self) -> None:
        pass

    @classmethod
    def worker(cls, settings: Settings) -> None:
        app = cls.app(settings)
        app.conf.update(  # the lab worker's (workers/celery_queue.py), as the Redis bare one
            task_ignore_result=True,
            task_acks_late=True,
            task_reject_on_worker_lost=True,
            worker_prefetch_multiplier=settings.celery_prefetch_multiplier,
            worker_send_task_events=settings.celery_task_events,
            worker_hijack_root_logger=False,
            task_time_limit=settings.task_timeout_s,
        )
        client = redis.Redis.from_url(settings.redis_url)

        @app.task(name=TASK)
        def bench_task(message: dict) -> None:
            client.incrby(done_key("celery-rabbitmq"), message["value"])

        app.worker_main(
            [
                "worker",
                f"--pool={settings.celery_pool}",
                f"--concurrency={settings.concurrency_for('celery-rabbitmq')}",
                f"--queues={cls.QUEUE}",
                f"--loglevel={settings.library_log_level}",
                *(["--events"] if settings.celery_task_events else []),
            ]
        )


class DramatiqRabbitmq:
    QUEUE = "bench-dramatiq"
    rabbitmq_queues = (QUEUE, f"{QUEUE}.DQ")

    async def start(self, url: str) -> None:
        from dramatiq import actor
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        broker = RabbitmqBroker(url=get_settings().rabbitmq_url, confirm_delivery=True)
        self.actor = actor(lambda message: None, broker=broker, actor_name=TASK, queue_name=self.QUEUE)

    async def publish(self, message: dict) -> None:
        self.actor.send(message)  # blocking: on the event loop, as the Redis one

    async def close(self) -> None:
        self.actor.broker.close()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        run_dramatiq_worker(settings, RabbitmqBroker(url=settings.rabbitmq_url), "dramatiq-rabbitmq", cls.QUEUE)


class FastStreamRabbitmq:
    QUEUE = "bench-faststream"
    rabbitmq_queues = (QUEUE,)

    async def start(self, url: str) -> None:
        from faststream.rabbit import RabbitBroker, RabbitQueue

        self.queue = RabbitQueue(self.QUEUE, durable=True)
        self.broker = RabbitBroker(get_settings().rabbitmq_url, logger=None)
        await self.broker.connect()

    async def publish(self, message: dict) -> None:
        await self.broker.publish(message, queue=self.queue, persist=True)

    async def close(self) -> None:
        await self.broker.stop()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from faststream import AckPolicy
        from faststream import FastStream as App
        from faststream.rabbit import Channel, RabbitBroker, RabbitQueue

        broker = RabbitBroker(settings.rabbitmq_url, logger=None)
        client = aioredis.Redis.from_url(settings.redis_url)
        channel = Channel(prefetch_count=settings.concurrency_for("faststream-rabbitmq"))

        @broker.subscriber(RabbitQueue(cls.QUEUE, durable=True), channel=channel, ack_policy=AckPolicy.ACK)
        async def bench_task(message: dict) -> None:
            await client.incrby(done_key("faststream-rabbitmq"), message["value"])

        asyncio.run(rabbitmq.wait_until_answers(settings))
        asyncio.run(App(broker, logger=None).run())


class TaskiqRabbitmq:
    QUEUE = "bench-taskiq"
    rabbitmq_queues = (QUEUE,)

    @classmethod
    def make_broker(cls, settings: Settings):
        from taskiq_aio_pika import AioPikaBroker, Exchange, Queue
        from taskiq_aio_pika.queue import QueueType

        return AioPikaBroker(  # as the lab's (workers/taskiq_rabbitmq_queue.py)
            settings.rabbitmq_url,
            qos=settings.concurrency_for("taskiq-rabbitmq"),
            exchange=Exchange(name=cls.QUEUE),
            task_queues=[Queue(name=cls.QUEUE, type=QueueType.CLASSIC)],
            dead_letter_queue=Queue(name=f"{cls.QUEUE}.dead_letter", type=QueueType.CLASSIC),
        )

    async def start(self, url: str) -> None:
        self.broker = self.make_broker(get_settings())

        @self.broker.task(task_name=TASK)
        async def bench_task(message: dict) -> None: ...

        self.task = bench_task
        await self.broker.startup()

    async def publish(self, message: dict) -> None:
        await self.task.kiq(message)

    async def close(self) -> None:
        await self.broker.shutdown()

    @classmethod
    def worker(cls, settings: Settings) -> None:
        from taskiq.acks import AcknowledgeType
        from taskiq.receiver import Receiver

        broker = cls.make_broker(settings)
        broker.is_worker_process = True
        client = aioredis.Redis.from_url(settings.redis_url)

        @broker.task(task_name=TASK)
        async def bench_task(message: dict) -> None:
            await client.incrby(done_key("taskiq-rabbitmq"), message["value"])

        async def run() -> None:
            finish = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, finish.set)
            await rabbitmq.wait_until_answers(settings)
            await broker.startup()
            receiver = Receiver(
                broker,
                max_async_tasks=settings.concurrency_for("taskiq-rabbitmq"),
                ack_type=AcknowledgeType.WHEN_EXECUTED,
                run_startup=False,
            )
            await receiver.listen(finish)
            await broker.shutdown()

        asyncio.run(run())


BARE_RABBITMQ = {
    "celery-rabbitmq": CeleryRabbitmq,
    "dramatiq-rabbitmq": DramatiqRabbitmq,
    "faststream-rabbitmq": FastStreamRabbitmq,
    "taskiq-rabbitmq": TaskiqRabbitmq,
}
