"""An enqueue whose outcome the API cannot know: the broker's reply lost, not
the request. The API answers 503 (its promise: a fast answer), and the task it
refused may run all the same; the ledger counts such a task enqueued once it
runs, so a run's accounting stays exact (enqueued = completed, nothing
pending). A refused request that never reached the broker counts nothing.

Between the API and Redis sits a proxy that, when told, cuts off the next
transaction that enqueues a job (MULTI ... EXEC, as arq and RQ do: arq's with
a ZADD to its queue, RQ's with an RPUSH) on its way: either the reply (Redis
ran it, the client times out) or the request (Redis never sees its EXEC). The
workers reach Redis directly.

With ENQUEUE_MODE=after-response the client has its 202 before the publish:
a lost reply is then counted enqueued like any 202, and not as a 503."""

import asyncio
import threading

import pytest

from tests.lab import (
    ACCOUNTED,
    HTTP,
    RedisServer,
    cell,
    free_port,
    ledger,
    new_run,
    queue_depth,
    start_api,
    start_worker,
    wait_until,
)

EXEC = b"\r\nEXEC\r\n"  # the RESP bulk string that ends a transaction
PUSH = {"arq": b"\r\nZADD\r\n", "rq": b"\r\nRPUSH\r\n"}  # the command of a transaction that enqueues a job


class TransactionCutter:
    """A TCP proxy to a Redis. `cut(what)`: on the next connection that sends
    EXEC after `push`, drop every reply from then on ("reply") or that request
    and every one after it ("request")."""

    def __init__(self, upstream_port: int, push: bytes):
        self.upstream_port, self.push, self.port = upstream_port, push, free_port()
        self.armed: str | None = None
        self.cuts: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "TransactionCutter":
        ready = threading.Event()

        async def serve():
            self.server = await asyncio.start_server(self._connection, "127.0.0.1", self.port)
            ready.set()

        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(serve(), self.loop)
        assert ready.wait(10), "the proxy did not start"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def cut(self, what: str) -> None:
        self.armed = what

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        cut: list[str] = []  # this connection's cut, once made
        pushing = False  # a push was sent since the last EXEC

        async def requests():
            nonlocal pushing
            while data := await client_r.read(65536):
                pushing = pushing or self.push in data
                if pushing and EXEC in data:
                    pushing = False
                    if self.armed and not cut:
                        cut.append(self.armed)
                        self.cuts.append(self.armed)
                        self.armed = None
                if cut != ["request"]:
                    server_w.write(data)
                    await server_w.drain()
            server_w.close()

        async def replies():
            while data := await server_r.read(65536):
                if not cut:
                    client_w.write(data)
                    await client_w.drain()
            client_w.close()

        await asyncio.gather(requests(), replies(), return_exceptions=True)


@pytest.fixture
def cutter(request):
    """A Redis, and the proxy in front of it for the queue `request.param`."""
    redis = RedisServer().start()
    proxy = TransactionCutter(redis.port, PUSH[request.param]).start()
    yield redis, proxy
    proxy.stop()
    redis.stop()


def post(api_url: str, queue: str, run: str, value: int):
    return HTTP.post(
        f"{api_url}/api/v1/incr/io/simple/{queue}", json={"value": value}, headers={"X-Lab-Run": run}, timeout=30
    )


@pytest.mark.parametrize("cutter", list(PUSH), indirect=True)
def test_a_task_answered_503_for_a_lost_reply_runs_and_is_counted_enqueued_after_error(cutter, request):
    redis, proxy = cutter
    queue = request.node.callspec.params["cutter"]
    api = start_api(proxy.url, name=f"api-lost-reply-{queue}")
    worker = start_worker(queue, redis.url, name=f"{queue}-lost-reply")
    run = new_run(f"lost-reply-{queue}")
    try:
        assert post(api.url, queue, run, 1).status_code == 202  # the producer connected before the cuts
        proxy.cut("reply")
        lost_reply = post(api.url, queue, run, 10)
        proxy.cut("request")
        lost_request = post(api.url, queue, run, 100)
        assert proxy.cuts == ["reply", "request"], proxy.cuts
        for r in (lost_reply, lost_request):
            assert r.status_code == 503 and r.json()["reason"] in ("timeout", "connection", "broker"), r.text
        assert post(api.url, queue, run, 1000).status_code == 202

        seen: list[dict | None] = [None]

        def ran():  # the two accepted tasks and the one whose reply was lost; the fourth never reached Redis
            report = seen[0] = ledger(api.url, run)
            return report is not None and report["totals"]["completed"] == 3

        try:
            wait_until(ran, 60, "the three tasks Redis had to run", interval=0.25)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the run's ledger: {seen[0]}") from None
        wait_until(lambda: queue_depth(redis.url, queue) == 0, 30, f"{queue}'s queue to be empty")
        report = ledger(api.url, run)
        assert cell(report, queue, ("failed", "duplicates", *ACCOUNTED)) == dict(
            enqueued=3, completed=3, failed=0, duplicates=0, pending=0, value=1011, work=1011
        ), report
        assert report["enqueued_after_error"] == 1, report
    finally:
        worker.stop()
        api.stop()


@pytest.mark.parametrize("cutter", ["arq"], indirect=True)
def test_after_response_a_publish_whose_reply_was_lost_is_counted_enqueued_not_as_a_503(cutter):
    redis, proxy = cutter
    api = start_api(proxy.url, name="api-lost-reply-after-response", ENQUEUE_MODE="after-response")
    worker = start_worker("arq", redis.url, name="arq-lost-reply-after-response")
    run = new_run("lost-reply-after-response")

    def counted(what: str, n: int) -> bool:
        report = ledger(api.url, run)
        return report is not None and report["totals"][what] == n

    try:
        # Every request is answered 202 before its publish; each step waits for
        # the publish it makes, so that each cut takes the one it is meant for.
        assert post(api.url, "arq", run, 1).status_code == 202
        wait_until(lambda: counted("enqueued", 1), 60, "the first publish (the producer connected)", interval=0.1)
        proxy.cut("reply")
        assert post(api.url, "arq", run, 10).status_code == 202
        wait_until(lambda: proxy.cuts == ["reply"], 60, "the second publish's reply to be cut", interval=0.1)
        proxy.cut("request")
        assert post(api.url, "arq", run, 100).status_code == 202
        wait_until(lambda: proxy.cuts == ["reply", "request"], 60, "the third publish to be cut", interval=0.1)
        assert post(api.url, "arq", run, 1000).status_code == 202

        wait_until(lambda: counted("completed", 3), 60, "the three tasks Redis had to run", interval=0.25)
        # The lost reply's publish fails only at its timeout, after its task may have run.
        wait_until(lambda: counted("enqueued", 3), 60, "the lost reply's task to be counted enqueued", interval=0.25)
        wait_until(lambda: queue_depth(redis.url, "arq") == 0, 30, "arq's queue to be empty")
        report = ledger(api.url, run)
        assert cell(report, "arq") == dict(enqueued=3, completed=3, pending=0, value=1011, work=1011), report
        # The task whose request was cut is the one lost: answered 202, never enqueued.
        assert report["enqueued_after_error"] == 0, report
    finally:
        worker.stop()
        api.stop()
