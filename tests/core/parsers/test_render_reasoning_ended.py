"""Render's `reasoning_ended` (docs/vllm-wire-spec.md §3.1, chat only), against vLLM 0.33.

* `golden_render/server8110_reasoning_ended.json`: answers of the live vLLM 0.33 render server
  (tiny-qwen3, hermes + qwen3) for multi-turn prompts with `<think>` in them, with thinking on,
  off and by default. With `enable_thinking: false` vLLM's qwen3 `is_reasoning_end` is true
  whatever the prompt holds (a continued assistant turn still inside `<think>` included).
* `golden_render/vllm033_reasoning_ended.json`: the Mistral parser with Hugging Face tokenizers,
  recorded in-process (`vllm_oracle.py`, `golden_cases.render_cases`): vLLM sets
  `_grammar_from_parser` only in its mistral-common grammar mode (not supported here), so
  `reasoning_ended` is the reasoning parser's `is_reasoning_end` of the prompt, or null without one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.protocol.chat import ChatCompletionRequest
from core.render import RenderOptions, render_chat

GOLDEN = Path(__file__).parent / "golden_render"
SERVER = json.loads((GOLDEN / "server8110_reasoning_ended.json").read_text(encoding="utf-8"))
MISTRAL = json.loads((GOLDEN / "vllm033_reasoning_ended.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("record", SERVER, ids=lambda r: json.dumps(
    {k: v for k, v in r["request"].items() if k not in ("model", "messages", "tools")}) + str(len(r["request"]["messages"])))
def test_qwen3_reasoning_ended_equals_the_vllm_render_server(qwen3, record):
    options = RenderOptions.build(tool_call_parser="hermes", reasoning_parser="qwen3", enable_auto_tool_choice=True)
    out = render_chat(qwen3, options, ChatCompletionRequest(**record["request"]))
    assert out["token_ids"] == record["vllm"]["token_ids"]
    assert out["reasoning_ended"] is record["vllm"]["reasoning_ended"]


@pytest.mark.parametrize("record", MISTRAL, ids=lambda r: f"{r['case']['tokenizer']}-{r['case']['reasoning_parser']}-"
                                                       f"{json.dumps(r['case']['request']['tool_choice'])}")
def test_mistral_reasoning_ended_equals_vllm(mistral_hf, record):
    case, vllm = record["case"], record["vllm"]
    options = RenderOptions.build(tool_call_parser="mistral", reasoning_parser=case["reasoning_parser"],
                                  enable_auto_tool_choice=True)
    request = ChatCompletionRequest(model=mistral_hf[case["tokenizer"]].name, **case["request"])
    out = render_chat(mistral_hf[case["tokenizer"]], options, request)
    assert out["token_ids"] == vllm["prompt_token_ids"]
    assert out["reasoning_ended"] is vllm["reasoning_ended"]
    # and the parser leaves the flag alone, as vLLM's does with these tokenizers
    from core.parsers.families.mistral import MistralToolParser
    from core.parsers.base import ParserContext

    model = mistral_hf[case["tokenizer"]]
    adjusted = MistralToolParser(ParserContext(tokenizer=model.tokenizer)).adjust_request(
        ChatCompletionRequest(model=model.name, **case["request"]))
    assert adjusted.grammar_from_parser is vllm["grammar_from_parser"]
