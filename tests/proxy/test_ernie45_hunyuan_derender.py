"""ERNIE 4.5 and Hunyuan A13B over the chat derender route.

The engine's token ids of tests/core/parsers/golden_frontier/{ernie45,hunyuan_a13b}.json (vLLM 0.33's
answers, tests/oracle/record_ernie45.py / record_hunyuan_a13b.py) go through HTTP with the family's
flags (both parsers) on the same test tokenizer: the non-streaming message and finish_reason equal
vLLM's but for the vLLM bugs we do not follow (core/parsers/README.md; listed in
tests/core/parsers/test_ernie45.py / test_hunyuan_a13b.py as REASONING_BUGS / TOOL_BUGS, where ours
is what the stream sends), and the stream, one token per call with the state carried by the client,
aggregates to them but for the documented stream differences (test_ernie45.TOOL_DIFFS).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.app import create_app
from proxy.config import ServerConfig
from tests.core.parsers import test_ernie45, test_hunyuan_a13b
from tests.core.parsers.helpers import id_shape
from tests.proxy.golden_derender import derender_per_token, derender_whole

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "core" / "parsers" / "golden_frontier"
EOS = 151645  # <|im_end|>
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
DIFFERS = {"ernie45": test_ernie45._differs, "hunyuan_a13b": lambda case: False}
VLLM_BUGS = {"ernie45": test_ernie45._vllm_bug, "hunyuan_a13b": test_hunyuan_a13b._vllm_bug}


def _records(family: str) -> list[dict]:
    golden = json.loads((GOLDEN_DIR / f"{family}.json").read_text(encoding="utf-8"))
    return [r for r in golden["records"] if r["case"]["reasoning_parser"] == r["case"]["tool_parser"] == family]


CASES = [(family, record) for family in DIFFERS for record in _records(family)]


@pytest.fixture(scope="module")
def models(parser_models) -> dict[str, ModelInfo]:
    return {"ernie45": parser_models["ernie45"], "hunyuan_a13b": parser_models["qwen3"]}


def _shaped(message: dict) -> dict:
    """Ids by shape, empty reasoning / content as None (a stream cannot send them)."""
    return {"reasoning": message["reasoning"] or None, "content": message["content"] or None,
            "tool_calls": [{**c, "id": id_shape(c["id"])} for c in message["tool_calls"]]}


@pytest.mark.parametrize(("family", "record"), CASES, ids=[f"{f}-{r['case']['name']}" for f, r in CASES])
async def test_derender_equals_vllm_and_streams_to_it(aiohttp_client, models, family, record):
    config = ServerConfig(reasoning_parser=family, tool_call_parser=family, enable_auto_tool_choice=True)
    client = await aiohttp_client(create_app(config, models[family]))
    prompt = models[family].tokenizer.encode(PROMPT)
    case = record["case"]
    request = {"messages": [{"role": "user", "content": "hi"}], **case["request"]}
    want = _shaped(record["message"])
    message, finish = await derender_whole(client, prompt, request, record, EOS)
    want_finish = record["finish_reason"]
    if VLLM_BUGS[family](case):  # ours deliberately differs: the stream below must send it
        assert _shaped(message) != want
        want, want_finish = _shaped(message), finish
    else:
        assert (message["reasoning"], message["content"]) == (record["message"]["reasoning"],
                                                              record["message"]["content"])
        assert _shaped(message)["tool_calls"] == want["tool_calls"]
        assert finish == record["finish_reason"]
    if DIFFERS[family](case):
        return
    streamed, last = await derender_per_token(client, prompt, request, record, EOS)
    assert _shaped(streamed) == want
    assert last == want_finish
