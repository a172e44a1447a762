"""K2 Horizon (`--reasoning-parser k2_horizon --tool-call-parser k2_horizon`) over HTTP.

The engine's token ids of tests/core/parsers/golden_frontier/k2_horizon.json (vLLM 0.33's answers,
tests/oracle/record_k2_horizon.py) go through the chat derender route with the goldens' parser
pair on the same test tokenizer: the non-streaming message and finish_reason equal vLLM's, and the
stream, one token per call with the state carried by the client, aggregates to it but for the
documented stream differences (tested in tests/core/parsers/test_k2_horizon.py). Outputs holding
special-token text are left out (skip_special_tokens stays on: the IFM tags are not special). The
render route refuses what vLLM's parsers refuse (an unknown `tool_call_format`, a `reasoning_effort`
without think tags) with a 400, and constrains nothing for "required".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.core.parsers import test_k2_horizon
from tests.models import served_as
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier" /
                     "k2_horizon.json").read_text(encoding="utf-8"))
PROMPT = "<|ifm|im_start|>user\nhi<|ifm|im_end|>\n<|ifm|im_start|>assistant\n<ifm|think>\n"
FLAGS = {"reasoning_parser": "k2_horizon", "tool_call_parser": "k2_horizon", "enable_auto_tool_choice": True}
# the documented stream differences (the non-streaming answer is still checked)
STREAM_DIFFERS = ("junk_in_group", "bad_call_after_good", "truncated_after_call")
CASES = [r for r in GOLDEN["records"] if r["case"]["reasoning_parser"] and r["case"]["tool_parser"]
         and not r["case"]["name"].startswith("special_tokens")]
TOOLS = CASES[0]["case"]["request"]["tools"]


@pytest.fixture(scope="module")
def model(parser_models) -> ModelInfo:
    return served_as(parser_models["k2_horizon"], "tiny-k2-horizon")


@pytest.mark.parametrize("record", CASES, ids=[r["case"]["name"] for r in CASES])
async def test_derender_equals_vllm_and_streams_to_it(aiohttp_client, model, record):
    client = await aiohttp_client(create_app(ServerConfig(**FLAGS), model))
    prompt = model.tokenizer.encode(PROMPT)
    case = record["case"]
    kwargs = case["chat_template_kwargs"]
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"],
               **({"chat_template_kwargs": kwargs} if kwargs else {})}
    eos = model.tokenizer.token_to_id("<|ifm|im_end|>")
    message, finish = await derender_whole(client, prompt, request, record, eos)
    want, want_finish = record["message"], record["finish_reason"]
    if test_k2_horizon.vllm_bug(case):  # ours deliberately differs (README): the stream below must send it
        assert message != want
        want, want_finish = message, finish
    assert (message, finish) == (want, want_finish)
    named_two = case["name"].startswith("two_calls") and isinstance(case["request"].get("tool_choice"), dict)
    if case["name"].startswith(STREAM_DIFFERS) or named_two:
        return
    streamed, last = await derender_per_token(client, prompt, request, record, eos)
    expected = dict(want, content=want["content"] or None, reasoning=want["reasoning"] or None)
    assert (streamed, last) == (expected, want_finish)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"chat_template_kwargs": {"tool_call_format": "yaml"}},
     "Unsupported tool_call_format 'yaml'. Supported values: json, xml, xml_typed."),
    ({"reasoning_effort": "minimal"}, "Unsupported reasoning_effort 'minimal'. Supported values: high, medium, low."),
    ({"chat_template_kwargs": {"reasoning_effort": "none"}},
     "Unsupported reasoning_effort 'none'. Supported values: high, medium, low."),
])
async def test_render_refuses_what_vllm_refuses(aiohttp_client, model, kwargs, message):
    client = await aiohttp_client(create_app(ServerConfig(**FLAGS), model))
    resp = await client.post("/v1/chat/completions/render", json={
        "model": "tiny-k2-horizon", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, **kwargs})
    body = await resp.json()
    assert resp.status == 400, body
    assert body["error"]["message"] == message and body["error"]["type"] == "BadRequestError"


async def test_render_constrains_nothing_for_forced_choices(aiohttp_client, model):
    client = await aiohttp_client(create_app(ServerConfig(**FLAGS), model))
    resp = await client.post("/v1/chat/completions/render", json={
        "model": "tiny-k2-horizon", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
        "tool_choice": "required", "chat_template_kwargs": {"tool_call_format": "json", "reasoning_effort": "low"}})
    body = await resp.json()
    assert resp.status == 200, body
    params = body["sampling_params"]
    assert params.get("structured_outputs") is None
    assert params.get("skip_special_tokens", True) is True
