"""The `background` queue: Starlette's BackgroundTasks, run by the API process
itself after the response is sent. No broker, no retries: if the API process
dies, its scheduled tasks are gone (the ledger shows them as pending)."""

from starlette.background import BackgroundTasks

from lab.metrics import QUEUE_DEPTH
from lab.protocol import Queue, TaskMessage
from lab.runner import TaskRunner

QUEUE = Queue("background")


class BackgroundQueue:
    def __init__(self, runner: TaskRunner):
        self.runner = runner
        self.depth = QUEUE_DEPTH.labels(queue=QUEUE)  # scheduled, not yet started

    def enqueue(self, msg: TaskMessage, tasks: BackgroundTasks) -> None:
        self.depth.inc()
        tasks.add_task(self._run, msg)

    async def _run(self, msg: TaskMessage) -> None:
        self.depth.dec()
        try:
            await self.runner.run(msg)
        except Exception:
            pass  # already logged and recorded as failed; nothing else would catch it
