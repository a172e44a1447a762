"""Gemma 4 (`--reasoning-parser gemma4 --tool-call-parser gemma4`) over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/gemma4.json (vLLM 0.33's answers,
tests/oracle/record_gemma4.py) go through HTTP on the same tokenizer (Qwen3's with Gemma 4's
control tokens): the non-streaming message and finish_reason equal vLLM's, and the stream, one
token per call with the state carried by the client, aggregates to it. Where the start of the
output decides the `<|channel>` rewrite, our answer is vLLM's own recorded stream (a documented
vLLM bug: core/parsers/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier" / "gemma4.json")
                    .read_text(encoding="utf-8"))
EOS = GOLDEN["eos_token_id"]
# both parsers
RECORDS = [r for r in GOLDEN["records"] if r["case"]["reasoning_parser"] == r["case"]["tool_parser"] == "gemma4"]
# vLLM's answer reads the whole output for the `<|channel>` rewrite; ours (and vLLM's stream) its start
DECIDED_ON_THE_START = {"closed_without_start", "thought_then_channel"}


@pytest.fixture(scope="module")
def gemma4_model(parser_models) -> ModelInfo:
    return parser_models["gemma4"]


@pytest.fixture
async def client(aiohttp_client, gemma4_model):
    config = ServerConfig(reasoning_parser="gemma4", tool_call_parser="gemma4", enable_auto_tool_choice=True)
    return await aiohttp_client(create_app(config, gemma4_model))


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
async def test_derender_equals_vllm_and_streams_to_it(client, gemma4_model, record):
    prompt = gemma4_model.tokenizer.encode("<|turn>user\nhi<turn|>\n<|turn>model\n")
    case = record["case"]
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"],
               "chat_template_kwargs": case["chat_template_kwargs"]}
    message, finish = await derender_whole(client, prompt, request, record, EOS)
    expected = record["message"]
    if case["name"].split("__")[0] in DECIDED_ON_THE_START:
        expected = {k: v for k, v in record["vllm_stream"].items() if k != "finish_reason"}
        assert expected != record["message"]
    assert message == expected
    assert finish == record["finish_reason"]
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    want = dict(expected, content=expected["content"] or None)
    if case["request"].get("include_reasoning") is False:
        want["reasoning"] = None
    assert streamed == want
    assert last == record["finish_reason"]
