"""The engines' HTTP client (`proxy/engine/connections.py`) against real servers on loopback: an
aiohttp server for well-behaved answers, raw asyncio servers for the misbehaving ones."""

from __future__ import annotations

import asyncio
import ssl

import pytest
import trustme
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.engine.connections import (PAUSE_READING_BYTES, BadResponse, ConnectFailed, ConnectionBroken,
                                      Disconnected, HTTPClient, Origin)
from tests.proxy.http_servers import aiohttp_server, raw_server
from tests.proxy.loopback import free_port


async def raw_origin(on_connection) -> tuple[asyncio.Server, Origin]:
    server, port = await raw_server(on_connection)
    return server, Origin(f"http://127.0.0.1:{port}")


def origin_of(server: TestServer) -> Origin:
    return Origin(f"http://127.0.0.1:{server.port}")


async def test_requests_reuse_one_kept_alive_connection_and_carry_headers_and_body():
    seen = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.transport.get_extra_info("peername")[1], request.method, request.path,
                     request.headers.get("X-Test"), request.host, await request.read()))
        return web.json_response({"n": len(seen)})

    server = await aiohttp_server(handler)
    client = HTTPClient()
    try:
        for i in range(3):
            resp = await client.request(origin_of(server), "POST", "/echo", body=b"body%d" % i,
                                        headers=b"X-Test: yes\r\n")
            assert resp.status == 200 and resp.headers["content-type"].startswith("application/json")
            assert await resp.read() == b'{"n": %d}' % (i + 1)
        assert len({port for port, *_ in seen}) == 1  # one connection for the three
        assert [rest for _, *rest in seen] == [
            ["POST", "/echo", "yes", f"127.0.0.1:{server.port}", b"body%d" % i] for i in range(3)]
        assert client.open == 1
    finally:
        await client.close()
        await server.close()
    assert client.open == 0


async def test_base_path_and_host_header_of_an_origin():
    assert Origin("http://engine:8000/prefix/").base_path == "/prefix"
    assert Origin("http://engine:80").host_header == "engine"
    assert Origin("http://engine:8000").host_header == "engine:8000"
    assert Origin("https://engine").port == 443 and Origin("https://engine").ssl is not None
    assert Origin("http://[::1]:9000").host_header == "[::1]:9000"
    with pytest.raises(ValueError):
        Origin("ftp://engine")
    for url, why in [("http://user:secret@engine:8000", "credentials"), ("http://engine:8000/?x=1", "query"),
                     ("http://engine:8000/#top", "fragment"), ("http://engine:0", "port 0")]:
        with pytest.raises(ValueError, match=why):
            Origin(url)
    assert Origin("http://bücher.example:8000").host == "xn--bcher-kva.example"
    assert Origin("http://engine:8000/モデル").base_path == "/%E3%83%A2%E3%83%87%E3%83%AB"

    paths = []

    async def handler(request: web.Request) -> web.Response:
        paths.append(request.path)
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient()
    try:
        resp = await client.request(Origin(f"http://127.0.0.1:{server.port}/v2/"), "GET", "/health")
        assert await resp.read() == b"ok" and paths == ["/v2/health"]
    finally:
        await client.close()
        await server.close()


async def test_connection_limit_queues_requests_until_a_connection_is_released():
    gates: list[asyncio.Event] = []

    async def handler(request: web.Request) -> web.Response:
        gate = asyncio.Event()
        gates.append(gate)
        await gate.wait()
        return web.Response(text=str(len(gates)))

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=2)
    try:
        tasks = [asyncio.create_task(client.request(origin_of(server), "GET", "/")) for _ in range(3)]
        await asyncio.sleep(0.3)
        assert len(gates) == 2 and client.open == 2  # the third waits for a connection
        gates[0].set()
        first = await asyncio.wait_for(asyncio.shield(tasks[0]), 5)
        await first.read()  # read to its end: the connection goes back and the third request takes it
        await asyncio.sleep(0.3)
        assert len(gates) == 3 and client.open == 2
        for gate in gates:
            gate.set()
        for task in tasks[1:]:
            await (await task).read()
        assert client.open == 2
    finally:
        await client.close()
        await server.close()


async def one_connection_held_one_request_waiting():
    """A client limited to one connection, held by a request the server answers (b"ok") once the
    gate is set, and a second request waiting for that connection:
    (server, client, gate, holder task, waiting task)."""
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        await gate.wait()
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    holder = asyncio.create_task(client.request(origin_of(server), "GET", "/"))
    await asyncio.sleep(0.2)
    waiting = asyncio.create_task(client.request(origin_of(server), "GET", "/"))
    await asyncio.sleep(0.1)
    return server, client, gate, holder, waiting


async def test_cancelled_while_waiting_for_a_connection_leaves_no_trace():
    server, client, gate, holder, waiting = await one_connection_held_one_request_waiting()
    try:
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not client._slot_waiters
        gate.set()
        assert await (await holder).read() == b"ok"
        resp = await client.request(origin_of(server), "GET", "/")  # the slot is usable again
        assert await resp.read() == b"ok" and client.open == 1
    finally:
        await client.close()
        await server.close()


async def test_idle_connections_close_after_the_keepalive_timeout():
    ports = []

    async def handler(request: web.Request) -> web.Response:
        ports.append(request.transport.get_extra_info("peername")[1])
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient(keepalive_timeout=0.2)
    try:
        await (await client.request(origin_of(server), "GET", "/")).read()
        assert client.open == 1
        await asyncio.sleep(0.5)
        assert client.open == 0
        await (await client.request(origin_of(server), "GET", "/")).read()
        assert len(set(ports)) == 2
    finally:
        await client.close()
        await server.close()


async def test_a_body_left_unread_closes_its_connection_instead_of_reusing_it():
    ports = []

    async def handler(request: web.Request) -> web.StreamResponse:
        ports.append(request.transport.get_extra_info("peername")[1])
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b"part one, ")
        await asyncio.sleep(0.2)
        await resp.write(b"part two")
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient()
    try:
        resp = await client.request(origin_of(server), "GET", "/")
        assert await resp.readany() == b"part one, "
        resp.release()  # before the end: the connection cannot carry another request
        assert client.open == 0
        resp = await client.request(origin_of(server), "GET", "/")
        assert await resp.read() == b"part one, part two"
        assert len(set(ports)) == 2 and client.open == 1
    finally:
        await client.close()
        await server.close()


async def test_connection_refused_is_connect_failed():
    client = HTTPClient()
    try:
        with pytest.raises(ConnectFailed):
            await client.request(Origin(f"http://127.0.0.1:{free_port()}"), "GET", "/")
        assert client.open == 0
    finally:
        await client.close()


async def test_read_timeout_waiting_for_the_head_closes_the_connection():
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")

    server = await aiohttp_server(handler)
    client = HTTPClient()
    try:
        with pytest.raises(TimeoutError):
            await client.request(origin_of(server), "GET", "/", read_timeout=0.2)
        assert client.open == 0
    finally:
        await client.close()
        await server.close()


async def test_kept_alive_connection_closed_by_the_server_before_answering_is_disconnected():
    requests = 0

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await reader.readuntil(b"\r\n\r\n")
        requests += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")  # the second request on this connection: no answer
        writer.close()

    server, origin = await raw_origin(on_connection)
    client = HTTPClient()
    try:
        assert await (await client.request(origin, "GET", "/")).read() == b"ok"
        with pytest.raises(Disconnected):
            await client.request(origin, "GET", "/")
        assert client.open == 0
    finally:
        await client.close()
        server.close()


async def test_body_cut_mid_way_gives_what_arrived_then_connection_broken():
    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()

    server, origin = await raw_origin(on_connection)
    client = HTTPClient()
    try:
        resp = await client.request(origin, "GET", "/")
        assert await resp.readany() == b"hello"
        with pytest.raises(ConnectionBroken):
            await resp.readany()
        resp.release()
        assert client.open == 0
    finally:
        await client.close()
        server.close()


@pytest.mark.parametrize("answer", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
async def test_bytes_that_are_not_http_are_a_bad_response(answer):
    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        await asyncio.sleep(0.5)
        writer.close()

    server, origin = await raw_origin(on_connection)
    client = HTTPClient()
    try:
        with pytest.raises(BadResponse):
            resp = await client.request(origin, "GET", "/", read_timeout=10)
            await resp.read(2)
        assert client.open == 0
    finally:
        await client.close()
        server.close()


async def test_a_reader_that_falls_behind_pauses_the_socket_and_loses_nothing():
    chunk = bytes(range(256)) * 256  # 64 KiB
    total = 32

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(total):
            await resp.write(chunk)
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient()
    try:
        resp = await client.request(origin_of(server), "GET", "/")
        await asyncio.sleep(0.5)  # the server writes 2 MiB; we read none of it
        conn = resp._conn
        assert conn.paused and PAUSE_READING_BYTES < conn.parser.buffered < total * len(chunk)
        body = await resp.read(5)
        assert body == chunk * total and not conn.paused
    finally:
        await client.close()
        await server.close()


async def test_unsolicited_bytes_on_an_idle_connection_close_it():
    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")  # nobody asked
        await writer.drain()
        await asyncio.sleep(1)
        writer.close()

    server, origin = await raw_origin(on_connection)
    client = HTTPClient()
    try:
        assert await (await client.request(origin, "GET", "/")).read() == b"ok"
        assert client.open == 1
        await asyncio.sleep(0.3)
        assert client.open == 0
    finally:
        await client.close()
        server.close()


async def https_server(handler, ca: trustme.CA) -> tuple[web.AppRunner, int]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def test_https_engines_are_reached_over_tls_verified_against_the_system_cas(tmp_path, monkeypatch):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=f"{request.scheme} {request.host} {await request.text()}")

    ca = trustme.CA()
    runner, port = await https_server(handler, ca)
    client = HTTPClient()
    try:
        # not trusted yet: the certificate check fails, as a connection failure
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await client.request(Origin(f"https://127.0.0.1:{port}"), "GET", "/")
        assert client.open == 0
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))  # as an operator would
        origin = Origin(f"https://localhost:{port}")
        for _ in range(2):
            resp = await client.request(origin, "POST", "/x", body=b"over tls")
            assert await resp.read() == f"https localhost:{port} over tls".encode()
        assert client.open == 1  # kept alive over TLS too
    finally:
        await client.close()
        await runner.cleanup()


async def test_closing_the_client_fails_the_requests_waiting_for_a_connection_at_once():
    server, client, gate, holder, waiting = await one_connection_held_one_request_waiting()
    try:
        assert not waiting.done()
        await client.close()
        with pytest.raises(ConnectFailed, match="closed"):
            await asyncio.wait_for(waiting, 1)  # not when the holder's slot frees
        gate.set()
        assert await (await holder).read() == b"ok"  # the request in flight ends normally
        assert client.open == 0
    finally:
        gate.set()
        await server.close()
