"""An engine that breaks the protocol: the client still gets an OpenAI answer (502 before the
stream, an error event then [DONE] after it), never a 500 with a traceback, never a hang."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.proxy.frontdoor_stack import post_raw, wait_for
from tests.proxy.loopback import LoopbackServer

BAD = {
    "not_an_object": b"[1, 2]",
    "string_ids": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"stop","token_ids":["a"]}]}',
    "choices_not_a_list": b'{"request_id":"r","choices":{"index":0}}',
    "finish_error": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"error","token_ids":[]}]}',
    # ids a tokens-only engine may not send: used to be dropped silently
    "id_past_the_vocabulary": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"stop","token_ids":[1000000000]}]}',
    "negative_id": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"stop","token_ids":[-1]}]}',
    # one event far larger than the request allows (max_tokens 5): refused as it arrives
    "huge_event": b'{"request_id":"r","choices":[{"index":0,"finish_reason":null,"token_ids":['
                  + b"9707," * 800_000 + b'9707]}]}',
    # a choice the request did not ask for: used to be ignored silently
    "index_out_of_range": b'{"request_id":"r","choices":[{"index":3,"finish_reason":"stop","token_ids":[9707]}]}',
    # only read when logprobs are asked for: the derender itself fails on it (not the shape check)
    "bad_logprobs": b'{"request_id":"r","choices":[{"index":0,"finish_reason":"stop","token_ids":[9707],'
                    b'"logprobs":{"content":[{"token":"nonsense","logprob":-1.0}]}}]}',
}


@pytest.fixture(scope="module")
def hostile(qwen3):
    fault = {"name": "not_an_object"}

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        payload = BAD[fault["name"]]
        if not body.get("stream"):
            return web.Response(body=payload, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"request_id":"r","choices":[{"index":0,"finish_reason":null,"token_ids":[9707]}]}'
                         b"\n\n")
        await resp.write(b"data: " + payload + b"\n\n" + b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    def engine_app() -> web.Application:
        app = web.Application()
        app.router.add_post("/inference/v1/generate", generate)
        app.router.add_post("/inference/v1/abort_requests", ok)
        app.router.add_get("/health", ok)
        return app

    engine = LoopbackServer(engine_app).start()
    proxy = LoopbackServer(lambda: create_app(ServerConfig(engine_url=[engine.url], health_check_interval=0),
                                              qwen3)).start()
    yield proxy, fault
    proxy.stop()
    engine.stop()


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("path,body", [("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                                       ("/v1/completions", {"prompt": "hi"})])
def test_protocol_breaking_engine(hostile, name, path, body):
    proxy, fault = hostile
    fault["name"] = name
    if name == "bad_logprobs":
        body = {**body, "logprobs": True if path.endswith("chat/completions") else 1}
    status, _, text = post_raw(proxy.url + path, {**body, "max_tokens": 5}, timeout=10)
    assert status == 502, text
    error = json.loads(text)["error"]
    assert error["code"] == 502 and error["type"] == "BadGatewayError"
    if name == "huge_event":
        assert "more output than the request allows" in error["message"], error
    if name in ("id_past_the_vocabulary", "negative_id", "index_out_of_range"):
        assert ("vocabulary" if "id" in name.split("_") else "out of range") in error["message"]
    status, headers, text = post_raw(proxy.url + path, {**body, "max_tokens": 5, "stream": True}, timeout=10)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    parts = text.split("\n\n")
    assert parts[-2:] == ["data: [DONE]", ""]  # the stream ends properly
    error = json.loads(parts[-3][len("data: "):])["error"]
    assert error["code"] == 502
    assert json.loads(parts[0][len("data: "):])["choices"]  # what came before the bad event went out


@pytest.fixture(scope="module")
def endless(qwen3):
    """An engine that ignores max_tokens: it streams until it is aborted (or for 10 s)."""
    seen = {"aborted": [], "closed": 0}

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            for _ in range(10_000):
                await resp.write(b'data: {"request_id":"%s","choices":[{"index":0,"finish_reason":null,'
                                 b'"token_ids":[9707, 11]}]}\n\n' % body["request_id"].encode())
                await asyncio.sleep(0.001)
        except (ConnectionResetError, asyncio.CancelledError):
            seen["closed"] += 1
            raise
        return resp

    async def abort(request: web.Request) -> web.Response:
        seen["aborted"].extend((await request.json())["request_ids"])
        return web.Response(status=200)

    def engine_app() -> web.Application:
        app = web.Application()
        app.router.add_post("/inference/v1/generate", generate)
        app.router.add_post("/inference/v1/abort_requests", abort)
        return app

    engine = LoopbackServer(engine_app).start()
    proxy = LoopbackServer(lambda: create_app(ServerConfig(engine_url=[engine.url], health_check_interval=0),
                                              qwen3)).start()
    yield proxy, seen
    proxy.stop()
    engine.stop()


@pytest.mark.parametrize("path,body", [("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                                       ("/v1/completions", {"prompt": "hi"})])
@pytest.mark.parametrize("stream", [True, False])
def test_an_engine_that_ignores_max_tokens_is_stopped_there(endless, path, body, stream):
    proxy, seen = endless
    before = len(seen["aborted"])
    # stop strings make the non-streamed answer read the engine's stream
    status, _, text = post_raw(proxy.url + path, {**body, "max_tokens": 5, "stream": stream, "stop": ["never"]},
                               timeout=10)
    assert status == 200, text
    if stream:
        events = [json.loads(p[len("data: "):]) for p in text.split("\n\n") if p.startswith("data: {")]
        finishes = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
        assert text.endswith("data: [DONE]\n\n") and finishes == ["length"]
    else:
        answer = json.loads(text)
        assert answer["choices"][0]["finish_reason"] == "length" and answer["usage"]["completion_tokens"] == 5
    wait_for(lambda: len(seen["aborted"]) > before)


@pytest.fixture(scope="module")
def hesitant(qwen3):
    """An engine whose first event carries no token (a keep-alive), then nothing for 3 s."""
    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        rid = body["request_id"].encode()
        await resp.write(b'data: {"request_id":"%s","choices":[{"index":0,"finish_reason":null,"token_ids":[]}]}\n\n'
                         % rid)
        await asyncio.sleep(3)
        await resp.write(b'data: {"request_id":"%s","choices":[{"index":0,"finish_reason":"length",'
                         b'"token_ids":[9707]}]}\n\ndata: [DONE]\n\n' % rid)
        return resp

    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    def engine_app() -> web.Application:
        app = web.Application()
        app.router.add_post("/inference/v1/generate", generate)
        app.router.add_post("/inference/v1/abort_requests", ok)
        return app

    engine = LoopbackServer(engine_app).start()
    proxy = LoopbackServer(lambda: create_app(ServerConfig(engine_url=[engine.url], health_check_interval=0,
                                                           response_store="none"), qwen3)).start()
    yield proxy
    proxy.stop()
    engine.stop()


@pytest.mark.slow
@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/responses", {"input": "hi"}),
    ("/v1/messages", {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}),
])
def test_the_first_events_leave_with_the_engines_first_event_even_without_text(hesitant, path, body):
    """The role chunk / response.created / message_start go out when the engine's first event
    arrives, not with the first text (they used to wait for it: here, 3 s)."""
    import time
    import urllib.request

    req = urllib.request.Request(hesitant.url + path, data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=10) as resp:
        first = resp.readline()
        waited = time.monotonic() - t0
        rest = resp.read()
    assert first.strip() and waited < 2.0, (first, waited)  # seconds before the engine's second event
    assert rest  # and the stream still ends properly
