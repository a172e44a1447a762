"""phi4_mini_json, internlm and jamba (`--tool-call-parser ...`) over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/{phi4_mini_json,internlm,jamba}.json
(vLLM 0.33's answers, tests/oracle/record_json_block.py) go through HTTP on the same tokenizers
(Qwen3's; with InternLM's / Jamba's markers as special tokens): the non-streaming message and
finish_reason equal vLLM's (but for phi4_mini_json's text before its block, which ours keeps as the
content: a vLLM bug we do not follow, `golden_checks.text_before_block_kept`), and the stream, one
token per call with the state carried by the client, aggregates to it.

Left out: outputs vLLM's internlm raises on (no answer to compare), and for internlm / jamba the
requests that keep skip_special_tokens on (no tools, tool_choice "none": the markers leave the text).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.core.parsers.golden_checks import text_before_block_kept
from tests.core.parsers.parser_models import INTERNLM_TOKENS, JAMBA_TOKENS
from tests.models import served_as
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier"
EOS = 151645  # <|im_end|>
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
TOKENS = {"phi4_mini_json": [], "internlm": INTERNLM_TOKENS, "jamba": JAMBA_TOKENS}


def _records(family: str) -> list[dict]:
    golden = json.loads((GOLDEN_DIR / f"{family}.json").read_text(encoding="utf-8"))
    out = []
    for record in golden["records"]:
        request = record["case"]["request"]
        markers_kept = request.get("tools") and request.get("tool_choice") != "none"
        if "vllm_raises" in record or (TOKENS[family] and not markers_kept):
            continue
        out.append(record)
    return out


CASES = [(family, record) for family in TOKENS for record in _records(family)]


@pytest.fixture(scope="module")
def models(parser_models) -> dict[str, ModelInfo]:
    # phi4_mini_json reads `functools[` as text: Qwen3's own tokenizer
    return {family: served_as(parser_models[family if tokens else "qwen3"], f"tiny-{family}")
            for family, tokens in TOKENS.items()}


@pytest.mark.parametrize(("family", "record"), CASES, ids=[f"{f}-{r['case']['name']}" for f, r in CASES])
async def test_derender_equals_vllm_and_streams_to_it(aiohttp_client, models, family, record):
    client = await aiohttp_client(create_app(ServerConfig(tool_call_parser=family, enable_auto_tool_choice=True),
                                             models[family]))
    prompt = models[family].tokenizer.encode(PROMPT)
    case = record["case"]
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"]}
    message, finish = await derender_whole(client, prompt, request, record, EOS)
    want = record["message"]
    if family == "phi4_mini_json" and message != want:
        assert text_before_block_kept(case["text"], "functools[", message, want)
        want = dict(want, content=message["content"])
    assert message == want
    assert finish == record["finish_reason"]
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    want = dict(want, content=want["content"] or None)
    assert streamed == want
    assert last == record["finish_reason"]
