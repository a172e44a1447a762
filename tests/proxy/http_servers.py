"""Throwaway HTTP servers on loopback for the engine-client tests: an aiohttp app answering every
path with one handler (well-behaved answers), and raw asyncio servers (answers that misbehave or
must be timed to the byte)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestServer


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
