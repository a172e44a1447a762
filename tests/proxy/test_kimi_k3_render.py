"""Kimi K3's renderer mode `kimi_k3` (core/renderers/kimi_k3.py) over HTTP, field for field
against vLLM 0.33.

Fixture: tests/fixtures/oracle/render_kimi_k3.json (tests/oracle/record_kimi_k3_render.py): chat
render (thinking, efforts, tools and tool_choice, tool and reasoning history, response formats,
sampling, length limits), completions render, /tokenize, Responses and Messages render, all on
`tiny-kimi-k3-render`: Qwen3's tokenizer with K3's `<|open|>`, `<|close|>`, `<|sep|>`,
`<|end_of_msg|>` as special tokens (ids 151669-151672), served with `--tokenizer-mode kimi_k3
--tool-call-parser kimi_k3 --reasoning-parser kimi_k3 --enable-auto-tool-choice`. The directory is
built here the same way (nothing is downloaded). Every case is replayed through one real HTTP
server (module-scoped) and its status and body must equal vLLM's, render request ids aside.

The same server, with the reference engine behind it, answers `/v1/chat/completions` through the
official client: the rendered prompt reaches the engine and the kimi_k3 parsers read its XTML back.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from core.model import ModelInfo
from proxy.model_loader import load_model
from tests.core.parsers.parser_models import KIMI_K3_TOKENS, with_added_tokens
from tests.oracle_fixtures import load_fixture
from tests.proxy.frontdoor_stack import Stack
from tests.proxy.frontier_derender import stream_chat
from tests.proxy.test_fuzz_endpoints import Http, check_answer, encode, mutated

NAME = "tiny-kimi-k3-render"
# K3's four structural tokens, in the ids the recorded model gave them (151669-151672)
KIMI_K3_RENDER_TOKENS = [*KIMI_K3_TOKENS, "<|end_of_msg|>"]
FLAGS = {"tool_call_parser": "kimi_k3", "reasoning_parser": "kimi_k3", "enable_auto_tool_choice": True,
         "tokenizer_mode": "kimi_k3"}
CASES = load_fixture("render_kimi_k3")
HEADERS = {"Content-Type": "application/json"}


def k3_render_dir(model_dirs: dict[str, Path], root: Path) -> Path:
    """tiny-kimi-k3-render's tokenizer: tiny-qwen3's with the four K3 tokens (special)."""
    return with_added_tokens(model_dirs["qwen3"], root / NAME, KIMI_K3_RENDER_TOKENS)


@pytest.fixture(scope="module")
def k3_model(model_dirs, tmp_path_factory) -> ModelInfo:
    path = k3_render_dir(model_dirs, tmp_path_factory.mktemp("k3render"))
    model = load_model(str(path), served_model_names=[NAME], tokenizer_mode="kimi_k3")
    assert [model.tokenizer.token_to_id(t) for t in KIMI_K3_RENDER_TOKENS] == [151669, 151670, 151671, 151672]
    return model


@pytest.fixture(scope="module")
def stack(k3_model):
    s = Stack(k3_model, served_model_name=[NAME], **FLAGS)
    yield s
    s.close()


@pytest.fixture(scope="module")
def http(stack):
    client = Http(stack.url)
    yield client
    client.close()


def _scrub_id(body):
    for item in body if isinstance(body, list) else [body]:
        if isinstance(item, dict) and isinstance(item.get("request_id"), str):
            item["request_id"] = re.sub(r"([-_])[0-9a-f]{16}(-\d+)?$", r"\1<random>\2", item["request_id"])
    return body


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_render_matches_vllm(case, http):
    resp = http.post(case["path"], json.dumps(case["request"]).encode(), HEADERS)
    body = resp.json()
    assert resp.status_code == case["status"], body
    assert _scrub_id(body) == _scrub_id(case["response"])


def test_every_endpoint_is_replayed():
    paths = {c["path"] for c in CASES}
    assert paths == {"/v1/chat/completions/render", "/v1/completions/render", "/tokenize", "/v1/responses/render",
                     "/v1/messages/render"}
    assert len(CASES) == 99


def test_architecture_implies_the_mode():
    """`KimiK3ForConditionalGeneration` renders with kimi_k3 unless the mode says otherwise (vLLM's
    ModelConfig); `hf` keeps the chat-template path."""
    from core.renderers import renderer_for

    k3 = {"architectures": ["KimiK3ForConditionalGeneration"]}
    assert renderer_for(k3) == renderer_for(k3, "auto") == renderer_for({}, "kimi_k3") == "kimi_k3"
    assert renderer_for(k3, "hf") == "hf"
    with pytest.raises(ValueError, match="unknown tokenizer mode"):
        renderer_for(k3, "kimi_k4")


def test_no_chat_template_needed(k3_model):
    """K3 ships no Jinja template: the renderer never reads one."""
    from core.render import RenderOptions, TokenBudget, render_chat_ids

    tokenizer = copy.copy(k3_model.tokenizer)
    tokenizer.chat_template = None
    bare = dataclasses.replace(k3_model, tokenizer=tokenizer)
    budget = TokenBudget(None, None, None, None, False)
    messages = [{"role": "user", "content": "hi"}]
    kwargs = {"add_generation_prompt": True}
    ids = [render_chat_ids(model, RenderOptions(), messages, tool_dicts=None, request_template=None,
                           chat_kwargs=kwargs, budget=budget)[0] for model in (bare, k3_model)]
    assert ids[0] == ids[1] and ids[0][-3:] == [151669, k3_model.tokenizer.token_to_id("think"), 151671]


# -- the front door: the official client -> the proxy (kimi_k3 renderer and parsers) -> the reference engine --

WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Hangzhou for 3 days?"}]
CALL_REPLY = ("I need the weather tool.<|close|>think<|sep|><|open|>response<|sep|>Checking.<|close|>response<|sep|>"
              '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
              '<|open|>argument key="city" type="string"<|sep|>杭州<|close|>argument<|sep|>'
              '<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
              "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>")


def test_front_door_reasoning_then_a_call(stack, k3_model):
    """/v1/chat/completions renders K3's prompt (its ids reach the engine), and the kimi_k3 parsers read
    the engine's XTML back; streamed and non-streamed answers agree."""
    stack.set_replies([CALL_REPLY])
    client = stack.client()
    answer = client.chat.completions.create(model=NAME, messages=ASK, tools=WEATHER, reasoning_effort="low")
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert (choice.message.model_extra["reasoning"], choice.message.content) == ("I need the weather tool.",
                                                                                "Checking.")
    [call] = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "杭州", "days": 3})
    prompt = k3_model.tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert prompt.startswith('<|open|>message role="system" type="tool-declare"<|sep|># Tools')
    assert "`thinking_effort=low`" in prompt
    assert prompt.endswith('<|open|>message role="user"<|sep|>Weather in Hangzhou for 3 days?<|close|>message<|sep|>'
                           '<|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>')
    streamed = stream_chat(client, model=NAME, messages=ASK, tools=WEATHER, reasoning_effort="low")
    assert streamed[:2] == ("Checking.", "I need the weather tool.") and streamed[3] == "tool_calls"
    assert [(c["name"], c["arguments"]) for c in streamed[2]] == [("get_weather", call.function.arguments)]


def test_front_door_thinking_off(stack, k3_model):
    stack.set_replies(["Sunny all week.<|close|>response<|sep|><|close|>message<|sep|>"])
    client = stack.client()
    nothink = {"chat_template_kwargs": {"thinking": False}}
    answer = client.chat.completions.create(model=NAME, messages=ASK, extra_body=nothink)
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == ("Sunny all week.", "stop")
    assert k3_model.tokenizer.decode(stack.last_engine_request()["token_ids"]).endswith("<|open|>response<|sep|>")
    assert stream_chat(client, model=NAME, messages=ASK, extra_body=nothink) == ("Sunny all week.", None, [], "stop")


# -- hostile clients: never a 5xx (tests/proxy/test_fuzz_endpoints.py's property, K3's renderer) ---------

FUZZ_BODY = {
    "model": NAME, "tools": WEATHER, "tool_choice": "auto", "reasoning_effort": "high",
    "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}},
    "chat_template_kwargs": {"thinking": True, "thinking_effort": "max"},
    "messages": [{"role": "system", "content": "Be brief.", "name": "sys"},
                 {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
                 {"role": "assistant", "content": "Checking.", "reasoning": "Use the tool.", "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                   "arguments": '{"city": "Paris", "days": 2}'}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "sunny"}]},
                 {"role": "user", "content": "Thanks"}],
}


@pytest.mark.slow  # ~10 s: 300 hypothesis examples over HTTP
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=mutated(FUZZ_BODY))
def test_render_never_fails_badly(http, body):
    for path in ("/v1/chat/completions/render", "/tokenize"):
        check_answer(http.post(path, encode(body), HEADERS))


def test_without_the_fast_encoder_the_ids_are_the_same(k3_model, monkeypatch):
    """A tokenizer the fast encoder does not take encodes the text pieces in one Rust batch: every
    recorded chat prompt comes out the same both ways."""
    from core.protocol.chat import ChatCompletionRequest
    from core.render import RenderOptions, render_chat
    from core.renderers import kimi_k3

    options = RenderOptions.build(tool_call_parser="kimi_k3", reasoning_parser="kimi_k3",
                                  enable_auto_tool_choice=True)
    chats = [c for c in CASES if c["path"] == "/v1/chat/completions/render" and c["status"] == 200
             and "kv_transfer_params" not in c["request"]]
    assert kimi_k3.text_encoder(k3_model.tokenizer) is not None
    monkeypatch.setattr(kimi_k3, "text_encoder", lambda tokenizer: None)
    for case in chats:
        generate = render_chat(k3_model, options, ChatCompletionRequest.model_validate(case["request"]))
        assert generate["token_ids"] == case["response"]["token_ids"], case["name"]
