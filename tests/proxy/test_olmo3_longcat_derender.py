"""Olmo 3 (`--reasoning-parser olmo3`) and LongCat (`--tool-call-parser longcat`) over the chat
derender route.

The engine's token ids of tests/core/parsers/golden_frontier/{olmo3,longcat}.json (vLLM 0.33's
answers, tests/oracle/record_olmo3.py / record_longcat.py) go through HTTP with the family's flag
on the same test tokenizer: the non-streaming message and finish_reason equal vLLM's (but for
olmo3's reasoning never closed, a vLLM bug we do not follow: ours is that text as reasoning), and
the stream, one token per call with the state carried by the client, aggregates to it but for the
documented stream differences (tested in tests/core/parsers/test_olmo3.py / test_longcat.py).
Outputs holding Qwen's special tokens are left out (skip_special_tokens stays on for olmo3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier"
EOS = 151645  # <|im_end|>
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
# the documented stream differences (the non-streaming answer is still checked)
STREAM_DIFFERS = {"olmo3": (),
                  "longcat": ("second_bad", "truncated_after_call", "truncated_in_call", "no_arguments",
                              "end_in_value")}
FLAGS = {"olmo3": {"reasoning_parser": "olmo3"},
         "longcat": {"tool_call_parser": "longcat", "enable_auto_tool_choice": True}}


def _records(family: str) -> list[dict]:
    golden = json.loads((GOLDEN_DIR / f"{family}.json").read_text(encoding="utf-8"))
    return [r for r in golden["records"] if not r["case"]["name"].startswith("special_tokens")]


CASES = [(family, record) for family in FLAGS for record in _records(family)]


@pytest.fixture(scope="module")
def models(parser_models) -> dict[str, ModelInfo]:
    return {"olmo3": parser_models["olmo3"], "longcat": parser_models["longcat"]}


@pytest.mark.parametrize(("family", "record"), CASES, ids=[f"{f}-{r['case']['name']}" for f, r in CASES])
async def test_derender_equals_vllm_and_streams_to_it(aiohttp_client, models, family, record):
    client = await aiohttp_client(create_app(ServerConfig(**FLAGS[family]), models[family]))
    prompt = models[family].tokenizer.encode(PROMPT)
    case = record["case"]
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"]}
    message, finish = await derender_whole(client, prompt, request, record, EOS)
    want = dict(record["message"])
    if family == "olmo3" and "</think>" not in case["text"] and case["text"]:  # (README: a vLLM bug)
        want = {"reasoning": case["text"].removeprefix("<think>") or None, "content": None, "tool_calls": []}
    assert message == want
    assert finish == record["finish_reason"]
    if case["name"].startswith(STREAM_DIFFERS[family]):
        return
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    assert streamed == dict(want, content=want["content"] or None)
    assert last == record["finish_reason"]
