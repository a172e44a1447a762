"""Hostile clients over real HTTP: inputs built to make the proxy work without bound, fail with a
500 or echo megabytes back. Every one gets an OpenAI error body with a 4xx (never a 5xx), small
and quick, while the event loop keeps serving others.

The stack is the reference engine and the proxy on loopback ports (`tests/proxy/frontdoor_stack.py`);
bodies are sent as raw bytes where JSON nesting deeper than the json module writes is needed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.proxy.frontdoor_stack import PARSERS, Stack

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
DEEP = "[" * 1000 + "1" + "]" * 1000  # inside orjson's 1024 levels, past Python's repr recursion
PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
GENERATE_RESPONSE = {"request_id": "generate-tokens-chatcmpl-x", "choices": [
    {"index": 0, "finish_reason": "stop", "stop_reason": None, "token_ids": [9707, 151645]}]}


@pytest.fixture(scope="module")
def stack(qwen3):
    s = Stack(qwen3, **PARSERS)
    yield s
    s.close()


def post_bytes(url: str, body: bytes, headers: dict[str, str] | None = None, timeout: float = 30.0
               ) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def assert_openai_error(status: int, body: bytes, expected: int) -> dict[str, Any]:
    assert status == expected, (status, body[:300])
    data = json.loads(body)
    assert list(data) == ["error"] and list(data["error"]) == ["message", "type", "param", "code"], data
    assert data["error"]["code"] == status
    return data["error"]


# -- item 5: values nested ~1000 deep are never formatted whole into messages --------------------

def _chat(field: str, value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": MESSAGES, "max_tokens": 2}
    if field.startswith("tool_choice"):
        body["tools"] = TOOLS
        path = field.split(".")
        if len(path) == 1:
            body["tool_choice"] = value
        elif len(path) == 2:
            body["tool_choice"] = {"type": "function", "function": value}
        else:
            body["tool_choice"] = {"type": "function", "function": {"name": value}}
    else:
        body[field] = value
    return body


CHAT_FIELDS = ["logprobs", "prompt_logprobs", "top_logprobs", "tool_choice", "tool_choice.function",
               "tool_choice.function.name"]
CMPL_FIELDS = ["logprobs", "prompt_logprobs"]


def _deep_cases() -> list[Any]:
    cases = []
    for field in CHAT_FIELDS:
        for route in ("/v1/chat/completions", "/v1/chat/completions/render", "/v1/chat/completions/derender"):
            cases.append(pytest.param(route, field, id=f"{route}-{field}"))
    for field in CMPL_FIELDS:
        for route in ("/v1/completions", "/v1/completions/render", "/v1/completions/derender"):
            cases.append(pytest.param(route, field, id=f"{route}-{field}"))
    return cases


@pytest.mark.parametrize("route,field", _deep_cases())
def test_deeply_nested_values_are_400_with_a_short_message(stack, route, field):
    chat = route.startswith("/v1/chat")
    request = _chat(field, "DEEP") if chat else {"prompt": "hi", "max_tokens": 2, field: "DEEP"}
    if route.endswith("/derender"):
        key = "chat_request" if chat else "completion_request"
        body = {key: request, "prompt_token_ids": PROMPT if chat else [PROMPT],
                ("generate_response" if chat else "generate_responses"):
                    GENERATE_RESPONSE if chat else [GENERATE_RESPONSE]}
    else:
        body = request
    raw = json.dumps(body).replace('"DEEP"', DEEP).encode()
    status, _, text = post_bytes(stack.url + route, raw)
    error = assert_openai_error(status, text, 400)
    assert len(error["message"]) < 2000, error["message"][:300]


def test_a_10_mb_model_name_is_not_echoed_back(stack):
    for route, body in [("/v1/chat/completions", {"messages": MESSAGES}), ("/v1/completions", {"prompt": "x"}),
                        ("/v1/chat/completions/render", {"messages": MESSAGES})]:
        status, _, text = post_bytes(stack.url + route, json.dumps({**body, "model": "m" * 10_000_000}).encode())
        error = assert_openai_error(status, text, 404)
        assert len(text) < 2000 and error["message"].startswith("The model `mmm"), error["message"][:300]
        assert "...[truncated]" in error["message"]


def test_a_long_unknown_content_part_type_is_cut_in_the_message(stack):
    body = {"messages": [{"role": "user", "content": [{"type": "x" * 1_000_000, "text": "a"}]}]}
    status, _, text = post_bytes(stack.url + "/v1/chat/completions/render", json.dumps(body).encode())
    error = assert_openai_error(status, text, 400)
    assert len(text) < 2000 and error["message"].startswith("Unsupported chat content part type: 'xxx")


async def test_any_remaining_recursion_error_is_a_400(aiohttp_client):
    """The middleware's last line for the class: code that walks a client's value recursively."""
    from aiohttp import web

    from proxy.http import error_middleware

    async def walk(request: web.Request) -> web.Response:
        def depth(value: Any) -> int:
            return 1 + max((depth(v) for v in value), default=0) if isinstance(value, list) else 0
        return web.json_response({"depth": depth(await request.json())})

    app = web.Application(middlewares=[error_middleware])
    app.router.add_post("/walk", walk)
    client = await aiohttp_client(app)
    resp = await client.post("/walk", data="[" * 100_000 + "]" * 100_000, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == "The request is nested too deeply to be processed."


# -- item 6: Content-Encoding ---------------------------------------------------------------------

POST_ROUTES = {
    "/v1/chat/completions": {"messages": MESSAGES, "max_tokens": 2},
    "/v1/completions": {"prompt": "hi", "max_tokens": 2},
    "/v1/chat/completions/render": {"messages": MESSAGES},
    "/v1/completions/render": {"prompt": "hi"},
    "/v1/chat/completions/derender": {"chat_request": {"messages": MESSAGES}, "prompt_token_ids": PROMPT,
                                      "generate_response": GENERATE_RESPONSE},
    "/v1/completions/derender": {"completion_request": {"prompt": "hi"}, "prompt_token_ids": [PROMPT],
                                 "generate_responses": [GENERATE_RESPONSE]},
    "/tokenize": {"prompt": "hi"},
    "/detokenize": {"tokens": [9707]},
}


@pytest.mark.parametrize("route", sorted(POST_ROUTES))
def test_content_encodings_get_openai_errors_never_500_nor_plain_text(stack, route):
    import gzip
    import zlib

    body = json.dumps(POST_ROUTES[route]).encode()
    cases = [
        ("gzip", gzip.compress(body), 200),
        ("deflate", zlib.compress(body), 200),
        ("gzip, deflate", zlib.compress(gzip.compress(body)), 200),
        ("identity", body, 200),
        ("gzip", b"this is not gzip", 400),
        ("deflate", b"nor deflate", 400),
        ("gzip", gzip.compress(body)[:-12], 400),  # cut short
        ("br", body, 415),
        ("zstd", body, 415),
        ("compress", body, 415),
        ("x" * 1000, body, 415),
    ]
    for coding, data, expected in cases:
        status, headers, text = post_bytes(stack.url + route, data, {"Content-Encoding": coding})
        if expected == 200:
            assert status == 200, (coding, text[:300])
            continue
        error = assert_openai_error(status, text, expected)
        assert len(error["message"]) < 400, error["message"]


def test_a_gzip_bomb_is_a_413_without_inflating_it(stack):
    import gzip

    bomb = gzip.compress(b'{"prompt": "' + b"a" * (64 * 1024 * 1024) + b'"}', compresslevel=9)
    assert len(bomb) < 100_000
    status, _, text = post_bytes(stack.url + "/v1/completions/render", bomb, {"Content-Encoding": "gzip"})
    error = assert_openai_error(status, text, 413)
    assert "passes the limit of 33554432 bytes" in error["message"]


# -- item 8: slow bodies --------------------------------------------------------------------------

def _slow_body_client(port: int, route: str, results: list, stop) -> None:
    """Announce a 1 MB body, then send one byte every 0.2 s; record what the server answers."""
    import socket
    import time

    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 1000000\r\n\r\n{".encode())
    sock.settimeout(0.2)
    started, answer = time.monotonic(), b""
    try:
        while not stop.is_set() and time.monotonic() - started < 15:
            try:
                sock.sendall(b" ")
            except OSError:
                pass
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:  # the server closed the connection
                break
            answer += data
        results.append((time.monotonic() - started, answer))
    finally:
        sock.close()


@pytest.mark.slow
def test_slow_bodies_time_out_with_a_408_while_health_keeps_answering(qwen3):
    import threading
    import time

    stack = Stack(qwen3, request_body_timeout=1.0)
    try:
        port = int(stack.url.rsplit(":", 1)[1])
        results: list = []
        stop = threading.Event()
        clients = [threading.Thread(target=_slow_body_client, args=(port, route, results, stop))
                   for route in sorted(POST_ROUTES) * 4]
        for client in clients:
            client.start()
        health: list[float] = []
        while any(c.is_alive() for c in clients) and len(health) < 200:
            t0 = time.monotonic()
            with urllib.request.urlopen(stack.url + "/health", timeout=5) as resp:
                assert resp.status == 200
            health.append(time.monotonic() - t0)
            time.sleep(0.02)
        stop.set()
        for client in clients:
            client.join(5)
        assert len(results) == len(clients)
        for elapsed, answer in results:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 "), answer[:300]
            error = json.loads(body)["error"]
            assert error["code"] == 408 and "did not arrive within 1 seconds" in error["message"]
            assert elapsed < 5, elapsed  # closed after the timeout (1 s), not after the client's 1 MB
        assert max(health) < 1.0, max(health)  # (a stall here would be seconds)
    finally:
        stack.close()


async def test_connections_past_the_bound_get_a_503_and_are_closed(qwen3):
    import asyncio

    import aiohttp
    from aiohttp import web

    from proxy.app import create_app
    from proxy.config import ServerConfig
    from proxy.serving import CappedSite

    runner = web.AppRunner(create_app(ServerConfig(), qwen3), handler_cancellation=True, access_log=None)
    await runner.setup()
    site = CappedSite(runner, "127.0.0.1", 0, max_connections=8)
    await site.start()
    base = f"http://127.0.0.1:{site.port}"
    try:
        idle = [await asyncio.open_connection("127.0.0.1", site.port) for _ in range(8)]
        await asyncio.sleep(0.1)  # all accepted
        for attempt in range(3):  # one more connection, whatever it sends: a 503 error body, then closed
            reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
            if attempt < 2:
                writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 5)  # (to EOF)
            writer.close()
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in head, answer
            assert json.loads(body)["error"]["code"] == 503
        assert site.refused == 3
        for _, writer in idle[:2]:  # two leave: new clients are served again
            writer.close()
        await asyncio.sleep(0.1)
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/health") as resp:
                assert resp.status == 200
            async with session.get(base + "/metrics") as resp:
                assert "derender_proxy_connections_refused_total 3.0" in await resp.text()
        for _, writer in idle[2:]:
            writer.close()
    finally:
        await runner.cleanup()


@pytest.mark.slow
def test_served_process_bounds_connections_and_slow_bodies(tmp_path):
    """`derender-proxy serve --max-connections 4 --request-body-timeout 1`: four slow-body clients
    take every slot (a fifth connection gets a 503 at once); a second later they have their 408s
    and are gone, and /health answers again."""
    import threading
    import time

    from tests.proxy.serve_process import ServeProcess

    server = ServeProcess("--max-connections", "4", "--request-body-timeout", "1", tmp_path=tmp_path).start()
    try:
        results: list = []
        stop = threading.Event()
        clients = [threading.Thread(target=_slow_body_client, args=(server.port, "/v1/completions", results, stop))
                   for _ in range(4)]
        for client in clients:
            client.start()
        time.sleep(0.3)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.url + "/health", timeout=5)
        assert refused.value.code == 503
        assert json.loads(refused.value.read())["error"]["type"] == "ServiceUnavailableError"
        for client in clients:
            client.join(10)
        assert [a.split(b" ", 2)[1] for _, a in results] == [b"408"] * 4
        deadline = time.monotonic() + 5  # (their slots free once the server has seen them go)
        while True:
            try:
                with urllib.request.urlopen(server.url + "/health", timeout=5) as resp:
                    assert resp.status == 200
                break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503 and time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        stop.set()
        server.stop()
    listening = [line for line in server.log_lines() if line["message"] == "listening"]
    assert listening[0]["max_connections"] == 4


# -- item 10: an X-Request-Id that is not UTF-8 ---------------------------------------------------

def _raw_post(port: int, path: str, body: dict[str, Any], request_id: bytes, read_all: bool = True) -> bytes:
    import socket

    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                 "\r\nConnection: close\r\n".encode() + b"X-Request-Id: " + request_id + b"\r\n\r\n" + data)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
            if not read_all and b"data: " in out:
                break
    finally:
        sock.close()
    return out


@pytest.mark.parametrize("path,body,prefix", [
    ("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 2}, "chatcmpl-"),
    ("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 2, "stream": True}, "chatcmpl-"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}, "cmpl-"),
    ("/v1/chat/completions/render", {"messages": MESSAGES}, "chatcmpl-"),
])
def test_a_request_id_that_is_not_utf8_is_read_as_latin1_like_vllm(stack, caplog, path, body, prefix):
    stack.set_replies(["Hello there."])
    port = int(stack.url.rsplit(":", 1)[1])
    answer = _raw_post(port, path, body, b"\xff\xfe-id")
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), answer[:400]
    assert "X-Request-Id: ÿþ-id".encode() in head  # (echoed as UTF-8 text)
    assert f'"{prefix}ÿþ-id'.encode() in payload
    if not path.endswith("/render"):
        assert stack.last_engine_request()["request_id"].startswith(f"{prefix}ÿþ-id-")
    assert not [r for r in caplog.records if r.levelno >= 30], [r.getMessage() for r in caplog.records]


def test_a_stream_with_a_non_utf8_request_id_is_aborted_cleanly_when_its_client_leaves(stack, caplog):
    import time

    stack.set_replies([" ".join(f"w{i}" for i in range(200))], token_delay_ms=5)
    port = int(stack.url.rsplit(":", 1)[1])
    _raw_post(port, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 300, "stream": True},
              b"\xfe\xff", read_all=False)  # leaves after the first event
    aborted = stack.wait_aborted(5)
    assert aborted and aborted[0]["request_id"].startswith("generate-tokens-chatcmpl-þÿ-"), aborted
    time.sleep(0.2)
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "never retrieved" in m or "internal error" in m], messages


# -- items 2 and 7: request chat templates (--trust-request-chat-template) -------------------------

def health_while(url: str, work) -> tuple[Any, list[float]]:
    """Run `work()` in a thread while polling `url`/health; return its result and every health
    latency (a stall of the proxy's event loop shows as seconds; noise is milliseconds)."""
    import threading
    import time

    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    latencies = []
    while thread.is_alive():
        t0 = time.monotonic()
        with urllib.request.urlopen(url + "/health", timeout=30) as resp:
            assert resp.status == 200
        latencies.append(time.monotonic() - t0)
        time.sleep(0.02)
    thread.join()
    return result[0], latencies


@pytest.fixture(scope="module")
def trusting(qwen3):
    s = Stack(qwen3, trust_request_chat_template=True, request_template_timeout=1.5)
    yield s
    s.close()


HOSTILE_TEMPLATES = {
    "huge_power": "{% set n = 9 ** 7 %}{{ (9 ** n) > 1 }}",
    "power_tower": "{{ 9 ** (9 ** 9) }}",
    "repeat": "{{ ('a' * 10**8)|length }}",
    "doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "plus_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}x",
    "replace_bomb": "{% set s = 'a' * 4000 %}{{ s|replace('a', s)|replace('a', s)|length }}",
    "method_bomb": "{% set s = 'a' * 4000 %}{{ s.replace('a', s).replace('a', s)|length }}",
    "center": "{{ 'a'|center(10**9) }}",
    "ljust": "{{ 'a'.ljust(10**9) }}",
    "percent_width": "{{ '%0999999999d' % 1 }}",
    "format_width": "{{ '{:>999999999}'.format(1) }}",
    "indent": "{{ ('a\\n' * 2000000)|indent(1000) }}",
    "join": "{% set s = 'a' * 5000000 %}{{ [s, s, s]|join(s) }}",
    "block_capture": "{% set x %}{% for i in range(100000) %}{% for j in range(100) %}AAAAAAAAAAAAAAAA{% endfor %}"
                     "{% endfor %}{% endset %}{{ x|length }}",
    "output_flood": "{% for i in range(100000) %}{% for j in range(100) %}AAAAAAAAAAAAAAAA{% endfor %}{% endfor %}",
    "list_growth": "{% set l = [1] * 100000 %}{% set ns = namespace(l=l) %}{% for i in range(1000) %}"
                   "{% set ns.l = ns.l + l %}{% endfor %}{{ ns.l|length }}",
    "busy_loop": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "tojson_indent": "{% set l = [[1, [2, [3]]]] * 100000 %}{{ l|tojson(indent=100) }}",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE_TEMPLATES))
def test_hostile_request_templates_are_400s_within_budget_and_never_stall(trusting, name):
    import time

    body = json.dumps({"messages": MESSAGES, "chat_template": HOSTILE_TEMPLATES[name]}).encode()

    def send():
        t0 = time.monotonic()
        answer = post_bytes(trusting.url + "/v1/chat/completions/render", body, timeout=60)
        return answer, time.monotonic() - t0

    (status_headers_text, elapsed), health = health_while(trusting.url, send)
    status, _, text = status_headers_text
    error = assert_openai_error(status, text, 400)
    assert "chat template" in error["message"] or "recursion" in error["message"], error
    assert elapsed < 1.5 + 5, elapsed  # its budget (1.5 s), plus a loaded machine's slack
    assert max(health, default=0) < 1.0, max(health)


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/chat/completions/render", "/tokenize"])
@pytest.mark.parametrize("template", ["{% break %}", "{% for m in messages %}{% endfor %}{% continue %}",
                                      "{{" + "(" * 3000 + "1" + ")" * 3000 + "}}", "{% if %}", "{{ x | nofilter }}"])
def test_request_templates_that_do_not_compile_are_400(trusting, route, template):
    status, _, text = post_bytes(trusting.url + route,
                                 json.dumps({"messages": MESSAGES, "max_tokens": 2, "chat_template": template}).encode())
    assert_openai_error(status, text, 400)


def test_a_request_template_renders_as_the_server_template_does(trusting, qwen3):
    """The budget changes nothing for a real template: the model's own template sent with the
    request renders the same ids (tools, reasoning, several turns)."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "reasoning": "Need the tool.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "18 C"}, {"role": "user", "content": "Thanks" * 50}]
    body = {"messages": messages, "tools": TOOLS, "tool_choice": "none"}
    _, _, plain = post_bytes(trusting.url + "/v1/chat/completions/render", json.dumps(body).encode())
    status, _, own = post_bytes(trusting.url + "/v1/chat/completions/render",
                                json.dumps({**body, "chat_template": qwen3.tokenizer.chat_template}).encode())
    assert status == 200, own[:300]
    assert json.loads(own)["token_ids"] == json.loads(plain)["token_ids"]


# -- item 4: the render's work is bounded by the request's size, before rendering ------------------

@pytest.mark.parametrize("route", ["/v1/chat/completions/render", "/v1/chat/completions"])
def test_300k_one_character_messages_are_a_quick_400_and_never_stall(stack, route):
    import time

    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(300_000)]
    body = json.dumps({"messages": messages, "max_tokens": 2}).encode()

    def send():
        t0 = time.monotonic()
        return post_bytes(stack.url + route, body, timeout=120), time.monotonic() - t0

    ((status, _, text), elapsed), health = health_while(stack.url, send)
    error = assert_openai_error(status, text, 400)
    assert error["message"].startswith("This model's maximum context length is 40960 tokens. However, your request "
                                       "has 300000 messages"), error
    assert error["param"] == "messages"
    assert elapsed < 10, elapsed  # (38 s of CPU before)
    assert max(health, default=0) < 1.0, max(health)


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
def test_messages_with_more_text_than_the_context_can_hold_are_a_400_before_rendering(stack, qwen3):
    from core.render import max_chars_per_token

    limit = qwen3.max_model_len * max_chars_per_token(qwen3.tokenizer)
    # twice the bound: refused before templating (just past it, the rendered prompt gets vLLM's own 400)
    messages = [{"role": "user", "content": "x" * (limit // 2 + 1)} for _ in range(4)]
    status, _, text = post_bytes(stack.url + "/v1/chat/completions/render", json.dumps({"messages": messages}).encode())
    error = assert_openai_error(status, text, 400)
    assert f"your messages contain {4 * (limit // 2 + 1)} characters (more than {limit} characters" in error["message"]
    # with truncation the text is cut, not refused (vLLM's rule): the bound does not apply
    status, _, text = post_bytes(stack.url + "/v1/chat/completions/render",
                                 json.dumps({"messages": messages[:1], "truncate_prompt_tokens": 100}).encode())
    assert status == 200, text[:300]


# -- item 1 (its validation half): prompts x n is bounded by what an engine serves ----------------

@pytest.mark.parametrize("route,body,asked", [
    ("/v1/completions", {"prompt": [f"p{i}" for i in range(64)], "n": 16384}, "64 prompts x n=16384 = 1048576"),
    ("/v1/completions/render", {"prompt": [f"p{i}" for i in range(64)], "n": 16384}, "64 prompts x n=16384 = 1048576"),
    ("/v1/completions", {"prompt": [[9707, 11]] * 2, "n": 513}, "2 prompts x n=513 = 1026"),
    ("/v1/chat/completions", {"messages": MESSAGES, "n": 1025}, "n=1025"),
    ("/v1/chat/completions/render", {"messages": MESSAGES, "n": 16384}, "n=16384"),
])
def test_more_choices_than_an_engine_serves_is_a_quick_400(stack, route, body, asked):
    import time

    raw = json.dumps({**body, "temperature": 1, "max_tokens": 1}).encode()

    def send():
        t0 = time.monotonic()
        return post_bytes(stack.url + route, raw), time.monotonic() - t0

    ((status, _, text), elapsed), health = health_while(stack.url, send)
    error = assert_openai_error(status, text, 400)
    assert error["message"].startswith("This server generates at most 1024 choices per request (prompts x n, "
                                       f"--max-choices); this request asks for {asked}."), error["message"]
    assert error["param"] == "n"
    assert elapsed < 5 and max(health, default=0) < 1.0, (elapsed, health)


def test_choices_up_to_the_bound_are_served_and_vllm_limits_keep_vllm_messages(stack):
    stack.set_replies(["Hi"])
    body = {"prompt": [f"p{i}" for i in range(4)], "n": 256, "temperature": 1, "max_tokens": 1}
    status, _, text = post_bytes(stack.url + "/v1/completions", json.dumps(body).encode(), timeout=60)
    assert status == 200, text[:300]
    assert len(json.loads(text)["choices"]) == 1024
    status, _, text = post_bytes(stack.url + "/v1/completions/render",
                                 json.dumps({"prompt": "x", "n": 20000}).encode())
    assert json.loads(text)["error"]["message"].startswith("n must be at most 16384, got 20000.")
