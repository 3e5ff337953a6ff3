"""Redis clients with short timeouts: an outage must fail fast, never hang."""

import asyncio
import threading

import redis
import redis.asyncio as aioredis

from lab.settings import Settings

# What a client raises when Redis cannot be reached or does not answer in time
# (as opposed to Redis answering with an error).
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class TimelyConnection(aioredis.Connection):
    """redis-py's connection, with timeouts that cost little and that a slow
    event loop does not trip.

    Sends: redis-py bounds every send with `asyncio.wait_for`, which starts a
    task per command, paid by every request and every task (fast path:
    docs/hot-path.md). Here the command is written to the
    transport, which sends what the socket takes at once; only when some of it
    is left in the write buffer (a full socket: Redis not reading) does the
    send wait for it, under `asyncio.timeout`.

    Reads: redis-py cancels a read when socket_timeout has passed, even when
    the reply is already in the buffer. Under 0.2 CPU one event-loop turn can
    last longer than REDIS_TIMEOUT_S; a reply that arrived in time then meets
    its expired timer in the same turn, and the read is cancelled: a command
    Redis carried out is reported as a timeout (a 503 for a task that was
    enqueued, or a task left unsettled), and the connection is dropped. Here,
    an expired read gives up only if, one loop turn later, nothing has arrived;
    a Redis that takes the command and never answers still fails in about
    socket_timeout (plus at most _ReadWatch.PERIOD_S). Pending reads are
    watched by one timer per event loop (_ReadWatch), not one per read (an
    arq enqueue makes six reads).

    Both do redis-py's steps themselves (its health check, its errors, its
    disconnect on failure) rather than through super() with the timeout
    switched off and on again: an arq enqueue is three sends and six reads,
    each through those layers (docs/hot-path.md)."""

    _read_deadline = 0.0
    _read_timeout = 0.0
    _read_task: asyncio.Task | None = None
    _reads = 0  # which read is pending, so a late look never judges the next one
    _gave_up = False
    _watch: "_ReadWatch | None" = None

    async def send_packed_command(self, command, check_health: bool = True) -> None:
        timeout = self.socket_timeout
        if not timeout:
            return await super().send_packed_command(command, check_health)
        if not self.is_connected:
            await self.connect()
        elif check_health:
            await self.check_health()  # a PING whose reply is read under the timeout
        if isinstance(command, str):
            command = command.encode()
        try:
            # Connected above; redis-py types the writer as optional.
            writer: asyncio.StreamWriter = self._writer  # type: ignore[assignment]
            if isinstance(command, bytes):
                writer.write(command)
            else:
                writer.writelines(command)
            transport = writer.transport
            if transport.get_write_buffer_size() or transport.is_closing():
                async with asyncio.timeout(timeout):
                    await writer.drain()
        except BaseException as exc:
            await self.disconnect(nowait=True)  # part of the command may have gone: never reuse the connection
            if isinstance(exc, TimeoutError):  # before OSError, of which it is a subclass
                raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
            if isinstance(exc, OSError):
                raise redis.exceptions.ConnectionError(f"Error while writing to socket. {exc}.") from exc
            raise

    async def read_response(
        self,
        disable_decoding: bool = False,
        timeout: float | None = None,
        *,
        disconnect_on_error: bool = True,
        push_request: bool | None = False,
    ):
        read_timeout = self.socket_timeout
        # A caller's own timeout returns None, and RESP3 reads push messages: both left to redis-py.
        if timeout is not None or not read_timeout or self.protocol in (3, "3"):
            return await super().read_response(
                disable_decoding, timeout, disconnect_on_error=disconnect_on_error, push_request=push_request
            )
        loop = asyncio.get_running_loop()
        watch = self._watch
        if watch is None or watch.loop is not loop:
            watch = self._watch = _ReadWatch.of(loop)
        task = self._read_task = asyncio.current_task(loop)
        self._reads += 1
        self._gave_up = False
        self._read_timeout = read_timeout
        self._read_deadline = loop.time() + read_timeout
        watch.add(self)
        try:
            # Every parser redis-py connects has read_response; its BaseParser type does not list it.
            response = await self._parser.read_response(disable_decoding=disable_decoding)  # type: ignore[attr-defined]
        except BaseException as exc:
            if disconnect_on_error:
                await self.disconnect(nowait=True)
            if isinstance(exc, asyncio.CancelledError) and self._gave_up and task is not None and task.uncancel() == 0:
                # our cancel, not the caller's
                raise redis.exceptions.TimeoutError(f"Timeout reading from {self._host_error()}") from None
            if isinstance(exc, OSError):
                raise redis.exceptions.ConnectionError(
                    f"Error while reading from {self._host_error()} : {exc.args}"
                ) from exc
            raise
        finally:
            watch.pending.discard(self)
            self._read_task = None
        if self.health_check_interval:
            self.next_health_check = loop.time() + self.health_check_interval
        if isinstance(response, redis.exceptions.ResponseError):
            raise response from None
        return response

    def _look_again(self, read: int) -> None:
        """One loop turn after the deadline: the reply is here (the loop was
        late) or the read gives up."""
        if read != self._reads or self._read_task is None:
            return  # that read has ended
        # The reply already in StreamReader's buffer (private: typeshed does not list it).
        if self._reader is not None and self._reader._buffer:  # type: ignore[attr-defined]
            self._read_deadline = asyncio.get_running_loop().time() + self._read_timeout
        else:
            self._gave_up = True
            self._read_task.cancel()


class _ReadWatch:
    """The pending reads of one event loop, looked at every PERIOD_S while
    there are any."""

    PERIOD_S = 0.1
    _current = threading.local()  # a thread runs one loop at a time

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.pending: set[TimelyConnection] = set()
        self.timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "_ReadWatch":
        watch = getattr(cls._current, "watch", None)
        if watch is None or watch.loop is not loop:
            watch = cls._current.watch = cls(loop)
        return watch

    def add(self, conn: TimelyConnection) -> None:
        self.pending.add(conn)
        if self.timer is None:
            self.timer = self.loop.call_later(self.PERIOD_S, self.tick)

    def tick(self) -> None:
        now = self.loop.time()
        for conn in self.pending:
            if now >= conn._read_deadline:
                # After the next poll of the sockets: a reply already sent is read first.
                self.loop.call_soon(conn._look_again, conn._reads)
        self.timer = self.loop.call_later(self.PERIOD_S, self.tick) if self.pending else None


def _bulk(data: bytes) -> bytes:
    """One RESP bulk string, as `_pack` writes each argument (inline there, not by a call per argument)."""
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _pack(args) -> bytes:
    """A command in RESP, for arguments that are bytes, str, int or float (as
    redis-py's Encoder writes them: str() of a number is its repr())."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class Link:
    """One connection of a client, kept by a sender that never has two
    commands in flight (a ledger Batcher, one send at a time).

    A command through the client checks a connection out of its pool under a
    lock, probes it with a zero-timeout read, wraps the call in its retry
    helper, and hands it back with an event: on a worker under a small CPU
    limit, much of the client-side cost of a task's settle. Fast path: here a
    command is one send and one read on the kept connection, under the same
    TimelyConnection timeouts, and its arguments are packed by `_pack`, more
    cheaply than redis-py does (docs/hot-path.md).
    A connection the server closed (Redis restarted) is seen at its EOF, once
    the event loop has read it, and opened again before the send, as the
    pool's probe would; one idle for `health_check_interval` is PINGed first,
    as every client connection is. Any other failure drops the connection, so
    that a reply still on its way is never read as the next command's, and the
    next command opens a new one."""

    def __init__(self, client: aioredis.Redis):
        self.client = client
        self._conn: aioredis.Connection | None = None

    async def execute(self, *args):
        return await self.execute_packed(_pack(args))

    async def execute_packed(self, command: bytes):
        """A command packed in RESP already (as `_pack` packs it)."""
        conn = self._conn
        if conn is None:  # taken from the pool for good: the client's aclose() closes it too
            conn = self._conn = await self.client.connection_pool.get_connection()
        elif conn.is_connected and conn._reader.at_eof():  # type: ignore[union-attr]  # connected: it has a reader
            await conn.disconnect()
        try:
            await conn.send_packed_command(command)
            return await conn.read_response()
        except redis.exceptions.ResponseError:
            raise  # Redis answered: the connection is in step
        except BaseException:
            await conn.disconnect(nowait=True)
            raise

    async def script(self, script, keys: list, args: list):
        """Run a registered script (`client.register_script`) as its __call__ does."""
        try:
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:  # Redis restarted: its script cache is empty
            return await self.execute("EVAL", script.script, len(keys), *keys, *args)


class BlockingLink:
    """Link, for the blocking client and one caller at a time (a Celery prefork
    or solo child, a Huey worker thread settling its task): a kept connection,
    one send and one read per command, packed by `_pack` or by the caller.
    redis-py's connection drops itself on any failure but an error reply (a
    timeout, on a client that has one), so a late reply is never read as the
    next command's. A connection the server closed (Redis restarted) fails
    the next command, which the caller retries, as it does while Redis is
    away: checking it first, as the pool does, would cost a poll() on every
    command."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self._conn: redis.Connection | None = None

    def execute(self, *args):
        return self.execute_packed(_pack(args))

    def execute_packed(self, command: bytes):
        """A command packed in RESP already (as `_pack` packs it)."""
        conn = self._conn
        if conn is None:  # taken from the pool for good: the client's close() closes it too
            conn = self._conn = self.client.connection_pool.get_connection()
        conn.send_packed_command([command])  # a list: the blocking connection sends each item
        return conn.read_response()


def _options(settings: Settings) -> dict:
    return {
        "socket_timeout": settings.redis_timeout_s,
        "socket_connect_timeout": settings.redis_timeout_s,
        "health_check_interval": 10,
    }


def async_options(settings: Settings) -> dict:
    """What an asyncio client of the lab is created with (also for the queue
    libraries' own clients in the API, which take the same keywords)."""
    return {**_options(settings), "connection_class": TimelyConnection}


def async_client(settings: Settings) -> aioredis.Redis:
    return aioredis.Redis.from_url(settings.redis_url, **async_options(settings))


def sync_client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url, **_options(settings))


def worker_pool(settings: Settings) -> redis.ConnectionPool:
    """The connections of a worker's own traffic (a library's fetches and
    acknowledgements, a task's settle): a connect timeout but no read timeout,
    as Huey's own pool and the bare workers' clients have. With a read
    timeout, CPython polls the socket before every send and every read, and
    each poll lets another of the worker's threads take the GIL: twice a
    settle (docs/hot-path.md). A Redis that restarts closes the connection,
    and the command fails at once; one that stops answering stalls it until
    it answers again, as it stalls the library's own fetch."""
    return redis.ConnectionPool.from_url(settings.redis_url, socket_connect_timeout=settings.redis_timeout_s)


def worker_client(settings: Settings) -> redis.Redis:
    """A blocking client on a worker_pool of its own, closed with it."""
    return redis.Redis.from_pool(worker_pool(settings))
