"""The derender routes over real HTTP: stream == non-stream, stop strings, signed state,
parser path, bounds before decode, and no 500 whatever the body."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.config import ServerConfig

PROMPT = [151644, 872, 198, 45764, 23811, 13, 151645, 198, 151644, 77091, 198]
RID = "generate-tokens-chatcmpl-0011223344556677"
CHAT = "/v1/chat/completions/derender"
CMPL = "/v1/completions/derender"


@pytest.fixture
async def client(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(), qwen3))


@pytest.fixture
async def signed(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(stream_state_secret="k3y"), qwen3))


@pytest.fixture
async def parsed(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(tool_call_parser="hermes", reasoning_parser="qwen3",
                                                        enable_auto_tool_choice=True), qwen3))


def chunk(ids, finish=None, stop_reason=None, index=0, usage=None):
    return {"request_id": RID, "usage": usage, "output_mode": "tokens",
            "choices": [{"index": index, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": ids}]}


async def stream(client, path, chunks, request=None, key="chat_request"):
    state, out = None, []
    for n, c in enumerate(chunks):
        body = {"stream": True, "generate_chunk": c, "stream_state": state,
                "prompt_token_ids": PROMPT if n == 0 else None}
        if request is not None:
            body[key] = request
        resp = await client.post(path, json=body)
        data = await resp.json()
        assert resp.status == 200, data
        out.append(data["chunk"])
        state = data["stream_state"]
    return out, state


async def test_chat_stream_per_token_equals_non_stream(client, qwen3):
    ids = qwen3.tokenizer.encode("Bonjour 世界! 🎉 Streaming works.") + [151645]
    chunks = [chunk([i]) for i in ids[:-1]] + [chunk([ids[-1]], "stop", 151645,
                                                     usage={"prompt_tokens": 11, "completion_tokens": len(ids)})]
    out, _ = await stream(client, CHAT, chunks)
    resp = await client.post(CHAT, json={"prompt_token_ids": PROMPT, "generate_response": {
        "request_id": RID, "choices": [{"index": 0, "finish_reason": "stop", "stop_reason": 151645, "token_ids": ids}]}})
    whole = (await resp.json())["choices"][0]
    assert "".join(c["choices"][0]["delta"]["content"] or "" for c in out) == whole["message"]["content"]
    assert out[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["choices"][0]["delta"]["role"] is None for c in out[1:])
    assert out[-1]["choices"][0]["finish_reason"] == whole["finish_reason"] == "stop"
    assert out[-1]["usage"] == {"prompt_tokens": 11, "total_tokens": 11 + len(ids), "completion_tokens": len(ids),
                                "prompt_tokens_details": None, "completion_tokens_details": None}


async def test_completion_stream_stop_string(client, qwen3):
    ids = qwen3.tokenizer.encode("alpha beta gamma delta epsilon")
    request = {"prompt": "x", "stop": [" gamma"], "include_stop_str_in_output": True}
    out, _ = await stream(client, CMPL, [chunk([i]) for i in ids], request, key="completion_request")
    text = "".join(ch["text"] for c in out for ch in c["choices"])
    assert text == "alpha beta gamma"
    final = [ch for c in out for ch in c["choices"] if ch["finish_reason"]]
    assert [(f["finish_reason"], f["stop_reason"]) for f in final] == [("stop", " gamma")]


async def test_signed_state_round_trip_and_tamper(signed, qwen3):
    ids = qwen3.tokenizer.encode("signed states")
    out, state = await stream(signed, CHAT, [chunk([i]) for i in ids])
    assert "".join(c["choices"][0]["delta"]["content"] or "" for c in out) == "signed states"
    head, sig = state.rsplit(".", 1)
    bad = head + "." + ("A" if sig[0] != "A" else "B") + sig[1:]
    resp = await signed.post(CHAT, json={"stream": True, "generate_chunk": chunk([11]), "stream_state": bad})
    body = await resp.json()
    assert resp.status == 400 and body["error"]["message"].startswith("invalid stream_state: signature")


async def test_parser_path_over_http(parsed, qwen3):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}]
    request = {"messages": [{"role": "user", "content": "find"}], "tools": tools}
    reply = '<think>\nsearch it\n</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"q": "ünïcode"}}\n</tool_call>'
    ids = qwen3.tokenizer.encode(reply) + [151645]
    out, state = await stream(parsed, CHAT, [chunk([i]) for i in ids[:-1]] + [chunk([ids[-1]], "stop", 151645)],
                              request)
    deltas = [c["choices"][0]["delta"] for c in out]
    assert "".join(d["reasoning"] or "" for d in deltas) == "\nsearch it\n"
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "lookup" and calls[0]["id"].startswith("chatcmpl-tool-")
    assert json.loads("".join(tc["function"]["arguments"] or "" for tc in calls)) == {"q": "ünïcode"}
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert not any(d["content"] for d in deltas)
    assert len(state) < 2048
    resp = await parsed.post(CHAT, json={"prompt_token_ids": PROMPT, "chat_request": request, "generate_response": {
        "request_id": RID, "choices": [{"index": 0, "finish_reason": "stop", "stop_reason": 151645, "token_ids": ids}]}})
    msg = (await resp.json())["choices"][0]["message"]
    assert msg["reasoning"] == "\nsearch it\n" and msg["tool_calls"][0]["function"]["name"] == "lookup"


async def test_bounds_are_checked_before_decoding(aiohttp_client, qwen3):
    import dataclasses

    client = await aiohttp_client(create_app(ServerConfig(), dataclasses.replace(qwen3, max_model_len=4096)))
    huge = {"generate_response": {"request_id": RID, "choices": [
        {"index": 0, "finish_reason": "length", "token_ids": [9707] * 4097,
         "logprobs": {"content": [{"token_id": 9707, "logprob": -1.0, "top_logprobs": []}] * 4097}}]}}
    t0 = time.perf_counter()
    resp = await client.post(CHAT, json=huge)
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == "token_ids length (4097) in choice 0 exceeds max_model_len (4096)."
    assert time.perf_counter() - t0 < 2.0
    top = {"generate_response": {"request_id": RID, "choices": [
        {"index": 0, "token_ids": [9707], "logprobs": {"content": [
            {"token_id": 9707, "logprob": -1.0, "top_logprobs": [{"token_id": 1, "logprob": -2.0}] * 21}]}}]}}
    resp = await client.post(CHAT, json=top)
    assert (await resp.json())["error"]["message"] == "top_logprobs count (21) in choice 0 exceeds max_logprobs (20)."


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 2**41) | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["stream", "generate_chunk", "generate_response", "generate_responses",
                                            "choices", "token_ids", "index", "finish_reason", "stop_reason",
                                            "stream_state", "prompt_token_ids", "logprobs", "content", "token_id",
                                            "chat_request", "completion_request", "messages", "stop", "usage"]),
                           inner, max_size=5), max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=JSONISH, path=st.sampled_from([CHAT, CMPL]))
async def test_garbage_never_500(client, body, path):
    resp = await client.post(path, data=json.dumps(body), headers={"Content-Type": "application/json"})
    assert resp.status in (200, 400, 404), await resp.text()
    data = await resp.json()
    if resp.status != 200:
        assert set(data["error"]) == {"message", "type", "param", "code"}


async def test_garbage_state_never_500(client, qwen3):
    _, state = await stream(client, CHAT, [chunk([9707])])
    for bad in [state[:-3], state + "x", state.replace("ds1.", "ds2."), "ds1." + "!" * 10, "ds1.", 12, [], {"a": 1},
                state[:4] + state[5:], "ds1.bnVsbA"]:  # "null"
        resp = await client.post(CHAT, json={"stream": True, "generate_chunk": chunk([11]), "stream_state": bad})
        data = await resp.json()
        assert resp.status == 400, (bad, data)
        assert data["error"]["message"].startswith("invalid stream_state: ")


NEG_LOGPROBS = {"content": [{"token_id": -5, "logprob": -1.0, "top_logprobs": []}]}


@pytest.mark.parametrize("path,body,message", [
    # answers of vLLM 0.33 (8111) to the same bodies: the tokenizer's OverflowError becomes a 400
    (CHAT, {"stream": True, "generate_chunk": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": [9707], "logprobs": NEG_LOGPROBS}]}}, "invalid stream_state: derender failed"),
    (CHAT, {"generate_response": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": [9707], "logprobs": NEG_LOGPROBS}]}}, "number too small to fit in target type"),
    (CMPL, {"stream": True, "generate_chunk": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": [9707], "logprobs": NEG_LOGPROBS}]}}, "number too small to fit in target type"),
    (CMPL, {"generate_responses": [{"request_id": "r", "choices": [
        {"index": 0, "token_ids": [9707], "logprobs": NEG_LOGPROBS}]}]}, "number too small to fit in target type"),
])
async def test_negative_logprob_ids_are_400_like_vllm(client, path, body, message):
    resp = await client.post(path, json=body)
    assert resp.status == 400
    assert (await resp.json())["error"] == {"message": message, "type": "BadRequestError", "param": None, "code": 400}


async def test_stop_strings_past_the_limit_are_a_400_where_they_are_matched(client, qwen3):
    # 4 strings (vLLM's most) of 250,001 chars: past core.stop.MAX_STOP_CHARS, so the derender endpoints
    # refuse them (vLLM bounds only their number); render passes `stop` on as vLLM does
    from core.stop import MAX_STOP_CHARS

    stop = [f"{i}" + "z" * 250_000 for i in range(4)]
    assert sum(map(len, stop)) > MAX_STOP_CHARS
    body = {"stream": True, "generate_chunk": chunk([45764]), "stream_state": None, "prompt_token_ids": PROMPT,
            "completion_request": {"prompt": "x", "stop": stop}}
    resp = await client.post(CMPL, json=body)
    error = (await resp.json())["error"]
    assert resp.status == 400 and error["param"] == "stop" and str(MAX_STOP_CHARS) in error["message"]
    body["completion_request"]["stop"] = [s[:-1] for s in stop]  # exactly at the bound: fine
    assert (await client.post(CMPL, json=body)).status == 200
    rendered = await client.post("/v1/completions/render", json={"prompt": "x", "stop": stop})
    assert rendered.status == 200
    assert (await rendered.json())[0]["sampling_params"]["stop"] == stop
