"""A TCP port forwarder: `python -m services.port_forward 9090=prometheus:9090 5555=flower:5555`.

On a Docker Swarm the lab's stack publishes only the API and Grafana (a stack
file cannot bind a port to 127.0.0.1: docs/swarm.md). `make stack-up` runs this
in a plain container on the stack's network whose ports are published on
127.0.0.1 of the manager, so Prometheus, Flower and the SAQ UI are reached there
as compose publishes them. Each connection looks the name up again: a task that
moved to another node is followed.
"""

from __future__ import annotations

import asyncio
import sys

CONNECT_TIMEOUT_S = 5.0
CHUNK = 65536


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction until its end, then half-close the other side."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


def forwarder(host: str, port: int):
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            client_writer.close()
            return
        try:
            await asyncio.gather(pipe(client_reader, up_writer), pipe(up_reader, client_writer))
        finally:
            for writer in (up_writer, client_writer):
                writer.close()

    return handle


def parse(spec: str) -> tuple[int, str, int]:
    """`LISTEN=HOST:PORT` -> (listen port, host, port)."""
    listen, _, target = spec.partition("=")
    host, _, port = target.rpartition(":")
    if not (listen.isdigit() and host and port.isdigit()):
        raise SystemExit(f"port_forward: {spec!r} is not LISTEN=HOST:PORT")
    return int(listen), host, int(port)


async def serve(specs: list[str]) -> None:
    servers = []
    for listen, host, port in map(parse, specs):
        servers.append(await asyncio.start_server(forwarder(host, port), "0.0.0.0", listen))
        print(f"forwarding :{listen} -> {host}:{port}", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    asyncio.run(serve(sys.argv[1:]))
