"""The engines' HTTP client (`proxy/engine/connections.py`, `proxy/engine/client.py`) reusing its
kept-alive connections, against real servers on loopback: a connection is reused only after a whole
answer, servers that close exactly between two requests cost the next request nothing, an
`EngineStream` gives its connection back (or drops it) as it ends, origins (default ports, host
headers, IPv6) and TLS. Tests whose docstring starts with "Regression" failed before their fix."""

from __future__ import annotations

import asyncio
import socket
import ssl

import pytest
import trustme
from aiohttp import web

from proxy.engine.client import Engine, EngineError, EngineTimeouts
from proxy.engine.connections import (ClientError, ConnectionBroken, Disconnected, HTTPClient,
                                      Origin)
from tests.proxy.http_servers import OK_ANSWER, aiohttp_server, idle_count, origin_of, raw_server, read_request, until


# -- reuse only after a whole answer -------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
])
async def test_answers_that_end_the_connection_are_not_reused_even_if_the_server_keeps_it_open(answer):
    connections = 0

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                await read_request(reader)
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server, port = await raw_server(on_connection)
    client = HTTPClient()
    try:
        for _ in range(2):
            assert await (await client.request(origin_of(port), "GET", "/")).read() == b"ok"
            assert client.open == 0
        assert connections == 2
    finally:
        await client.close()
        server.close()


async def test_interim_answers_are_skipped_and_a_cut_after_one_is_broken_not_disconnected():
    """1xx answers come before the real one (the connection stays reusable); one is a byte of the
    answer: a cut after it must not say "send it again" (Disconnected) but ConnectionBroken."""
    connections = 0

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            await read_request(reader)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 102 Processing\r\n\r\n" + OK_ANSWER)
            await writer.drain()
            await read_request(reader)
            writer.write(OK_ANSWER)
            await writer.drain()
            await read_request(reader)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server, port = await raw_server(on_connection)
    client = HTTPClient()
    try:
        for _ in range(2):
            resp = await client.request(origin_of(port), "POST", "/", body=b"x", read_timeout=10)
            assert resp.status == 200 and await resp.read(2) == b"ok"
        assert connections == 1 and client.open == 1
        with pytest.raises(ConnectionBroken):
            await client.request(origin_of(port), "POST", "/", body=b"x", read_timeout=10)
        assert client.open == 0
    finally:
        await client.close()
        server.close()


async def test_head_and_204_answers_keep_the_connection_reusable():
    ports = []

    async def handler(request: web.Request) -> web.Response:
        ports.append(request.transport.get_extra_info("peername")[1])
        if request.path == "/empty":
            return web.Response(status=204)
        return web.Response(text="a body of some length")

    server = await aiohttp_server(handler)
    client = HTTPClient()
    origin = origin_of(server.port)
    try:
        resp = await client.request(origin, "HEAD", "/")
        assert resp.status == 200 and resp.headers["content-length"] == "21"
        assert await resp.read(1) == b""
        resp = await client.request(origin, "GET", "/empty")
        assert resp.status == 204 and await resp.read(1) == b""
        assert await (await client.request(origin, "GET", "/")).read(1) == b"a body of some length"
        assert len(ports) == 3 and len(set(ports)) == 1 and client.open == 1
    finally:
        await client.close()
        await server.close()


async def test_a_server_that_closes_an_idle_connection_costs_the_next_request_nothing():
    connections = 0

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(OK_ANSWER)
        await writer.drain()
        await asyncio.sleep(0.05)  # a short keep-alive on the server's side
        writer.close()

    server, port = await raw_server(on_connection)
    client = HTTPClient()
    try:
        assert await (await client.request(origin_of(port), "GET", "/")).read() == b"ok"
        await until(lambda: client.open == 0)  # the FIN took it out of the idle list
        assert idle_count(client) == 0
        assert await (await client.request(origin_of(port), "GET", "/")).read() == b"ok"
        assert connections == 2
    finally:
        await client.close()
        server.close()


# -- servers that close exactly between two requests ---------------------------------------------

def close_on_second_request():
    """Per connection: answer the first request, then take the second and close without answering
    (the engine's keep-alive timer firing as our request reaches it)."""
    connections = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            await read_request(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    return on_connection, connections


async def test_a_request_on_a_connection_the_server_drops_is_disconnected_and_the_slot_is_freed():
    on_connection, connections = close_on_second_request()
    server, port = await raw_server(on_connection)
    client = HTTPClient(limit=1)
    try:
        resp = await client.request(origin_of(port), "POST", "/a", body=b"x")
        assert resp.status == 200 and await resp.read() == b"" and client.open == 1
        with pytest.raises(Disconnected):  # the one error that says "send it again"
            await client.request(origin_of(port), "POST", "/a", body=b"x", read_timeout=10)
        assert client.open == 0 and len(connections) == 1
        resp = await asyncio.wait_for(client.request(origin_of(port), "POST", "/a", body=b"x", read_timeout=10), 10)
        assert resp.status == 200 and await resp.read(1) == b"" and len(connections) == 2
    finally:
        await client.close()
        server.close()


async def test_a_health_check_on_a_connection_the_engine_just_closed_still_finds_it_healthy():
    """Regression: no second try after Disconnected, so a healthy engine was reported down
    and the pool opened its circuit (a lone engine then refused every request for the cooldown)."""
    on_connection, connections = close_on_second_request()
    server, port = await raw_server(on_connection)
    client = HTTPClient()
    engine = Engine(f"http://127.0.0.1:{port}", client, timeouts=EngineTimeouts(connect=1))
    try:
        assert await engine.check_health() is True
        assert await engine.check_health() is True  # lands on the connection the server drops
    finally:
        await client.close()
        server.close()


# -- EngineStream over this client ---------------------------------------------------------------

async def test_a_stream_closed_by_us_while_its_reader_waits_ends_quietly():
    """Regression: next() raised the 502 "closed the stream" EngineError; routes/openai.py
    `_merged` aborts one prompt's stream at a stop string while its pump reads it, and re-raised that
    error, failing the whole multi-prompt response."""
    aborts = []
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path.endswith("abort_requests"):
            aborts.append(await request.json())
            return web.json_response({})
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'data: {"request_id": "generate-tokens-r", "choices": [{"index": 0, "token_ids": [1]}]}\n\n')
        await gate.wait()
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient()
    engine = Engine(f"http://127.0.0.1:{server.port}", client)
    try:
        stream = await engine.open_stream({"request_id": "r", "token_ids": [1], "stream": True})
        assert (await stream.next())["choices"][0]["token_ids"] == [1]
        reader = asyncio.create_task(stream.next())
        await asyncio.sleep(0.05)
        assert stream.abort() is True
        assert await asyncio.wait_for(reader, 10) is None
        assert stream.error is None
        await until(lambda: aborts == [{"request_ids": ["generate-tokens-r"]}])  # and the engine is told
    finally:
        gate.set()
        await client.close()
        await server.close()


async def test_a_finished_stream_gives_its_connection_back_for_the_next_request():
    ports = []

    async def handler(request: web.Request) -> web.StreamResponse:
        ports.append(request.transport.get_extra_info("peername")[1])
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"index": 0, "token_ids": [7]}]}\n\n')
        await resp.write(b"data: [DONE]\n\n")
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    engine = Engine(f"http://127.0.0.1:{server.port}", client)
    try:
        for _ in range(3):
            stream = await engine.open_stream({"request_id": "r", "token_ids": [1], "stream": True})
            events = []
            while (event := await stream.next()) is not None:
                events.append(event)
            assert [e["choices"][0]["token_ids"] for e in events] == [[7]] and stream.finished
        assert len(ports) == 3 and len(set(ports)) == 1 and client.open == 1
    finally:
        await client.close()
        await server.close()


async def test_a_stream_whose_engine_stalls_times_out_and_frees_its_connection():
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path.endswith("abort_requests"):
            return web.json_response({})
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"index": 0, "token_ids": [7]}]}\n\n')
        await asyncio.sleep(5)
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    engine = Engine(f"http://127.0.0.1:{server.port}", client,
                    timeouts=EngineTimeouts(connect=1, first_token=1, idle=0.2))
    try:
        stream = await engine.open_stream({"request_id": "r", "token_ids": [1], "stream": True})
        assert await stream.next() is not None
        with pytest.raises(EngineError) as info:
            await stream.next()
        assert info.value.kind == "timeout" and info.value.started and info.value.status == 504
        await until(lambda: not engine._background)  # the abort post, on a new connection (limit 1)
        assert stream.closed and not client._slot_waiters
        assert client.open == idle_count(client) == 1  # the stream's connection closed, the abort's kept
    finally:
        await client.close()
        await server.close()


# -- origins -------------------------------------------------------------------------------------

def test_origins_default_ports_and_host_headers():
    assert Origin("https://engine:443").host_header == "engine"
    assert Origin("https://engine:80").host_header == "engine:80"
    assert Origin("http://engine:443").host_header == "engine:443"
    assert Origin("HTTP://Engine.Example:8000").key == ("http", "engine.example", 8000)
    assert Origin("http://[::1]").host_header == "[::1]" and Origin("http://[::1]").port == 80
    assert Origin("http://[2001:db8::1]:8000/p/").base_path == "/p"
    assert Origin("http://engine:8000/a/b//").base_path == "/a/b"
    assert Origin("http://engine:8000").base_path == ""
    for bad in ("engine:8000", "http://:8000", "http://engine:notaport", "http://engine:70000"):
        with pytest.raises(ValueError):
            Origin(bad)


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
async def test_an_ipv6_engine_is_reached_with_a_bracketed_host_header_and_kept_alive():
    seen = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.host, request.path, request.transport.get_extra_info("peername")[1]))
        return web.Response(text="v6")

    server = await aiohttp_server(handler, host="::1")
    client = HTTPClient()
    try:
        origin = Origin(f"http://[::1]:{server.port}/base")
        for _ in range(2):
            assert await (await client.request(origin, "GET", "/x")).read() == b"v6"
        assert [s[:2] for s in seen] == [(f"[::1]:{server.port}", "/base/x")] * 2
        assert seen[0][2] == seen[1][2] and client.open == 1
    finally:
        await client.close()
        await server.close()


async def test_a_slow_reader_over_tls_pauses_and_resumes_without_losing_a_byte(tmp_path, monkeypatch):
    chunk = bytes(range(256)) * 256  # 64 KiB
    total = 24

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(total):
            await resp.write(chunk)
        return resp

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    client = HTTPClient()
    try:
        origin = Origin(f"https://localhost:{port}")
        for _ in range(2):  # the second on the same (resumed, then reused) connection
            resp = await client.request(origin, "GET", "/")
            await asyncio.sleep(0.3)
            conn = resp._conn
            assert conn.paused
            received = bytearray()
            while data := await resp.readany(2):
                received += data
                await asyncio.sleep(0)  # a slow consumer: many pause/resume rounds
            resp.release()
            assert bytes(received) == chunk * total and not conn.paused
        assert client.open == 1
    finally:
        await client.close()
        await runner.cleanup()


async def test_closing_a_tls_response_wakes_its_waiting_reader_at_once(tmp_path, monkeypatch):
    """Regression: Connection.close() did not wake a waiting reader; connection_lost comes
    only after the TLS shutdown, which a hung or partitioned peer stretches to ssl_shutdown_timeout
    (30 s). An EngineStream aborted by routes/openai.py `_merged` (stop string) kept its pump, and
    so the whole multi-prompt response, waiting that long."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    writers: list[asyncio.StreamWriter] = []
    stop = asyncio.Event()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        writer.transport.pause_reading()  # a hung engine: it no longer reads (nor answers close_notify)
        await stop.wait()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    client = HTTPClient()
    try:
        resp = await client.request(Origin(f"https://localhost:{port}"), "GET", "/")
        assert await resp.readany() == b"hello"
        reader = asyncio.create_task(resp.readany())
        await asyncio.sleep(0.1)
        resp.close()  # as EngineStream.abort() does, from another task
        assert client.open == 0
        with pytest.raises(ClientError):
            await asyncio.wait_for(reader, 1)
    finally:
        stop.set()
        for writer in writers:
            writer.transport.abort()
        await client.close()
        server.close()
        await asyncio.sleep(0.05)


async def test_an_engine_that_keeps_talking_after_done_cannot_hold_the_stream_open():
    """Regression: `_read_to_eof` bounded each read after [DONE] (1 s) but not the whole
    drain, so an engine that kept sending bytes after [DONE] kept next() from returning None."""
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"index": 0, "token_ids": [7]}]}\n\ndata: [DONE]\n\n')
        for _ in range(40):  # then chatter, well within the 1 s per read, for 4 s
            await asyncio.sleep(0.1)
            await resp.write(b": still here\n\n")
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient()
    engine = Engine(f"http://127.0.0.1:{server.port}", client)
    stream = None
    try:
        stream = await engine.open_stream({"request_id": "r", "token_ids": [1], "stream": True})
        assert (await stream.next())["choices"][0]["token_ids"] == [7]
        assert await asyncio.wait_for(stream.next(), 10) is None  # [DONE] is in: the stream is over
    finally:
        if stream is not None:
            stream.close()
        await client.close()
        await server.close()
