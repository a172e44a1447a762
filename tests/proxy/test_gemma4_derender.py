"""Gemma 4 (`--reasoning-parser gemma4 --tool-call-parser gemma4`) over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/gemma4.json (vLLM 0.33's answers,
tests/oracle/record_gemma4.py) go through HTTP on the same tokenizer (Qwen3's with Gemma 4's
control tokens): the non-streaming message and finish_reason equal vLLM's, and the stream, one
token per call with the state carried by the client, aggregates to it.
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
# both parsers; the start-of-output cases a stream decides early are tested in test_gemma4.py
RECORDS = [r for r in GOLDEN["records"] if r["case"]["reasoning_parser"] == r["case"]["tool_parser"] == "gemma4"]
EARLY = {"closed_without_start", "stray_markers", "thought_then_channel"}


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
    assert message == record["message"]
    assert finish == record["finish_reason"]
    if case["name"].split("__")[0] in EARLY:
        return
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    want = dict(record["message"], content=record["message"]["content"] or None)
    if case["request"].get("include_reasoning") is False:
        want["reasoning"] = None
    assert streamed == want
    assert last == record["finish_reason"]
