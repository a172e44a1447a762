"""Olmo 3's tools (`--tool-call-parser olmo3`, with and without `--reasoning-parser olmo3`) over the
chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/olmo3_tools.json (vLLM 0.33's answers,
tests/oracle/record_olmo3.py) go through HTTP with each golden's parser flags on the same test
tokenizer: the non-streaming message and finish_reason equal vLLM's but for the vLLM bugs we do not
follow (`test_olmo3.vllm_bug`: the text before a block of calls, a call list without tags whose call
spans lines; olmo3 reasoning never closed, which is reasoning), and the stream, one token per call
with the state carried by the client, aggregates to our message.
Outputs holding special-token text are left out (skip_special_tokens stays on).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.core.parsers.test_olmo3 import vllm_bug
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier" /
                     "olmo3_tools.json").read_text(encoding="utf-8"))
EOS = 151645  # <|im_end|>
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
CASES = [r for r in GOLDEN["records"] if not r["case"]["name"].startswith("special_tokens")]


@pytest.fixture(scope="module")
def model(parser_models) -> ModelInfo:
    return parser_models["olmo3"]


@pytest.mark.parametrize("record", CASES, ids=[r["case"]["name"] for r in CASES])
async def test_derender_equals_vllm_and_streams_to_it(aiohttp_client, model, record):
    case = record["case"]
    flags = {"tool_call_parser": "olmo3", "enable_auto_tool_choice": True,
             **({"reasoning_parser": "olmo3"} if case["reasoning_parser"] else {})}
    client = await aiohttp_client(create_app(ServerConfig(**flags), model))
    prompt = model.tokenizer.encode(PROMPT)
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"]}
    message, finish = await derender_whole(client, prompt, request, record, EOS)
    want, want_finish = dict(record["message"]), record["finish_reason"]
    if case["reasoning_parser"] and "</think>" not in case["text"] and case["text"]:
        # (olmo3 reasoning never closed, README "vLLM 0.33 bugs we do not follow": ours is reasoning)
        want, want_finish = {"reasoning": case["text"].removeprefix("<think>") or None, "content": None,
                             "tool_calls": []}, record["engine_finish_reason"]
    elif message != want:
        assert vllm_bug(case, message, want)
        want, want_finish = message, (want_finish if message["tool_calls"] else record["engine_finish_reason"])
    assert (message, finish) == (want, want_finish)
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    assert (streamed, last) == (dict(want, content=want["content"] or None), want_finish)
