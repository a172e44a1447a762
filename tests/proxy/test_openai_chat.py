"""/v1/chat/completions through the proxy in front of a reference engine, with the official client."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import orjson
import pytest

from core.protocol.chat import ChatCompletionRequest
from core.render import RenderOptions, render_chat
from proxy.reference_engine import Faults
from tests.proxy.frontdoor_stack import PARSERS, Stack, post_raw

IM_END = 151645
PLAIN_REPLY = "Paris is the capital of France. 東京 is not, and 🙂 is an emoji."
THINK_REPLY = "<think>\nThe user greets me; be brief.\n</think>\n\nHello! How can I help?"
TOOL_REPLY = ("<think>\nI should look up the weather.\n</think>\n\n<tool_call>\n"
              "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}, "unit": {"type": "string"}}}}}]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def plain(qwen3):
    stack = Stack(qwen3)
    yield stack
    stack.close()


@pytest.fixture(scope="module")
def parsed(qwen3):
    stack = Stack(qwen3, **PARSERS)
    yield stack
    stack.close()



def aggregate(chunks) -> dict:
    """Fold streamed chunks into per-index messages, as a client would."""
    out: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            agg = out.setdefault(choice.index, {"role": None, "content": "", "reasoning": "", "tool_calls": {},
                                                "finish_reason": None, "stop_reason": None, "roles": 0,
                                                "logprobs": []})
            delta = choice.delta
            if delta.role:
                agg["role"] = delta.role
                agg["roles"] += 1
            agg["content"] += delta.content or ""
            agg["reasoning"] += getattr(delta, "reasoning", None) or ""
            for call in delta.tool_calls or []:
                slot = agg["tool_calls"].setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                if call.id:
                    assert slot["id"] in (None, call.id)
                    slot["id"] = call.id
                if call.function and call.function.name:
                    slot["name"] += call.function.name
                if call.function and call.function.arguments:
                    slot["arguments"] += call.function.arguments
            if choice.logprobs and choice.logprobs.content:
                agg["logprobs"] += choice.logprobs.content
            if choice.finish_reason:
                agg["finish_reason"] = choice.finish_reason
                agg["stop_reason"] = getattr(choice, "stop_reason", None)
    return out


def rendered_prompt_len(model, messages, **kwargs) -> int:
    req = ChatCompletionRequest.model_validate({"messages": messages, **kwargs})
    return len(render_chat(model, RenderOptions.build(), req)["token_ids"])


# -- plain server (no parsers) -------------------------------------------------------------------

def test_chat_non_streaming_plain(plain, qwen3):
    plain.set_replies([PLAIN_REPLY])
    r = plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    (choice,) = r.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == PLAIN_REPLY  # EOS dropped from the text
    assert choice.finish_reason == "stop" and choice.model_extra["stop_reason"] is None
    assert r.object == "chat.completion" and r.model == "tiny-qwen3" and r.id.startswith("chatcmpl-")
    n_reply = len(qwen3.tokenizer.encode(PLAIN_REPLY))
    assert r.usage.completion_tokens == n_reply + 1  # the EOS token counts
    assert r.usage.prompt_tokens == rendered_prompt_len(qwen3, MESSAGES)
    # the engine got the rendered prompt, and no stop strings
    sent = plain.last_engine_request()
    assert sent["sampling_params"]["stop"] == [] and sent["stream"] is False
    assert len(sent["token_ids"]) == r.usage.prompt_tokens


def test_chat_stream_equals_non_stream_plain(plain):
    plain.set_replies([PLAIN_REPLY])
    c = plain.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True))
    agg = aggregate(chunks)[0]
    assert agg["roles"] == 1 and agg["role"] == "assistant"
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    assert agg["content"] == full.choices[0].message.content
    assert agg["finish_reason"] == full.choices[0].finish_reason == "stop"
    assert all(ch.id == chunks[0].id for ch in chunks)


async def test_chat_async_client_stream(plain):
    plain.set_replies([PLAIN_REPLY])
    c = plain.async_client()
    stream = await c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True,
                                             stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert aggregate(chunks)[0]["content"] == PLAIN_REPLY
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    await c.close()


def test_sse_wire_format_matches_vllm_serve(plain):
    """The raw bytes: `data: {...}\\n\\n` events, vLLM's exclude_unset key sets, `data: [DONE]`."""
    plain.set_replies(["Hi there"])
    body = {"model": "tiny-qwen3", "messages": MESSAGES, "stream": True,
            "stream_options": {"include_usage": True}}
    status, headers, text = post_raw(plain.url + "/v1/chat/completions", body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    parts = text.split("\n\n")
    assert parts[-2:] == ["data: [DONE]", ""]
    events = [orjson.loads(p[len("data: "):]) for p in parts[:-2]]
    role, *tokens, last, usage = events
    assert list(role) == ["id", "object", "created", "model", "choices", "prompt_token_ids", "prompt_text"]
    assert role["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                "finish_reason": None}]
    for event in tokens:
        assert list(event) == ["id", "object", "created", "model", "choices", "kv_transfer_params"]
        assert list(event["choices"][0]) == ["index", "delta", "logprobs", "finish_reason", "token_ids"]
        assert list(event["choices"][0]["delta"]) == ["content"]
    assert list(last["choices"][0]) == ["index", "delta", "logprobs", "finish_reason", "stop_reason", "token_ids",
                                        "weight_versions"]
    # the engine reports EOS as stop_reason 151645; `vllm serve` (coupled) says null for the EOS
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["choices"][0]["stop_reason"] is None
    assert "".join(e["choices"][0]["delta"]["content"] for e in tokens + [last]) == "Hi there"
    assert usage == {"id": role["id"], "object": "chat.completion.chunk", "created": role["created"],
                     "model": "tiny-qwen3", "choices": [],
                     "usage": {"prompt_tokens": usage["usage"]["prompt_tokens"],
                               "total_tokens": usage["usage"]["total_tokens"],
                               "completion_tokens": len(tokens) + 1}}


def test_non_streaming_wire_format(plain):
    plain.set_replies(["Hi"])
    raw = json.loads(post_raw(plain.url + "/v1/chat/completions", {"messages": MESSAGES})[2])
    assert list(raw) == ["id", "object", "created", "model", "choices", "service_tier", "system_fingerprint",
                         "usage", "prompt_logprobs", "prompt_token_ids", "prompt_text", "kv_transfer_params",
                         "ec_transfer_params", "metrics"]
    choice = raw["choices"][0]
    assert list(choice) == ["index", "message", "logprobs", "finish_reason", "stop_reason", "token_ids",
                            "routed_experts", "weight_versions"]
    assert choice["message"] == {"role": "assistant", "content": "Hi", "refusal": None, "annotations": None,
                                 "audio": None, "function_call": None, "reasoning": None}
    assert list(raw["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details",
                                  "completion_tokens_details"]


def test_stop_token_ids_and_secondary_eos_keep_their_stop_reason(plain, qwen3):
    plain.set_replies(["Hello there, world"])
    c = plain.client()
    ids = qwen3.tokenizer.encode("Hello there, world")
    r = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, extra_body={"stop_token_ids": [ids[2]]})
    assert r.choices[0].message.content == qwen3.tokenizer.decode(ids[:2])  # the stop token's text is dropped
    assert (r.choices[0].finish_reason, r.choices[0].model_extra["stop_reason"]) == ("stop", ids[2])
    # <|endoftext|> (151643) is an EOS of the generation config only: vLLM reports it as a stop token id
    r = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logit_bias={"151643": 100})
    assert (r.choices[0].message.content, r.choices[0].model_extra["stop_reason"]) == ("", 151643)


def test_n3_interleaved_one_state_per_index(plain):
    replies = ["Alpha beta gamma.", "One two three four.", "Short."]
    plain.set_replies(replies)
    c = plain.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, n=3)
    assert sorted(ch.index for ch in full.choices) == [0, 1, 2]
    assert sorted(ch.message.content for ch in full.choices) == sorted(replies)
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, n=3, stream=True))
    agg = aggregate(chunks)
    for choice in full.choices:
        assert agg[choice.index]["content"] == choice.message.content
        assert agg[choice.index]["roles"] == 1
    assert plain.last_engine_request()["sampling_params"]["n"] == 3  # one engine request for all three
    assert full.usage.completion_tokens == sum(len(plain.model.tokenizer.encode(r)) + 1 for r in replies)


def test_logprobs_stream_and_non_stream(plain):
    plain.set_replies(["Bonjour 🙂 world"])
    c = plain.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True, top_logprobs=2)
    content = full.choices[0].logprobs.content
    ids = plain.model.tokenizer.encode("Bonjour 🙂 world") + [IM_END]
    assert len(content) == len(ids)
    assert "".join(e.token for e in content[:-1]) == "Bonjour 🙂 world"  # U+FFFD repaired across bytes
    assert all(len(e.top_logprobs) <= 2 for e in content)
    assert all(e.bytes == list(e.token.encode()) for e in content)
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True,
                                            top_logprobs=2, stream=True))
    streamed = aggregate(chunks)[0]["logprobs"]
    assert [e.model_dump() for e in streamed] == [e.model_dump() for e in content]


def test_continuous_usage_stats(plain):
    plain.set_replies(["a b c d"])
    chunks = list(plain.client().chat.completions.create(
        model="tiny-qwen3", messages=MESSAGES, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True}))
    counts = [ch.usage.completion_tokens for ch in chunks[:-1]]
    assert counts[0] == 0  # the role chunk
    assert counts == sorted(counts) and counts[-1] == chunks[-1].usage.completion_tokens


def test_stop_string_cuts_mid_stream_and_aborts_engine(plain):
    reply = " ".join(f"w{i}" for i in range(60))
    plain.set_replies([reply], token_delay_ms=5)
    chunks = list(plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True,
                                                        stop=["w7 "]))
    agg = aggregate(chunks)[0]
    assert agg["content"] == "w0 w1 w2 w3 w4 w5 w6 "
    assert agg["finish_reason"] == "stop" and agg["stop_reason"] == "w7 "
    aborted = plain.wait_aborted()
    assert aborted and aborted[0]["request_id"].startswith("generate-tokens-chatcmpl-")
    assert plain.last_engine_request()["sampling_params"]["stop"] == []  # never sent to the engine


def test_stop_string_non_streaming(plain):
    plain.set_replies(["one two three four five six seven"], token_delay_ms=2)
    r = plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stop=["four", "zzz"])
    assert r.choices[0].message.content == "one two three "
    assert (r.choices[0].finish_reason, r.choices[0].model_extra["stop_reason"]) == ("stop", "four")
    assert plain.wait_aborted()


def test_client_disconnect_aborts_engine_within_100ms(plain):
    plain.set_replies([" ".join(["tok"] * 200)], token_delay_ms=20)

    async def run() -> float:
        c = plain.async_client()
        stream = await c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 3:
                break
        closed = time.monotonic()
        await stream.close()
        await c.close()
        return closed

    closed = asyncio.run(run())
    aborted = plain.wait_aborted()
    assert aborted, "the engine never saw the abort"
    assert aborted[0]["time"] - closed < 0.1


def test_client_disconnect_non_streaming_aborts(plain):
    plain.set_replies(["slow " * 50], token_delay_ms=20)
    with pytest.raises(TimeoutError):
        post_raw(plain.url + "/v1/chat/completions", {"messages": MESSAGES}, timeout=0.3)
    assert plain.wait_aborted()


def test_unknown_model_is_404(plain):
    with pytest.raises(openai.NotFoundError) as err:
        plain.client().chat.completions.create(model="nope", messages=MESSAGES)
    assert "The model `nope` does not exist" in err.value.body["message"]


def test_validation_error_is_400(plain):
    with pytest.raises(openai.BadRequestError):
        plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES,
                                              stream_options={"include_usage": True})


# -- errors from the engine tier -------------------------------------------------------------------

def test_engine_error_status_passes_through(plain):
    plain.set_replies(["x"], faults=Faults(fail_status=400))
    with pytest.raises(openai.BadRequestError) as err:
        plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
    assert "injected failure" in err.value.body["message"]
    plain.set_replies(["x"], faults=Faults(fail_status=500))
    with pytest.raises(openai.APIStatusError) as err5:
        plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
    assert err5.value.status_code == 502


def test_engine_dropping_the_stream_gives_error_event_then_done(plain):
    plain.set_replies(["a b c d e f g h"], faults=Faults(drop_after=3))
    text = post_raw(plain.url + "/v1/chat/completions", {"messages": MESSAGES, "stream": True})[2]
    parts = text.split("\n\n")
    assert parts[-2:] == ["data: [DONE]", ""]
    error = orjson.loads(parts[-3][len("data: "):])
    assert error["error"]["code"] == 502 and "closed the stream" in error["error"]["message"]
    with pytest.raises(openai.APIError):
        list(plain.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True))


def test_engine_down(qwen3):
    stack = Stack(qwen3, engines=0, dead_engines=1)
    try:
        with pytest.raises(openai.APIStatusError) as err:
            stack.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
        assert err.value.status_code == 503
        assert err.value.body["type"] == "ServiceUnavailableError"
    finally:
        stack.close()


def test_retry_on_another_engine_before_first_token(qwen3):
    stack = Stack(qwen3, engines=1, dead_engines=1)
    try:
        stack.set_replies(["fine"])
        r = stack.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES)
        assert r.choices[0].message.content == "fine"
        chunks = list(stack.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True))
        assert aggregate(chunks)[0]["content"] == "fine"
    finally:
        stack.close()


# -- parsers: hermes tools + qwen3 reasoning -------------------------------------------------------

def test_tool_call_with_reasoning_stream_equals_non_stream(parsed):
    parsed.set_replies([TOOL_REPLY])
    c = parsed.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS)
    msg = full.choices[0].message
    assert full.choices[0].finish_reason == "tool_calls"
    assert "look up the weather" in msg.model_extra["reasoning"]
    (call,) = msg.tool_calls
    assert call.function.name == "get_weather" and call.id.startswith("chatcmpl-tool-")
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}
    assert msg.content is None
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS, stream=True))
    agg = aggregate(chunks)[0]
    assert agg["finish_reason"] == "tool_calls"
    assert agg["reasoning"] == msg.model_extra["reasoning"]
    assert agg["content"] == (msg.content or "")
    (streamed,) = agg["tool_calls"].values()
    assert streamed["name"] == "get_weather" and streamed["id"].startswith("chatcmpl-tool-")
    assert json.loads(streamed["arguments"]) == json.loads(call.function.arguments)
    # the parser path makes the engine keep special tokens (hermes adjust_request)
    assert parsed.last_engine_request()["sampling_params"]["skip_special_tokens"] is False
    assert "<|im_end|>" not in agg["content"] + agg["reasoning"]


def test_reasoning_and_content_split(parsed):
    parsed.set_replies([THINK_REPLY])
    c = parsed.client()
    full = c.chat.completions.create(model="tiny-qwen3", messages=[{"role": "user", "content": "hi"}])
    msg = full.choices[0].message
    assert msg.model_extra["reasoning"].strip() == "The user greets me; be brief."
    assert msg.content.strip() == "Hello! How can I help?"
    assert full.choices[0].finish_reason == "stop"
    agg = aggregate(c.chat.completions.create(model="tiny-qwen3", messages=[{"role": "user", "content": "hi"}],
                                              stream=True))[0]
    assert (agg["reasoning"], agg["content"]) == (msg.model_extra["reasoning"], msg.content)


def test_reasoning_field_names(qwen3):
    stack = Stack(qwen3, reasoning_field="both", **PARSERS)
    try:
        stack.set_replies([THINK_REPLY])
        raw = json.loads(post_raw(stack.url + "/v1/chat/completions", {"messages": MESSAGES})[2])
        message = raw["choices"][0]["message"]
        assert message["reasoning"] == message["reasoning_content"] and "be brief" in message["reasoning"]
        raw = post_raw(stack.url + "/v1/chat/completions", {"messages": MESSAGES, "stream": True})[2]
        deltas = [orjson.loads(p[6:])["choices"][0]["delta"] for p in raw.split("\n\n")
                  if p.startswith("data: {")]
        assert any("reasoning_content" in d and "reasoning" in d for d in deltas)
    finally:
        stack.close()


def test_tool_choice_none_keeps_markup_as_content(parsed):
    parsed.set_replies([TOOL_REPLY])
    r = parsed.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS,
                                               tool_choice="none")
    assert not r.choices[0].message.tool_calls and r.choices[0].finish_reason == "stop"
    assert "<tool_call>" in r.choices[0].message.content


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
def test_engine_timeouts(qwen3):
    stack = Stack(qwen3, engine_idle_timeout=0.3, engine_first_token_timeout=0.3)
    try:
        # stalls after 2 tokens: the idle timeout ends the stream with an error event, engine aborted
        stack.set_replies(["a b c d e f"], faults=Faults(stall_after=2))
        text = post_raw(stack.url + "/v1/chat/completions", {"messages": MESSAGES, "stream": True})[2]
        parts = text.split("\n\n")
        assert parts[-2:] == ["data: [DONE]", ""]
        assert orjson.loads(parts[-3][6:])["error"]["code"] == 504
        assert stack.wait_aborted()
        # stalls before the first token: a JSON 504 before any SSE
        stack.set_replies(["a b c"], faults=Faults(stall_after=0))
        with pytest.raises(openai.APIStatusError) as err:
            stack.client().chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
        assert err.value.status_code == 504
    finally:
        stack.close()


def test_client_gone_before_first_token_aborts_engine(plain):
    plain.set_replies(["a b c"], faults=Faults(stall_after=0))
    with pytest.raises(TimeoutError):
        post_raw(plain.url + "/v1/chat/completions", {"messages": MESSAGES, "stream": True}, timeout=0.3)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and len({a["via"] for a in plain.engine_state.aborted}) < 2:
        time.sleep(0.01)
    # the dropped connection and the explicit abort both reach the engine
    assert {a["via"] for a in plain.engine_state.aborted} == {"disconnect", "abort_requests"}


def test_chat_echo_continues_the_last_message(plain):
    plain.set_replies([" forty-two."])
    messages = [{"role": "user", "content": "What is the answer?"},
                {"role": "assistant", "content": "The answer is"}]
    extra = {"echo": True, "add_generation_prompt": False, "continue_final_message": True}
    c = plain.client()
    r = c.chat.completions.create(model="tiny-qwen3", messages=messages, extra_body=extra)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == "The answer is forty-two."
    chunks = list(c.chat.completions.create(model="tiny-qwen3", messages=messages, extra_body=extra, stream=True))
    assert aggregate(chunks)[0]["content"] == "The answer is forty-two."


def test_include_reasoning_false_hides_reasoning_and_logprobs(parsed):
    parsed.set_replies([THINK_REPLY])
    c = parsed.client()
    extra = {"include_reasoning": False}
    r = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True, extra_body=extra)
    assert r.choices[0].message.model_extra["reasoning"] is None
    assert r.choices[0].message.content.strip() == "Hello! How can I help?"
    assert r.choices[0].logprobs is None  # token logprobs would leak the hidden reasoning
    agg = aggregate(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, logprobs=True,
                                              extra_body=extra, stream=True))[0]
    assert (agg["reasoning"], agg["content"], agg["logprobs"]) == ("", r.choices[0].message.content, [])


def test_tool_choice_required_and_named(parsed):
    """hermes answers forced tool choices in its own markup (vLLM constrains it with a structural tag)."""
    c = parsed.client()
    no_think = {"chat_template_kwargs": {"enable_thinking": False}}
    parsed.set_replies(['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'])
    r = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS, tool_choice="required",
                                  extra_body=no_think)
    (call,) = r.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content == ""
    assert parsed.last_engine_request()["sampling_params"].get("structured_outputs")  # the constraint went out
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS, tool_choice=named,
                                  extra_body=no_think)
    (call,) = r.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert r.choices[0].finish_reason == "stop"  # a named choice keeps "stop"
    agg = aggregate(c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, tools=TOOLS, tool_choice=named,
                                              stream=True, extra_body=no_think))[0]
    (streamed,) = agg["tool_calls"].values()
    assert (streamed["name"], json.loads(streamed["arguments"])) == ("get_weather", {"city": "Paris"})
    assert agg["finish_reason"] == "stop"


def test_same_x_request_id_twice_one_disconnect_aborts_only_its_own_generation(plain):
    reply = " ".join(["tok"] * 40)
    plain.set_replies([reply], token_delay_ms=10)
    headers = {"X-Request-Id": "shared-id"}

    async def run() -> tuple[str, str]:
        c = plain.async_client(default_headers=headers)
        leaver = await c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
        stayer = await c.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, stream=True)
        async for _ in leaver:
            break
        await leaver.close()  # client one goes away; client two must still get its whole answer
        text = "".join([ch.choices[0].delta.content or "" async for ch in stayer if ch.choices])
        await c.close()
        return text, stayer.response.headers.get("x-request-id", "")

    text, _ = asyncio.run(run())
    assert text == reply
    aborted = plain.wait_aborted()
    assert len({a["request_id"] for a in aborted}) == 1  # one request, by stream close and abort call
    assert aborted[0]["request_id"].startswith("generate-tokens-chatcmpl-shared-id-")
    # both engine requests carried the client's id as their base, yet were distinct
    ids = [r["request_id"] for r in list(plain.engine_state.received)[-2:]]
    assert len(set(ids)) == 2 and all(i.startswith("chatcmpl-shared-id-") for i in ids)


def test_stop_strings_past_the_limit_are_refused_before_the_engine(plain):
    # core.stop.MAX_STOP_CHARS bounds what the proxy matches (vLLM bounds only the number, 4)
    import openai

    from core.stop import MAX_STOP_CHARS

    received = len(plain.engine_state.received)
    client = plain.client()
    stop = [c * (MAX_STOP_CHARS // 4) for c in "zyx"] + ["w" * (MAX_STOP_CHARS // 4 + 1)]  # one char too many
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="tiny-qwen3", messages=[{"role": "user", "content": "Hi"}],
                                           stop=stop, stream=stream)
        assert caught.value.body["param"] == "stop" and str(MAX_STOP_CHARS) in caught.value.body["message"]
    assert len(plain.engine_state.received) == received
