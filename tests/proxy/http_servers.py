"""Throwaway HTTP servers on loopback for the engine-client tests: an aiohttp app answering every
path with one handler (well-behaved answers), and raw asyncio servers (answers that misbehave or
must be timed to the byte)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.engine.connections import HTTPClient, Origin


async def aiohttp_server(handler, host: str = "127.0.0.1") -> TestServer:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    server = TestServer(app, host=host)
    await server.start_server()
    return server


async def raw_server(on_connection, host: str = "127.0.0.1") -> tuple[asyncio.Server, int]:
    """(the server, its port): `on_connection(reader, writer)` runs once per client connection."""
    server = await asyncio.start_server(on_connection, host, 0)
    return server, server.sockets[0].getsockname()[1]


OK_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def origin_of(port: int, path: str = "") -> Origin:
    return Origin(f"http://127.0.0.1:{port}{path}")


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request head and its Content-Length body (what the client under test sends)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + (await reader.readexactly(length) if length else b"")


async def until(predicate, timeout: float = 2.0) -> None:
    """Wait (polling the loop) until `predicate()` holds; fails the test after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def idle_count(client: HTTPClient) -> int:
    return sum(len(conns) for conns in client._idle.values())
