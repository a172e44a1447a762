"""POST /v1/messages through the proxy in front of a reference engine, with the official anthropic SDK.

The engine's replies are scripted Qwen3 outputs (qwen3 reasoning + hermes tool calls); the proxy
runs the hermes + qwen3 parsers. `messages.create` and `messages.stream` (its helpers:
`text_stream`, `get_final_message`) must agree; stop sequences, max_tokens cuts, a tool_result
loop, count_tokens, auth by `x-api-key`, errors in Anthropic's shape (before and after the
stream started), aborts, pings and the shapes real clients send.
"""

from __future__ import annotations

import asyncio
import json
import time

import anthropic
import orjson
import pytest

from core.derender.adapters import messages as adapter
from proxy.reference_engine import Faults
from tests.proxy.frontdoor_stack import PARSERS, Stack, post_raw

MODEL = "tiny-qwen3"
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"name": "get_weather", "description": "Weather in a city", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}
PLAIN_REPLY = "Paris is the capital of France. 東京 is not, and 🙂 is an emoji."
THINK_REPLY = "<think>\nThe user greets me; be brief.\n</think>\n\nHello! How can I help?"
TOOL_REPLY = ("<think>\nI should look up the weather.\n</think>\n\nLet me check.<tool_call>\n"
              '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>')
AFTER_TOOL_REPLY = "<think>\nThe tool answered.\n</think>\n\nIt is 22°C in Paris."


@pytest.fixture(scope="module")
def stack(qwen3):
    s = Stack(qwen3, **PARSERS)
    yield s
    s.close()


def client(stack: Stack, **options) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key=options.pop("api_key", "unused"), max_retries=0,
                               **options)


def comparable(message: anthropic.types.Message) -> dict:
    """The message without what is random per request: its id, tool-use ids, thinking signatures."""
    out = message.model_dump(exclude_none=True, warnings=False)
    out["id"] = "msg"
    for block in out["content"]:
        if block["type"] == "tool_use":
            assert block["id"].startswith("chatcmpl-tool-")  # vLLM's id rule (hermes)
            block["id"] = "toolu"
        if block["type"] == "thinking":
            assert len(block["signature"]) == 32
            block["signature"] = "sig"
    return out


def create_and_stream(stack: Stack, **request) -> tuple[anthropic.types.Message, anthropic.types.Message, str]:
    c = client(stack)
    created = c.messages.create(model=MODEL, **request)
    with c.messages.stream(model=MODEL, **request) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert comparable(final) == comparable(created)
    assert text == "".join(b.text for b in created.content if b.type == "text")
    return created, final, text


def sse(text: str) -> list[tuple[str, dict]]:
    out = []
    for frame in text.split("\n\n"):
        if frame:
            name, data = frame.split("\n")
            out.append((name[len("event: "):], orjson.loads(data[len("data: "):])))
    return out


# -- messages.create and messages.stream ---------------------------------------------------------

def test_text(stack, qwen3):
    stack.set_replies([PLAIN_REPLY])
    created, _, text = create_and_stream(stack, max_tokens=100, messages=USER, thinking={"type": "disabled"})
    assert text == PLAIN_REPLY
    assert [b.type for b in created.content] == ["text"] and created.content[0].text == PLAIN_REPLY
    assert created.type == "message" and created.role == "assistant" and created.model == MODEL
    assert created.id.startswith("chatcmpl-")  # vLLM's message id is its chat completion's
    assert (created.stop_reason, created.stop_sequence) == ("end_turn", None)
    assert created.usage.output_tokens == len(qwen3.tokenizer.encode(PLAIN_REPLY)) + 1  # the EOS counts
    sent = stack.last_engine_request()
    assert created.usage.input_tokens == len(sent["token_ids"])
    assert sent["sampling_params"]["stop"] == [] and sent["sampling_params"]["max_tokens"] == 100


def test_thinking(stack):
    stack.set_replies([THINK_REPLY])
    created, _, text = create_and_stream(stack, max_tokens=100, messages=USER)
    thinking, answer = created.content
    assert thinking.type == "thinking" and thinking.thinking == "\nThe user greets me; be brief.\n"
    assert thinking.signature
    assert answer.type == "text" and answer.text == text == "\n\nHello! How can I help?"
    assert created.stop_reason == "end_turn"


def test_tool_use_and_a_tool_result_loop(stack, qwen3):
    stack.set_replies([TOOL_REPLY])
    created, _, _ = create_and_stream(stack, max_tokens=200, messages=USER, tools=[WEATHER])
    assert [b.type for b in created.content] == ["thinking", "text", "tool_use"]
    call = created.content[2]
    assert (call.name, call.input) == ("get_weather", {"city": "Paris", "unit": "celsius"})
    assert created.stop_reason == "tool_use"
    # the client runs the tool and sends the result back (text-block array content, as agents do)
    stack.set_replies([AFTER_TOOL_REPLY])
    follow_up = USER + [{"role": "assistant", "content": created.content},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                      "content": [{"type": "text", "text": "22°C, sunny"}]}]}]
    answer, _, text = create_and_stream(stack, max_tokens=200, messages=follow_up, tools=[WEATHER])
    assert text == "\n\nIt is 22°C in Paris." and answer.stop_reason == "end_turn"
    prompt = qwen3.tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert "<tool_response>\n22°C, sunny\n</tool_response>" in prompt
    assert '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}' in prompt


def test_stop_sequences_cut_and_abort_the_engine(stack):
    reply = " ".join(f"w{i}" for i in range(60))
    stack.set_replies([reply], token_delay_ms=5)
    created, final, text = create_and_stream(stack, max_tokens=100, messages=USER, thinking={"type": "disabled"},
                                             stop_sequences=["zzz", "w7 "])
    assert text == "w0 w1 w2 w3 w4 w5 w6 "
    assert (created.stop_reason, created.stop_sequence) == ("stop_sequence", "w7 ")
    aborted = stack.wait_aborted()
    assert aborted and aborted[0]["request_id"].startswith("generate-tokens-chatcmpl-")
    assert stack.last_engine_request()["sampling_params"]["stop"] == []  # the proxy matches them


def test_stop_sequence_while_streaming_aborts_at_once(stack):
    stack.set_replies([" ".join(f"w{i}" for i in range(200))], token_delay_ms=10)
    with client(stack).messages.stream(model=MODEL, max_tokens=300, messages=USER, thinking={"type": "disabled"},
                                       stop_sequences=["w3 "]) as stream:
        final = stream.get_final_message()
    ended = time.monotonic()
    aborted = stack.wait_aborted()
    assert aborted and aborted[0]["time"] - ended < 1.0  # long before the engine's 200 tokens
    assert final.content[0].text == "w0 w1 w2 " and final.stop_sequence == "w3 "


def test_max_tokens_cut(stack):
    stack.set_replies([PLAIN_REPLY])
    created, _, text = create_and_stream(stack, max_tokens=5, messages=USER, thinking={"type": "disabled"})
    assert (created.stop_reason, created.usage.output_tokens) == ("max_tokens", 5)
    assert PLAIN_REPLY.startswith(text) and text


def test_a_tool_call_cut_by_max_tokens_is_a_tool_use_block_streamed_or_not(stack):
    stack.set_replies([TOOL_REPLY])
    created, _, _ = create_and_stream(stack, max_tokens=30, messages=USER, tools=[WEATHER])
    assert [b.type for b in created.content] == ["thinking", "text", "tool_use"]
    assert created.stop_reason == "max_tokens" and created.content[2].name == "get_weather"


def test_async_client_stream(stack):
    stack.set_replies([TOOL_REPLY])

    async def run():
        c = anthropic.AsyncAnthropic(base_url=stack.url, api_key="unused", max_retries=0)
        async with c.messages.stream(model=MODEL, max_tokens=200, messages=USER, tools=[WEATHER]) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_message()
        await c.close()
        return kinds, final

    kinds, final = asyncio.run(run())
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds and final.content[2].input == {"city": "Paris", "unit": "celsius"}


def test_wire_format(stack):
    """vLLM's framing: `event: NAME` + `data: JSON` (exclude_unset key sets), no [DONE]; the
    non-streamed message without nulls."""
    stack.set_replies(["Hi there"])
    body = {"model": MODEL, "max_tokens": 20, "messages": USER, "thinking": {"type": "disabled"}}
    status, headers, text = post_raw(stack.url + "/v1/messages", {**body, "stream": True})
    assert status == 200 and headers["content-type"] == "text/event-stream; charset=utf-8"
    events = sse(text)
    assert [name for name, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                            "content_block_delta", "content_block_stop", "message_delta",
                                            "message_stop"]
    start = events[0][1]["message"]
    assert list(start) == ["id", "type", "role", "content", "model", "stop_reason", "stop_sequence", "usage"]
    assert events[2][1] == {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}, "index": 0}
    assert events[5][1] == {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"input_tokens": start["usage"]["input_tokens"], "output_tokens": 3}}
    assert not text.endswith("[DONE]\n\n")
    status, headers, text = post_raw(stack.url + "/v1/messages", body)
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(text) == {"id": json.loads(text)["id"], "type": "message", "role": "assistant",
                                "content": [{"type": "text", "text": "Hi there"}], "model": MODEL,
                                "stop_reason": "end_turn", "usage": {"input_tokens": start["usage"]["input_tokens"],
                                                                     "output_tokens": 3}}


def test_x_request_id_names_the_message(stack):
    stack.set_replies(["Hi"])
    message = client(stack).messages.create(model=MODEL, max_tokens=5, messages=USER,
                                            extra_headers={"X-Request-Id": "abc"})
    assert message.id == "chatcmpl-abc"


def test_ping_on_a_long_silence(stack, monkeypatch):
    monkeypatch.setattr(adapter, "PING_INTERVAL", 0.03)
    stack.set_replies(["one two"], token_delay_ms=150)
    text = post_raw(stack.url + "/v1/messages", {"model": MODEL, "max_tokens": 20, "messages": USER, "stream": True,
                                                 "thinking": {"type": "disabled"}})[2]
    events = sse(text)
    names = [name for name, _ in events]
    assert "ping" in names and names.index("ping") > 0  # after message_start
    # the keepalive re-arms after each ping and each write: 150 ms silences at a 30 ms interval
    assert names.count("ping") >= 2
    assert all(payload == {"type": "ping"} for name, payload in events if name == "ping")
    # the SDK skips them
    stack.set_replies(["one two"], token_delay_ms=150)
    with client(stack).messages.stream(model=MODEL, max_tokens=20, messages=USER,
                                       thinking={"type": "disabled"}) as stream:
        assert stream.get_final_message().content[0].text == "one two"


def test_no_ping_when_tokens_flow(stack):
    stack.set_replies([PLAIN_REPLY])
    text = post_raw(stack.url + "/v1/messages", {"model": MODEL, "max_tokens": 50, "messages": USER, "stream": True})[2]
    assert "event: ping" not in text  # the default interval is seconds


# -- count_tokens, auth, headers ---------------------------------------------------------------

def test_count_tokens_is_the_prompt_the_engine_gets(stack):
    stack.set_replies(["Hi"])
    c = client(stack)
    request = {"messages": USER, "tools": [WEATHER], "system": [{"type": "text", "text": "Be brief."}]}
    counted = c.messages.count_tokens(model=MODEL, **request)
    created = c.messages.create(model=MODEL, max_tokens=5, **request)
    assert counted.input_tokens == created.usage.input_tokens == len(stack.last_engine_request()["token_ids"])


def test_x_api_key_and_bearer(qwen3):
    stack = Stack(qwen3, api_key="sk-secret", **PARSERS)
    try:
        stack.set_replies(["Hi"])
        assert client(stack, api_key="sk-secret").messages.create(model=MODEL, max_tokens=5,
                                                                   messages=USER).content
        bearer = anthropic.Anthropic(base_url=stack.url, auth_token="sk-secret", max_retries=0)
        assert bearer.messages.count_tokens(model=MODEL, messages=USER).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as err:
            client(stack, api_key="wrong").messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert err.value.body["type"] == "error" and err.value.body["error"]["type"] == "authentication_error"
        with pytest.raises(anthropic.AuthenticationError):
            with client(stack, api_key="wrong").messages.stream(model=MODEL, max_tokens=5, messages=USER) as s:
                s.get_final_message()
    finally:
        stack.close()


def test_anthropic_version_and_beta_headers_are_accepted(stack):
    stack.set_replies(["Hi"])
    c = client(stack, default_headers={"anthropic-beta": "prompt-caching-2024-07-31,interleaved-thinking-2025-05-14",
                                       "anthropic-version": "2023-06-01"})
    off = {"type": "disabled"}
    assert c.messages.create(model=MODEL, max_tokens=5, messages=USER, thinking=off).content[0].text == "Hi"
    beta = c.beta.messages.create(model=MODEL, max_tokens=5, messages=USER, thinking=off,
                                  betas=["token-efficient-tools-2025-02-19"])
    assert beta.content[0].text == "Hi"


# -- what real clients send ------------------------------------------------------------------------

def test_real_client_shapes(stack, qwen3):
    """cache_control on system / message / tool blocks, $defs in a schema, many tools, tool_result
    text-block arrays, disable_parallel_tool_use, metadata."""
    stack.set_replies([TOOL_REPLY])
    ephemeral = {"type": "ephemeral"}
    tools = [{**WEATHER, "cache_control": ephemeral,
              "input_schema": {"type": "object", "$defs": {"Unit": {"type": "string", "enum": ["celsius", "f"]}},
                               "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/$defs/Unit"}}}}]
    tools += [{"name": f"tool_{i}", "description": f"Tool number {i}", "input_schema": {
        "type": "object", "properties": {"arg": {"type": "integer"}}}} for i in range(60)]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Weather?", "cache_control": ephemeral}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "tool_3",
                                                   "input": {"arg": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "cache_control": ephemeral,
                                              "content": [{"type": "text", "text": "first"},
                                                          {"type": "text", "text": "second"}]},
                                             {"type": "text", "text": "And Paris?"}]}]
    created = client(stack).messages.create(
        model=MODEL, max_tokens=200, messages=messages, tools=tools, metadata={"user_id": "u-1"},
        system=[{"type": "text", "text": "You are helpful.", "cache_control": ephemeral}],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert created.stop_reason == "tool_use" and created.content[-1].input == {"city": "Paris", "unit": "celsius"}
    prompt = qwen3.tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert "You are helpful." in prompt and "tool_59" in prompt and "$defs" in prompt
    assert "<tool_response>\nfirst\nsecond\n</tool_response>" in prompt


def test_disable_parallel_tool_use_keeps_one_call(stack):
    two = TOOL_REPLY + '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
    stack.set_replies([two])
    both, _, _ = create_and_stream(stack, max_tokens=200, messages=USER, tools=[WEATHER])
    assert [b.input["city"] for b in both.content if b.type == "tool_use"] == ["Paris", "Rome"]
    one, _, _ = create_and_stream(stack, max_tokens=200, messages=USER, tools=[WEATHER],
                                  tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert [b.input["city"] for b in one.content if b.type == "tool_use"] == ["Paris"]


# -- errors ----------------------------------------------------------------------------------------

def anthropic_error(err: anthropic.APIStatusError, kind: str) -> str:
    assert err.body["type"] == "error" and err.body["error"]["type"] == kind, err.body
    return err.body["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_request_errors_are_anthropic_shaped(stack, stream):
    """The messages of vLLM's recorded answers (serve_messages_nonstream.json), in Anthropic's shape."""
    c = client(stack)
    base = {"max_tokens": 24, "messages": USER, "stream": stream}
    with pytest.raises(anthropic.NotFoundError) as err:
        c.post("/v1/messages", cast_to=object, body={**base, "model": "claude-x"})
    assert anthropic_error(err.value, "not_found_error") == "The model `claude-x` does not exist. Valid aliases: tiny-qwen3."
    with pytest.raises(anthropic.BadRequestError) as err:
        c.post("/v1/messages", cast_to=object, body={"model": MODEL, "messages": USER, "stream": stream})
    assert anthropic_error(err.value, "invalid_request_error") == (
        "1 validation error:\n  {'type': 'missing', 'loc': 'body.max_tokens', 'msg': 'Field required', "
        "'input': '<dict of 3 items>'}")
    image = [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                        "data": "AAAA"}}]}]
    with pytest.raises(anthropic.BadRequestError) as err:
        c.post("/v1/messages", cast_to=object, body={**base, "model": MODEL, "messages": image})
    assert anthropic_error(err.value, "invalid_request_error") == "tiny-qwen3 is not a multimodal model"
    with pytest.raises(anthropic.BadRequestError) as err:
        c.post("/v1/messages", cast_to=object, body={**base, "model": MODEL, "max_tokens": 90000})
    assert anthropic_error(err.value, "invalid_request_error").startswith(
        "max_completion_tokens=90000 cannot be greater than max_model_len=40960.")
    for bad in ({**base, "model": MODEL, "max_tokens": 0}, {**base, "model": MODEL, "messages": "hi"},
                {**base, "model": MODEL, "tool_choice": {"type": "tool"}, "tools": [WEATHER]}):
        with pytest.raises(anthropic.BadRequestError) as err:
            c.post("/v1/messages", cast_to=object, body=bad)
        anthropic_error(err.value, "invalid_request_error")
    status, _, text = post_raw(stack.url + "/v1/messages", [1, 2])  # type: ignore[arg-type]
    assert status == 400 and json.loads(text)["error"]["type"] == "invalid_request_error"


def test_engine_failures_before_the_stream_are_anthropic_errors(stack, qwen3):
    c = client(stack)
    stack.set_replies(["x"], faults=Faults(fail_status=500))
    for stream in (False, True):
        with pytest.raises(anthropic.APIStatusError) as err:
            c.post("/v1/messages", cast_to=object, body={"model": MODEL, "max_tokens": 5, "messages": USER,
                                                         "stream": stream})
        assert err.value.status_code == 502
        anthropic_error(err.value, "api_error")
    stack.set_replies(["x"], faults=Faults(fail_status=400))
    with pytest.raises(anthropic.BadRequestError) as err:
        c.messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert "injected failure" in anthropic_error(err.value, "invalid_request_error")
    down = Stack(qwen3, engines=0, dead_engines=1)
    try:
        with pytest.raises(anthropic.APIStatusError) as err:
            client(down).messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert err.value.status_code == 503
        anthropic_error(err.value, "overloaded_error")
        # the engine is now taken out: the 503 says when to retry
        with pytest.raises(anthropic.APIStatusError) as err:
            client(down).messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert err.value.status_code == 503 and int(err.value.response.headers["retry-after"]) > 0
        anthropic_error(err.value, "overloaded_error")
    finally:
        down.close()


def test_engine_timeouts_before_and_after_the_stream(qwen3):
    stack = Stack(qwen3, engine_idle_timeout=0.3, engine_first_token_timeout=0.3)
    try:
        stack.set_replies(["a b c"], faults=Faults(stall_after=0))
        with pytest.raises(anthropic.APIStatusError) as err:
            with client(stack).messages.stream(model=MODEL, max_tokens=20, messages=USER) as s:
                s.get_final_message()
        assert err.value.status_code == 504
        anthropic_error(err.value, "api_error")
        # stalls after 2 tokens: an error event ends the stream, the engine request is aborted
        stack.set_replies(["a b c d e f"], faults=Faults(stall_after=2))
        text = post_raw(stack.url + "/v1/messages", {"model": MODEL, "max_tokens": 20, "messages": USER,
                                                     "stream": True})[2]
        events = sse(text)
        assert [n for n, _ in events[-2:]] == ["content_block_stop", "error"]
        assert events[-1][1]["error"]["type"] == "api_error" and "message_stop" not in text
        assert stack.wait_aborted()
    finally:
        stack.close()


def test_engine_dropping_the_stream_is_an_error_event(stack):
    stack.set_replies(["a b c d e f g h"], faults=Faults(drop_after=3))
    with pytest.raises(anthropic.APIStatusError) as err:
        with client(stack).messages.stream(model=MODEL, max_tokens=20, messages=USER,
                                           thinking={"type": "disabled"}) as stream:
            for _ in stream.text_stream:
                pass
    body = err.value.body
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert "closed the stream" in body["error"]["message"]


def test_client_disconnect_mid_stream_aborts_the_engine_request(stack):
    stack.set_replies([" ".join(["tok"] * 200)], token_delay_ms=20)

    async def run() -> float:
        c = anthropic.AsyncAnthropic(base_url=stack.url, api_key="unused", max_retries=0)
        async with c.messages.stream(model=MODEL, max_tokens=300, messages=USER,
                                     thinking={"type": "disabled"}) as stream:
            seen = 0
            async for _ in stream:
                seen += 1
                if seen == 5:
                    break
        closed = time.monotonic()
        await c.close()
        return closed

    closed = asyncio.run(run())
    aborted = stack.wait_aborted()
    assert aborted, "the engine never saw the abort"
    assert aborted[0]["time"] - closed < 0.5


def test_client_disconnect_non_streaming_aborts(stack):
    stack.set_replies(["slow " * 50], token_delay_ms=20)
    with pytest.raises(TimeoutError):
        post_raw(stack.url + "/v1/messages", {"model": MODEL, "max_tokens": 100, "messages": USER}, timeout=0.3)
    assert stack.wait_aborted()
