"""The engine client against engines that misbehave on purpose (aiohttp servers with fault modes):
output larger than the request can produce, rate limits, and the like. Whatever the engine does, the
client gets a clean EngineError (a 502 / 429 / ... the front door relays), and the engine request is
dropped at once rather than read to its end."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from proxy.engine.client import Engine, EngineError
from proxy.engine.sse import event_bytes_bound
from tests.proxy.http_servers import aiohttp_server
from tests.proxy.loopback import url

CHUNK = 64 * 1024


def gen_request(request_id: str, stream: bool = True) -> dict:
    return {"request_id": request_id, "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 4}, "stream": stream}


class Flood:
    """An engine whose generate answer is one event (or body) that never ends: it writes CHUNK after
    CHUNK until the client goes away, and counts what it managed to send."""

    def __init__(self) -> None:
        self.sent = 0
        self.stopped = asyncio.Event()
        self.aborts: list[dict] = []

    async def handler(self, request: web.Request) -> web.StreamResponse:
        if request.path.endswith("abort_requests"):
            self.aborts.append(await request.json())
            return web.json_response({})
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream" if body["stream"]
                                           else "application/json"})
        await resp.prepare(request)
        head = b'data: {"request_id":"x","choices":[{"index":0,"token_ids":[' if body["stream"] else \
            b'{"request_id":"x","choices":[{"index":0,"token_ids":['
        try:
            await resp.write(head)
            for _ in range(4096):  # 256 MB at most
                await resp.write(b"9," * (CHUNK // 2))
                self.sent += CHUNK
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.stopped.set()
        return resp


@pytest.mark.parametrize("stream", [True, False])
async def test_output_larger_than_the_request_allows_is_a_502_and_is_not_read_further(engine_http, stream):
    flood = Flood()
    server = await aiohttp_server(flood.handler)
    try:
        engine = Engine(url(server), engine_http)
        bound = event_bytes_bound(4)
        with pytest.raises(EngineError) as err:
            if stream:
                s = await engine.open_stream(gen_request("big"), max_event_bytes=bound)
                while await s.next() is not None:
                    pass
            else:
                await engine.generate(gen_request("big", stream=False), max_answer_bytes=bound)
        assert (err.value.status, err.value.type, err.value.kind) == (502, "BadGatewayError", "stream")
        assert err.value.message.startswith("The inference engine sent more output than the request allows")
        assert url(server) not in err.value.message  # the engine's address stays in our log
        await asyncio.wait_for(flood.stopped.wait(), 10)  # the connection was dropped: the engine stopped
        assert flood.sent < 64 * bound  # far from the 256 MB it would have sent
        if stream:
            for _ in range(200):
                if flood.aborts:
                    break
                await asyncio.sleep(0.01)
            assert flood.aborts == [{"request_ids": ["generate-tokens-big"]}]
    finally:
        await server.close()


# -- an engine that rate-limits: the client gets a 429 with the engine's Retry-After -------------

def rate_limiting_engine(retry_after: str | None):
    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/generate"):
            headers = {"Retry-After": retry_after} if retry_after is not None else None
            return web.json_response({"error": {"message": "Too many requests in flight", "type": "TooMany"}},
                                     status=429, headers=headers)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_an_engine_429_reaches_the_client_as_a_429_with_its_retry_after(qwen3, api, stream):
    import openai

    from proxy.app import create_app
    from proxy.config import ServerConfig
    from tests.proxy.loopback import LoopbackServer

    engine = LoopbackServer(lambda: rate_limiting_engine("7")).start()
    proxy = LoopbackServer(lambda: create_app(ServerConfig(engine_url=[engine.url], health_check_interval=0),
                                              qwen3)).start()
    try:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError) as err:
            if api == "chat":
                client.chat.completions.create(model="tiny-qwen3", messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=2, stream=stream)
            else:
                client.completions.create(model="tiny-qwen3", prompt="hi", max_tokens=2, stream=stream)
        assert err.value.status_code == 429
        assert err.value.response.headers["Retry-After"] == "7"
        assert err.value.body == {"message": "Too many requests in flight", "type": "RateLimitError", "param": None,
                                  "code": 429}
    finally:
        proxy.stop()
        engine.stop()


def test_retry_after_values():
    import email.utils

    from proxy.engine.client import MAX_RETRY_AFTER, retry_after_seconds

    assert retry_after_seconds("7") == 7 and retry_after_seconds(" 0 ") == 0
    assert retry_after_seconds("99999999999") == MAX_RETRY_AFTER
    assert retry_after_seconds(email.utils.formatdate(1000.0 + 30, usegmt=True), now=1000.0) == 30
    assert retry_after_seconds(email.utils.formatdate(1000.0 - 30, usegmt=True), now=1000.0) == 0
    for bad in (None, "", "soon", "-5", "1.5", "Mon, 99 Foo 2024 00:00:00 GMT"):
        assert retry_after_seconds(bad) is None, bad
