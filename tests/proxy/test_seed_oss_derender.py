"""Seed-OSS (`--reasoning-parser seed_oss --tool-call-parser seed_oss`) over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/seed_oss.json (vLLM 0.33's answers,
tests/oracle/record_seed_oss.py) go through HTTP on the same tokenizer (Qwen3's with the Seed-OSS
control tokens): the non-streaming message equals vLLM's, and the stream, one token per call with
the state carried by the client, aggregates to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.models import served_as
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier" / "seed_oss.json")
                    .read_text(encoding="utf-8"))
EOS = GOLDEN["eos_token_id"]
# both parsers, the call complete or absent (a call cut off after part of it streamed is the
# documented stream difference, tested in tests/core/parsers/test_seed_oss.py)
RECORDS = [r for r in GOLDEN["records"]
           if r["case"]["reasoning_parser"] == r["case"]["tool_parser"] == "seed_oss"
           and not r["case"]["name"].startswith(("markup_in_value", "truncated_in_call"))]


@pytest.fixture(scope="module")
def seed_model(parser_models) -> ModelInfo:
    return served_as(parser_models["seed_oss"], "tiny-seed-oss")


@pytest.fixture
async def client(aiohttp_client, seed_model):
    config = ServerConfig(reasoning_parser="seed_oss", tool_call_parser="seed_oss", enable_auto_tool_choice=True)
    return await aiohttp_client(create_app(config, seed_model))


def _request(case):
    return {"messages": [{"role": "user", "content": "hi"}], **case["request"],
            "chat_template_kwargs": case["chat_template_kwargs"]}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
async def test_derender_equals_vllm_and_streams_to_it(client, seed_model, record):
    prompt = seed_model.tokenizer.encode("<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n")
    request = _request(record["case"])
    message, finish = await derender_whole(client, prompt, request, record, EOS)
    assert message == record["message"]
    assert finish == record["finish_reason"]
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    assert streamed == dict(record["message"], content=record["message"]["content"] or None)
    assert last == record["finish_reason"]
