"""The engines' HTTP client (`proxy/engine/connections.py`) under cancellation and failure, against
real servers on loopback: the connection count (`HTTPClient.open`) never drifts and never exceeds the
limit, slot waiters are woken once and first come first served and leave no trace when cancelled,
cancellation at each await point (connect, head, body) leaves the client usable, `close()` with
connections in use, and no connection leaks on the error paths (health checks, aborts, heads that
cannot be encoded). Tests whose docstring starts with "Regression" failed before their fix."""

from __future__ import annotations

import asyncio
import random

import pytest
from aiohttp import web

from proxy.engine.client import Engine
from proxy.engine.connections import (ClientError, ConnectFailed, HTTPClient,
                                      Origin)
from tests.proxy.http_servers import aiohttp_server, idle_count, origin_of, raw_server, read_request, until


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
        resp = await asyncio.wait_for(second, 10)
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
            resp = await client.request(origins[name], "GET", f"/{kind}/{delay_ms}", read_timeout=10)
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
            *(client.request(origins[b"a"], "GET", "/ok/50") for _ in range(3))), 10)
        assert [await r.read() for r in resps] == [b"a"] * 3 and client.open == 3
    finally:
        watcher.cancel()
        await client.close()
        server_a.close()
        server_b.close()


async def test_slot_waiters_are_served_first_come_first_served():
    """Regression: a woken waiter that found its slot taken (a newcomer barged in) went back
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
    """Regression: `_closed` was checked only on entry, so a waiter opened a NEW connection
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
            await asyncio.wait_for(waiting, 10)
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
    """Regression: check_health/abort did not release the Response when `resp.read()` was
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


@pytest.mark.slow
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
    """An --engine-url such as http://host:8000/モデル: the request line is ASCII (before the fix
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
        resp = await asyncio.wait_for(client.request(origin, "GET", "/health"), 10)
        assert await resp.read(1) == b"ok" and paths == ["/%E3%83%A2%E3%83%87%E3%83%AB/health"]
        assert client.open == 1 and idle_count(client) == 1
    finally:
        await client.close()
        await server.close()


async def test_a_request_head_that_cannot_be_encoded_takes_no_slot():
    """Regression: the head was built and encoded after _acquire, outside its try, so a head
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


