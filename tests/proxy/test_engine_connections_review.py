"""Adversarial review of the engines' HTTP client (`proxy/engine/connections.py`) and of its use in
`proxy/engine/client.py`, against real servers on loopback (aiohttp's test server for well-behaved
answers, raw asyncio servers for the ones that misbehave or must be timed exactly).

What is checked: the connection count (`HTTPClient.open`) never drifts and never exceeds the limit,
slot waiters are woken (once) and leave no trace when cancelled, cancellation at each await point
(connect, head, body) leaves the client usable, connections are reused only after a whole answer,
servers that close between two requests, `close()` with connections in use, IPv6 and origins.

Tests whose docstring says "Failed at 100f327" are regression tests for the bugs this review
found; all are fixed in 476515e. The others check properties that already held.
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl

import pytest
import trustme
from aiohttp import web

from proxy.engine.client import Engine, EngineError, EngineTimeouts
from proxy.engine.connections import (ClientError, ConnectFailed, ConnectionBroken, Disconnected, HTTPClient,
                                      Origin)
from tests.proxy.http_servers import aiohttp_server, raw_server

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


# -- cancellation at each await point ------------------------------------------------------------

async def test_cancelled_and_timed_out_tls_connect_free_the_slot():
    """A server that accepts TCP but never answers the TLS handshake: `request` hangs in connect."""
    accepted = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()  # never answers the ClientHello

    server, port = await raw_server(on_connection)
    client = HTTPClient(limit=1)
    origin = Origin(f"https://127.0.0.1:{port}")
    try:
        task = asyncio.create_task(client.request(origin, "GET", "/"))
        await until(lambda: len(accepted) == 1)
        assert client.open == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert client.open == 0 and not client._slot_waiters
        # the connect timeout: a ConnectFailed, and the one slot is free again
        with pytest.raises(ConnectFailed, match="timed out"):
            await client.request(origin, "GET", "/", connect_timeout=0.2)
        assert client.open == 0 and len(accepted) == 2
    finally:
        await client.close()
        for writer in accepted:
            writer.close()
        server.close()


async def test_cancelled_while_waiting_for_the_head_closes_the_connection_and_frees_the_slot():
    ports = []
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        ports.append(request.transport.get_extra_info("peername")[1])
        if request.path == "/slow":
            await gate.wait()
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    origin = origin_of(server.port)
    try:
        assert await (await client.request(origin, "GET", "/fast")).read() == b"ok"
        task = asyncio.create_task(client.request(origin, "GET", "/slow"))
        await until(lambda: len(ports) == 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert client.open == 0 and idle_count(client) == 0
        # the cancelled request's connection is not reused: its answer may still come
        assert await (await client.request(origin, "GET", "/fast")).read() == b"ok"
        assert ports[0] == ports[1] and ports[2] != ports[1]
        assert client.open == 1
    finally:
        gate.set()
        await client.close()
        await server.close()


async def test_cancelled_body_read_leaves_no_waiter_and_release_closes_the_connection():
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b"first")
        await asyncio.sleep(3)
        await resp.write(b"never read")
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    try:
        resp = await client.request(origin_of(server.port), "GET", "/")
        assert await resp.readany() == b"first"
        task = asyncio.create_task(resp.readany())
        await asyncio.sleep(0.05)
        conn = resp._conn
        assert conn.waiter is not None  # the read waits on it
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert conn.waiter is None
        resp.release()  # not at the end of the body: closed, not reused
        assert conn.closed and client.open == 0 and idle_count(client) == 0
    finally:
        await client.close()
        await server.close()


async def test_a_timeout_that_did_not_fire_never_fires_later_on_the_reused_connection():
    async def handler(request: web.Request) -> web.Response:
        if request.path == "/slow":
            await asyncio.sleep(0.4)
        return web.Response(text=request.path)

    server = await aiohttp_server(handler)
    client = HTTPClient()
    origin = origin_of(server.port)
    try:
        resp = await client.request(origin, "GET", "/fast", read_timeout=0.2)
        assert await resp.read(0.2) == b"/fast"
        conn = resp._conn
        await asyncio.sleep(0.3)  # past the first request's timeouts
        resp = await client.request(origin, "GET", "/slow")  # no timeout: waits 0.4 s
        assert resp._conn is conn and await resp.read() == b"/slow"
        # and a timeout that should fire does, on a reused connection too
        with pytest.raises(TimeoutError):
            await client.request(origin, "GET", "/slow", read_timeout=0.1)
        assert client.open == 0
    finally:
        await client.close()
        await server.close()


# -- slot waiters --------------------------------------------------------------------------------

async def test_a_woken_waiter_cancelled_before_it_runs_passes_its_slot_on():
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/hold":
            await gate.wait()
        return web.Response(text=request.path)

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    origin = origin_of(server.port)
    try:
        holder = asyncio.create_task(client.request(origin, "GET", "/hold"))
        await until(lambda: client.open == 1)
        first = asyncio.create_task(client.request(origin, "GET", "/first"))
        second = asyncio.create_task(client.request(origin, "GET", "/second"))
        await until(lambda: len(client._slot_waiters) == 2)
        gate.set()
        resp = await holder
        assert await resp.readany() == b"/hold" and await resp.readany() == b""
        resp.release()  # wakes `first` (its future is set) ...
        first.cancel()  # ... which is cancelled before it runs: `second` must get the connection
        resp = await asyncio.wait_for(second, 2)
        assert await resp.read() == b"/second"
        assert first.cancelled() and not client._slot_waiters and client.open == 1
    finally:
        gate.set()
        await client.close()
        await server.close()


async def test_an_idle_connection_to_another_engine_makes_room_at_once():
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    one, two = await aiohttp_server(handler), await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    try:
        assert await (await client.request(origin_of(one.port), "GET", "/")).read() == b"ok"
        assert idle_count(client) == 1
        resp = await asyncio.wait_for(client.request(origin_of(two.port), "GET", "/"), 1)
        assert await resp.read() == b"ok"
        assert client.open == 1 and list(client._idle[origin_of(two.port).key]) and \
            not client._idle[origin_of(one.port).key]
    finally:
        await client.close()
        await one.close()
        await two.close()


async def test_random_cancellations_and_failures_never_exceed_the_limit_nor_leak_a_slot():
    """Two origins, limit 3, 60 requests of which some are cancelled at random points and some
    get a broken answer: no more than 3 connections are open at once (on the servers' side: those
    whose client has not closed them), every request that is not cancelled ends, and at the end the
    count matches the idle connections."""
    readers: list[asyncio.StreamReader] = []
    peak = 0

    def server_for(name: bytes):
        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal peak
            readers.append(reader)
            peak = max(peak, sum(not r.at_eof() for r in readers))  # EOF: the client closed its side
            try:
                while True:
                    head = await read_request(reader)
                    delay = float(head.split(b" ")[1].rsplit(b"/", 1)[1]) / 1000
                    try:  # wait `delay`, or until the client hangs up
                        if await asyncio.wait_for(reader.read(1), delay) == b"":
                            break
                    except asyncio.TimeoutError:
                        pass
                    if b"/cut/" in head:
                        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
                        await writer.drain()
                        break
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(name), name))
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                reader.feed_eof()  # (for the count above) this one is over
                writer.close()
        return on_connection

    (server_a, port_a), (server_b, port_b) = await raw_server(server_for(b"a")), await raw_server(server_for(b"b"))
    origins = {b"a": origin_of(port_a), b"b": origin_of(port_b)}
    client = HTTPClient(limit=3, keepalive_timeout=0.5)
    rng = random.Random(1234)
    outcomes: list[str] = []
    counts: list[int] = []

    async def watch() -> None:  # the count, sampled at every loop iteration
        while True:
            counts.append(client.open)
            await asyncio.sleep(0)

    async def one(name: bytes, kind: str, delay_ms: int) -> None:
        try:
            resp = await client.request(origins[name], "GET", f"/{kind}/{delay_ms}", read_timeout=2)
            try:
                body = await resp.read(2)
            finally:
                resp.release()
            assert body == name
            outcomes.append("ok")
        except ClientError:
            assert kind == "cut"
            outcomes.append("broken")

    watcher = asyncio.create_task(watch())
    try:
        tasks = []
        planned = {"ok": 0, "broken": 0, "cancelled": 0}
        for _ in range(60):
            name = rng.choice([b"a", b"b"])
            kind = rng.choice(["ok", "ok", "ok", "cut"])
            if rng.random() < 0.3:
                # the answer takes far longer than the cancellation, however slow the machine
                task = asyncio.create_task(one(name, kind, 2000))
                asyncio.get_running_loop().call_later(rng.random() * 0.05, task.cancel)
                planned["cancelled"] += 1
            else:
                task = asyncio.create_task(one(name, kind, rng.randrange(0, 30)))
                planned["ok" if kind == "ok" else "broken"] += 1
            tasks.append(task)
            await asyncio.sleep(rng.random() * 0.005)
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
        assert [r for r in results if not isinstance(r, (asyncio.CancelledError, type(None)))] == []
        assert cancelled == planned["cancelled"] > 0
        assert (outcomes.count("ok"), outcomes.count("broken")) == (planned["ok"], planned["broken"])
        assert min(counts) >= 0 and max(counts) == 3  # used to the full, never past it
        assert peak <= 3
        assert not client._slot_waiters and client.open == idle_count(client)
        # after the storm the client still works at full width
        resps = await asyncio.wait_for(asyncio.gather(
            *(client.request(origins[b"a"], "GET", "/ok/50") for _ in range(3))), 2)
        assert [await r.read() for r in resps] == [b"a"] * 3 and client.open == 3
    finally:
        watcher.cancel()
        await client.close()
        server_a.close()
        server_b.close()


async def test_slot_waiters_are_served_first_come_first_served():
    """Failed at 100f327: a woken waiter that found its slot taken (a newcomer barged in) went back
    to the END of the queue, so a request could starve under load."""
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=request.path)

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    origin = origin_of(server.port)
    served: list[str] = []

    async def call(path: str) -> None:
        resp = await client.request(origin, "GET", path)
        served.append(path)
        await resp.read()

    try:
        holder = await client.request(origin, "GET", "/holder")
        await asyncio.sleep(0.05)  # the whole answer is in
        waiters = [asyncio.create_task(call("/w1"))]
        await until(lambda: len(client._slot_waiters) == 1)
        waiters.append(asyncio.create_task(call("/w2")))
        await until(lambda: len(client._slot_waiters) == 2)
        # a new request arrives in the same loop iteration as the holder's release
        newcomer = asyncio.create_task(call("/new"))
        assert await holder.read() == b"/holder"  # the body is in: no suspension, release wakes /w1
        await asyncio.wait_for(asyncio.gather(newcomer, *waiters), 3)
        # /w1 waited longest; whoever else gets in, it must not be served after /w2
        assert served.index("/w1") < served.index("/w2"), served
    finally:
        await client.close()
        await server.close()


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
            resp = await client.request(origin_of(port), "POST", "/", body=b"x", read_timeout=2)
            assert resp.status == 200 and await resp.read(2) == b"ok"
        assert connections == 1 and client.open == 1
        with pytest.raises(ConnectionBroken):
            await client.request(origin_of(port), "POST", "/", body=b"x", read_timeout=2)
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


# -- close() -------------------------------------------------------------------------------------

async def test_close_with_a_connection_in_use_lets_it_finish_then_closes_it():
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b"one ")
        await gate.wait()
        await resp.write(b"two")
        return resp

    server = await aiohttp_server(handler)
    client = HTTPClient()
    origin = origin_of(server.port)
    try:
        resp = await client.request(origin, "GET", "/")
        assert await resp.readany() == b"one "
        await client.close()
        assert client.open == 1  # in use: not cut under its reader
        gate.set()
        assert await resp.read(2) == b"two"
        assert client.open == 0 and idle_count(client) == 0  # released after close(): closed
        with pytest.raises(ConnectFailed):
            await client.request(origin, "GET", "/")
    finally:
        gate.set()
        await client.close()
        await server.close()


async def test_a_request_waiting_for_a_slot_when_the_client_closes_opens_no_connection():
    """Failed at 100f327: `_closed` was checked only on entry, so a waiter opened a NEW connection
    after close() once a slot freed."""
    connections = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal connections
        connections += 1
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    origin = origin_of(server.port)
    try:
        holder = await client.request(origin, "GET", "/")
        waiting = asyncio.create_task(client.request(origin, "GET", "/"))
        await until(lambda: len(client._slot_waiters) == 1)
        await client.close()
        assert await holder.read() == b"ok"  # released after close(): closed, which frees the slot
        with pytest.raises(ConnectFailed):
            await asyncio.wait_for(waiting, 2)
        assert connections == 1
    finally:
        await client.close()
        await server.close()


# -- leaks on the error paths --------------------------------------------------------------------

async def head_then_stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request with a head and part of its body, then nothing (the socket stays open)."""
    try:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


@pytest.mark.parametrize("call", ["check_health", "abort"])
async def test_an_interrupted_health_check_or_abort_frees_its_connection(call):
    """Failed at 100f327: check_health/abort did not release the Response when `resp.read()` was
    interrupted, so the connection stayed counted in `open` until the server closed it (at the
    limit, later requests waited for it forever)."""
    server, port = await raw_server(head_then_stall)
    client = HTTPClient(limit=1)
    engine = Engine(f"http://127.0.0.1:{port}", client)
    try:
        coro = engine.check_health() if call == "check_health" else engine.abort(["generate-tokens-x"])
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(coro, 0.3)  # e.g. the pool's shutdown cancelling its health task
        await asyncio.sleep(0.05)
        assert client.open == 0
    finally:
        await client.close()
        server.close()


async def test_an_abort_that_times_out_in_the_body_frees_its_connection():
    """Failed at 100f327 (the same missing release, through abort's own ABORT_TIMEOUT)."""
    server, port = await raw_server(head_then_stall)
    client = HTTPClient(limit=1)
    engine = Engine(f"http://127.0.0.1:{port}", client)
    try:
        assert await engine.abort(["generate-tokens-x"]) is False  # after ABORT_TIMEOUT (5 s)
        await asyncio.sleep(0.05)
        assert client.open == 0
    finally:
        await client.close()
        server.close()


async def test_a_base_path_outside_ascii_is_refused_or_sent_percent_encoded():
    """An --engine-url such as http://host:8000/モデル: the request line is ASCII (at HEAD 100f327
    the path went to str.encode("latin-1") after the connection was taken: UnicodeEncodeError, a
    500, and the slot stayed counted)."""
    paths = []

    async def handler(request: web.Request) -> web.Response:
        paths.append(request.raw_path)
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    try:
        try:
            origin = Origin(f"http://127.0.0.1:{server.port}/モデル")
        except ValueError:  # refused up front: fine too
            return
        resp = await asyncio.wait_for(client.request(origin, "GET", "/health"), 2)
        assert await resp.read(1) == b"ok" and paths == ["/%E3%83%A2%E3%83%87%E3%83%AB/health"]
        assert client.open == 1 and idle_count(client) == 1
    finally:
        await client.close()
        await server.close()


async def test_a_request_head_that_cannot_be_encoded_takes_no_slot():
    """Failed at 100f327: the head was built and encoded after _acquire, outside its try, so a head
    that cannot be encoded (a path outside latin-1) raised with the connection taken: `open` stayed
    1 and, at the limit, later requests waited forever. (Latent: Engine passes ASCII paths.)"""
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    server = await aiohttp_server(handler)
    client = HTTPClient(limit=1)
    try:
        with pytest.raises(UnicodeEncodeError):
            await client.request(origin_of(server.port), "GET", "/モデル")
        assert client.open == 0
    finally:
        await client.close()
        await server.close()


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
            await client.request(origin_of(port), "POST", "/a", body=b"x", read_timeout=2)
        assert client.open == 0 and len(connections) == 1
        resp = await asyncio.wait_for(client.request(origin_of(port), "POST", "/a", body=b"x", read_timeout=2), 2)
        assert resp.status == 200 and await resp.read(1) == b"" and len(connections) == 2
    finally:
        await client.close()
        server.close()


async def test_a_health_check_on_a_connection_the_engine_just_closed_still_finds_it_healthy():
    """Failed at 100f327: no second try after Disconnected, so a healthy engine was reported down
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
    """Failed at 100f327: next() raised the 502 "closed the stream" EngineError; routes/openai.py
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
        assert await asyncio.wait_for(reader, 2) is None
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
    """Failed at 100f327: Connection.close() did not wake a waiting reader; connection_lost comes
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
    """Failed at 100f327: `_read_to_eof` bounded each read after [DONE] (1 s) but not the whole
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
        assert await asyncio.wait_for(stream.next(), 2) is None  # [DONE] is in: the stream is over
    finally:
        if stream is not None:
            stream.close()
        await client.close()
        await server.close()
