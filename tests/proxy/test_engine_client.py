"""The engine client and pool against reference engines over real loopback HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest

from proxy.engine.client import Engine, EngineError, EngineTimeouts
from proxy.engine.pool import EnginePool
from proxy.reference_engine import REFERENCE, Faults
from tests.proxy.http_servers import aiohttp_server
from tests.proxy.loopback import free_port, url

def gen_request(request_id: str, stream: bool = True, **sampling):
    return {"request_id": request_id, "token_ids": [1, 2, 3], "sampling_params": sampling, "stream": stream}


async def drain(stream) -> list[dict]:
    events = []
    while (event := await stream.next()) is not None:
        events.append(event)
    return events


async def test_stream_and_full_agree(start_engine, engine_http):
    server = await start_engine()
    engine = Engine(url(server), engine_http)
    full = await engine.generate(gen_request("a", stream=False))
    stream = await engine.open_stream(gen_request("b"))
    events = await drain(stream)
    ids = [t for e in events for t in e["choices"][0]["token_ids"]]
    assert ids == full["choices"][0]["token_ids"]
    assert stream.finished and stream.engine_request_id == "generate-tokens-b"
    assert server.app[REFERENCE].aborted == []  # a finished stream is not aborted


async def test_abort_closes_stream_and_posts_abort(start_engine, engine_http):
    server = await start_engine(token_delay_ms=20)
    engine = Engine(url(server), engine_http)
    stream = await engine.open_stream(gen_request("ab"))
    assert (await stream.next())["choices"][0]["token_ids"]
    t0 = time.monotonic()
    assert stream.abort() is True
    ref = server.app[REFERENCE]
    for _ in range(100):
        if {a["via"] for a in ref.aborted} == {"abort_requests", "disconnect"}:
            break
        await asyncio.sleep(0.005)
    assert {a["via"] for a in ref.aborted} == {"abort_requests", "disconnect"}
    assert all(a["request_id"] == "generate-tokens-ab" for a in ref.aborted)
    assert max(a["time"] for a in ref.aborted) - t0 < 0.1
    assert await stream.next() is None


async def test_engine_4xx_passes_status_and_message(start_engine, engine_http):
    server = await start_engine()
    engine = Engine(url(server), engine_http)
    with pytest.raises(EngineError) as err:
        await engine.open_stream({**gen_request("x"), "sampling_params": {"stop": ["a"]}})
    assert err.value.status == 400 and not err.value.retryable
    assert "stop strings are not supported" in err.value.message


async def test_engine_5xx_is_retryable_bad_gateway(start_engine, engine_http):
    server = await start_engine(faults=Faults(fail_status=500))
    engine = Engine(url(server), engine_http)
    with pytest.raises(EngineError) as err:
        await engine.generate(gen_request("x", stream=False))
    assert err.value.status == 502 and err.value.retryable and err.value.kind == "status"


async def test_connection_refused(engine_http):
    engine = Engine(f"http://127.0.0.1:{free_port()}", engine_http)
    with pytest.raises(EngineError) as err:
        await engine.open_stream(gen_request("x"))
    assert (err.value.status, err.value.kind, err.value.retryable) == (503, "connect", True)


async def test_dropped_stream_raises_after_start(start_engine, engine_http):
    server = await start_engine(faults=Faults(drop_after=2))
    engine = Engine(url(server), engine_http)
    stream = await engine.open_stream(gen_request("d"))
    with pytest.raises(EngineError) as err:
        await drain(stream)
    assert err.value.started and err.value.kind == "stream" and not err.value.retryable


async def test_idle_timeout_aborts(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=1))
    engine = Engine(url(server), engine_http, timeouts=EngineTimeouts(idle=0.2))
    stream = await engine.open_stream(gen_request("idle"))
    with pytest.raises(EngineError) as err:
        await drain(stream)
    assert err.value.kind == "timeout" and err.value.status == 504 and err.value.started
    for _ in range(100):
        if server.app[REFERENCE].aborted:
            break
        await asyncio.sleep(0.005)
    assert server.app[REFERENCE].aborted[0]["request_id"] == "generate-tokens-idle"


async def test_first_token_timeout_is_retryable(start_engine, engine_http):
    server = await start_engine(faults=Faults(stall_after=0))
    engine = Engine(url(server), engine_http, timeouts=EngineTimeouts(first_token=0.2))
    stream = await engine.open_stream(gen_request("ft"))
    with pytest.raises(EngineError) as err:
        await stream.next()
    assert err.value.kind == "timeout" and err.value.retryable and not err.value.started


async def test_api_key_is_sent(start_engine, engine_http):
    server = await start_engine(api_key="secret")
    with pytest.raises(EngineError) as err:
        await Engine(url(server), engine_http).generate(gen_request("k", stream=False))
    assert err.value.status == 401
    ok = await Engine(url(server), engine_http, api_key="secret").generate(gen_request("k", stream=False))
    assert ok["request_id"] == "generate-tokens-k"


# -- the pool ------------------------------------------------------------------------------------

async def test_pool_retries_once_on_another_engine_and_marks_down(start_engine, engine_http):
    server = await start_engine()
    dead = f"http://127.0.0.1:{free_port()}"
    pool = EnginePool([dead, url(server)], engine_http)
    # least outstanding with ties to the first listed: the dead engine is tried first
    stream, first = await pool.open_stream(gen_request("r"))
    assert first["request_id"] == "generate-tokens-r"
    assert stream.engine.url == url(server)
    assert pool.engines[0].healthy is False
    await drain(stream)
    assert [e.outstanding for e in pool.engines] == [0, 0]
    # a down engine is skipped while another is healthy
    engine, _ = await pool.generate(gen_request("s", stream=False))
    assert engine.url == url(server)


async def test_pool_non_retryable_error_is_not_retried(start_engine, engine_http):
    a = await start_engine(faults=Faults(fail_status=400))
    b = await start_engine()
    pool = EnginePool([url(a), url(b)], engine_http)
    with pytest.raises(EngineError) as err:
        await pool.open_stream(gen_request("n"))
    assert err.value.status == 400
    assert b.app[REFERENCE].generate_calls == 0


async def test_pool_fails_after_two_engines_fail(start_engine, engine_http):
    a = await start_engine(faults=Faults(fail_status=503))
    b = await start_engine(faults=Faults(fail_status=503))
    c = await start_engine()
    pool = EnginePool([url(a), url(b), url(c)], engine_http)
    with pytest.raises(EngineError) as err:
        await pool.generate(gen_request("f", stream=False))
    assert err.value.status == 503  # retried once, not twice
    assert c.app[REFERENCE].generate_calls == 0


async def test_pool_least_outstanding(start_engine, engine_http):
    a = await start_engine(token_delay_ms=5)
    b = await start_engine(token_delay_ms=5)
    pool = EnginePool([url(a), url(b)], engine_http)
    s1, _ = await pool.open_stream(gen_request("1"))
    s2, _ = await pool.open_stream(gen_request("2"))
    assert {s1.engine.url, s2.engine.url} == {url(a), url(b)}
    assert [e.outstanding for e in pool.engines] == [1, 1]
    s1.abort()
    assert pool.choose() is s1.engine
    await drain(s2)
    assert [e.outstanding for e in pool.engines] == [0, 0]


async def test_pool_health_checks_bring_engines_back(start_engine, engine_http):
    server = await start_engine()
    pool = EnginePool([url(server)], engine_http)
    pool.mark_down(pool.engines[0], "test")
    pool.start_health_checks(0.05)
    try:
        for _ in range(100):
            if pool.engines[0].healthy:
                break
            await asyncio.sleep(0.01)
        assert pool.engines[0].healthy
    finally:
        await pool.close()
    dead = EnginePool([f"http://127.0.0.1:{free_port()}"], engine_http)
    await dead.check_all()
    assert dead.engines[0].healthy is False


async def test_pool_prefix_affinity(start_engine, engine_http):
    servers = [await start_engine() for _ in range(3)]
    pool = EnginePool([url(s) for s in servers], engine_http, affinity_tokens=4)
    prompts = [[i, i + 1, i + 2, i + 3, 99] for i in range(40)]
    picks = {tuple(p): pool.choose(p) for p in prompts}
    assert len({e.url for e in picks.values()}) == 3  # prefixes spread over the engines
    for p in prompts:
        pool.engines[0].outstanding += 5  # load does not move a prefix while its engine is up
        assert pool.choose(p[:4] + [123]) is picks[tuple(p)]
    pool.mark_down(pool.engines[0], "test")
    for p in prompts:
        if picks[tuple(p)] is not pool.engines[0]:
            assert pool.choose(p) is picks[tuple(p)]  # only the lost engine's prefixes move
        else:
            assert pool.choose(p) is not pool.engines[0]


@pytest.fixture
async def hangup_server():
    """An engine that reads each request and hangs up without answering (a stale keep-alive race)."""
    hits = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        hits.append(1)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", hits
    server.close()
    await server.wait_closed()


async def test_dropped_connection_is_retried_without_marking_down(start_engine, engine_http, hangup_server):
    url_, hits = hangup_server
    lone = EnginePool([url_], engine_http)
    with pytest.raises(EngineError) as err:
        await lone.generate(gen_request("h", stream=False))
    assert err.value.kind == "disconnect" and err.value.status == 502
    assert len(hits) == 2  # a lone engine gets the one retry itself
    assert lone.engines[0].healthy  # a hang-up is not "down"
    good = await start_engine()
    pool = EnginePool([url_, url(good)], engine_http)
    stream, first = await pool.open_stream(gen_request("h2"))
    assert first["request_id"] == "generate-tokens-h2" and stream.engine.url == url(good)
    assert pool.engines[0].healthy
    await drain(stream)


async def test_request_ids_cannot_add_headers_to_the_engine_request(engine_http):
    """A body's request_id is any JSON string: one the header cannot carry as is stays in the body
    only (vLLM then names the engine request after it, as our aborts do)."""
    from aiohttp import web

    seen = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"request_id": "x", "choices": []})

    server = await aiohttp_server(handler)
    try:
        engine = Engine(url(server), engine_http)
        for request_id in ("abc\r\nX-Injected: yes", "abc\n", "caf\u00e9", "plain-id 1"):
            answer = await engine.generate(gen_request(request_id, stream=False))
            assert answer["request_id"] == "x"
        assert all("X-Injected" not in headers for headers in seen)
        assert [headers.get("X-Request-ID") for headers in seen] == [None, None, None, "plain-id 1"]
    finally:
        await server.close()


@pytest.mark.parametrize("stream", [True, False])
async def test_a_redirecting_engine_is_a_bad_gateway_naming_the_flag(engine_http, stream):
    """Nothing is followed (a redirected generate would lose its body or method): the operator
    pointed --engine-url at the wrong place, and the client gets a 502, not the 3xx."""
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        raise web.HTTPPermanentRedirect("https://elsewhere:8000/inference/v1/generate")

    server = await aiohttp_server(handler)
    try:
        engine = Engine(url(server), engine_http)
        with pytest.raises(EngineError) as err:
            if stream:
                await engine.open_stream(gen_request("r"))
            else:
                await engine.generate(gen_request("r", stream=False))
        assert err.value.status == 502 and err.value.type == "BadGatewayError" and not err.value.retryable
        assert "HTTP 308 to https://elsewhere:8000/inference/v1/generate" in err.value.message
        assert "--engine-url" in err.value.message
    finally:
        await server.close()
