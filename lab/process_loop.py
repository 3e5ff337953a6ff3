"""One event loop and one TaskRunner per worker process, for a queue library
that calls a plain function per task and cannot await one (Celery, Huey).

Both are made on the process's first task: after a fork, never before, and
never per task. A process that runs one task at a time in its main thread
(Celery's prefork and solo pools, Huey's process workers) runs the loop
there, for the length of a task and only for a body that awaits; the others
run and settle without it (TaskRunner.run_blocking), not in a thread of its
own with every task handed over to it, which costs much of the worker's
throughput under a CPU limit (docs/hot-path.md). A pool of threads runs
several tasks at once: there the loop runs in a daemon thread, started for
the first task that needs it (Huey's thread workers run a body that never
awaits themselves), a task's coroutine is submitted to it, and only there is
the loop's lag watched (a loop that runs only during tasks has none to
show). A worker whose tasks never await runs no loop thread: nothing would
run on it but the lag watch's timer
(docs/results/2026-11-27-huey-worker-threads.md)."""

import asyncio
import os
import threading
from collections.abc import Callable

from lab.loop_lag import start_loop_lag_watch
from lab.runner import TaskRunner
from lab.settings import Settings, get_settings
from lab.worker_runtime import service_name


class ProcessLoop:
    # Made by get() on a process's first task; _pid says in which process.
    loop: asyncio.AbstractEventLoop
    runner: TaskRunner
    _loop_thread: bool  # whether the loop runs in a thread of its own yet (threaded only)

    def __init__(self, queue: str, threaded: Callable[[Settings], bool]):
        """threaded: whether these settings run the tasks in a pool of threads."""
        self.queue = queue
        self._threaded_under = threaded
        self._lock = threading.Lock()
        self._pid: int | None = None
        self.threaded = False

    def get(self) -> tuple[asyncio.AbstractEventLoop, TaskRunner]:
        with self._lock:
            if self._pid != os.getpid():  # first task in this process (or a fresh fork)
                settings = get_settings()
                self.threaded = self._threaded_under(settings)
                self.loop = asyncio.new_event_loop()
                self.runner = TaskRunner(settings)
                self._loop_thread = False
                self._pid = os.getpid()
            return self.loop, self.runner

    def _start_loop_thread(self) -> None:
        with self._lock:
            if not self._loop_thread:
                threading.Thread(target=self.loop.run_forever, name="lab-loop", daemon=True).start()
                asyncio.run_coroutine_threadsafe(self._watch_lag(self.runner.settings), self.loop)
                self._loop_thread = True

    async def _watch_lag(self, settings: Settings) -> None:
        start_loop_lag_watch(service_name(settings, self.queue), settings.loop_lag_interval_s)

    def _call(self, coro, timeout: float | None = None):
        if self.threaded:
            if not self._loop_thread:
                self._start_loop_thread()
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)
        return self.loop.run_until_complete(coro)

    def run(self, message: dict) -> None:
        loop, runner = self.get()
        if self.threaded:
            self._call(runner.run(message))
        else:  # one task at a time: a body that needs no loop runs without it
            runner.run_blocking(message, lambda: loop)

    def stop(self) -> None:
        if self._pid != os.getpid():
            return
        if self._loop_thread:
            self._call(self.runner.close(), timeout=10)
        else:  # no thread runs the loop: this one may
            self.loop.run_until_complete(self.runner.close())
