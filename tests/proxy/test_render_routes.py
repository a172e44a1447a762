"""The render and tokenize routes over real HTTP (beyond the recorded vLLM answers)."""

from __future__ import annotations

import re

import pytest

from core.protocol.chat import ChatCompletionRequest
from core.render import RenderOptions, render_chat
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.proxy.loop_watch import assert_loop_kept_running, watch_loop

PARSERS = {"tool_call_parser": "hermes", "reasoning_parser": "qwen3", "enable_auto_tool_choice": True}


@pytest.fixture
async def client(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(**PARSERS), qwen3))


def long_text(words: int) -> str:
    vocab = "alpha beta gamma delta epsilon zeta 数据 über 42 (x), done.".split()
    return " ".join(vocab[(i * 7) % len(vocab)] for i in range(words))


async def test_request_ids(client):
    body = {"messages": [{"role": "user", "content": "hi"}]}
    out = await (await client.post("/v1/chat/completions/render", json=body)).json()
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{16}", out["request_id"])
    out = await (await client.post("/v1/chat/completions/render", json={**body, "request_id": "abc"})).json()
    assert out["request_id"] == "chatcmpl-abc"
    resp = await client.post("/v1/chat/completions/render", json={**body, "request_id": "abc"},
                             headers={"X-Request-Id": "from-header"})
    assert (await resp.json())["request_id"] == "chatcmpl-from-header"
    out = await (await client.post("/v1/completions/render", json={"prompt": ["a", "b"], "request_id": "r"})).json()
    assert [o["request_id"] for o in out] == ["cmpl-r-0", "cmpl-r-1"]


async def test_long_prompt_over_http_equals_in_process(client, qwen3):
    body = {"messages": [{"role": "user", "content": long_text(20000)}], "request_id": "x"}
    resp = await client.post("/v1/chat/completions/render", json=body)
    assert resp.status == 200
    out = await resp.json()
    options = RenderOptions.build(**PARSERS)
    assert out == render_chat(qwen3, options, ChatCompletionRequest.model_validate(body))
    # and the ids are the Rust tokenizer's for the rendered text
    text = qwen3.tokenizer.decode(out["token_ids"])
    assert qwen3.tokenizer.encode(text) == out["token_ids"]


async def test_large_render_does_not_block_the_event_loop(client):
    # offsets force the plain Rust tokenizer: a slow render, run in the thread pool with the GIL
    # released; a ticker on the event loop must keep running meanwhile
    body = {"messages": [{"role": "user", "content": long_text(25000)}], "return_token_offsets": True}
    resp, elapsed, gaps = await watch_loop(client.post("/v1/chat/completions/render", json=body))
    assert resp.status == 200
    out = await resp.json()
    assert len(out["token_offsets"]) == len(out["token_ids"]) > 25000
    assert len(gaps) > 10, f"the event loop ran {len(gaps)} ticks during a {elapsed:.3f}s render"
    assert_loop_kept_running(gaps, elapsed)


async def test_errors_are_openai_bodies(client):
    for path, body in (("/v1/chat/completions/render", {"messages": "nope"}),
                       ("/v1/completions/render", {"prompt": {"a": 1}}),
                       ("/v1/chat/completions/render", {"messages": [{"role": "user", "content": 5}]}),
                       ("/v1/chat/completions/render", {"messages": [{"role": "user", "content": [7]}]}),
                       ("/tokenize", {"messages": [{"role": "user", "content": "x"}], "tools": 3}),
                       ("/detokenize", {"tokens": "x"})):
        resp = await client.post(path, json=body)
        assert resp.status == 400, (path, body)
        err = (await resp.json())["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["code"] == 400


async def test_tokenize_detokenize_round_trip(client):
    text = "Ünïcödé ✓ — 你好，世界 🎉 <|im_end|>"
    tok = await (await client.post("/tokenize", json={"prompt": text, "return_token_strs": True})).json()
    assert tok["count"] == len(tok["tokens"]) == len(tok["token_strs"]) and tok["max_model_len"] == 40960
    detok = await (await client.post("/detokenize", json={"tokens": tok["tokens"]})).json()
    assert detok == {"prompt": text}


def test_unknown_parser_fails_at_startup(qwen3):
    with pytest.raises(ValueError, match="unknown tool-call parser 'nope'"):
        create_app(ServerConfig(tool_call_parser="nope", enable_auto_tool_choice=True), qwen3)
    with pytest.raises(ValueError, match="unknown reasoning parser 'nah'"):
        create_app(ServerConfig(reasoning_parser="nah"), qwen3)


async def test_reasoning_effort_map_flag_reaches_the_template(aiohttp_client, qwen3):
    from proxy.cli import build_parser
    from proxy.config import config_from_args

    args = build_parser().parse_args(["serve", "--reasoning-effort-map", '{"minimal": "none"}'])
    client = await aiohttp_client(create_app(config_from_args(args), qwen3))
    resp = await client.post("/v1/chat/completions/render", json={
        "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "minimal"})
    assert resp.status == 200
    kwargs = (await resp.json())["parse_context"]["chat_template_kwargs"]
    assert kwargs["reasoning_effort"] == "none" and kwargs["enable_thinking"] is False
