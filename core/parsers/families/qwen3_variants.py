"""Qwen3-grammar variants: `step3p5` (Step-3.5 / 3.7: reasoning and tools), `nemotron_v3`
(Nemotron 3 Super: reasoning) and `seed_oss` (Seed-OSS: reasoning and tools), vLLM 0.33's Qwen3
parser engine with other settings (vllm/parser/step3p5.py, nemotron_v3.py, seed_oss.py):

* step3p5: `qwen3_config(thinking=True)` with ChatML turn boundaries and the reasoning
  right-stripped; always thinking (`enable_thinking` is ignored: the template always prefills
  `<think>`); tools are qwen3_xml's;
* nemotron_v3: `qwen3_config(thinking)` with the reasoning right-stripped; with `enable_thinking:
  false` the reasoning parser returns the output untouched (as qwen3; a tool pass behind it starts
  in content, where a stray `</think>` is dropped and `<think>` is text), and with that flag or
  `force_nonempty_content: true` in the request's own `chat_template_kwargs` (not the server's
  defaults: vLLM reads the request) a whitespace-only (or missing) content is swapped with the
  reasoning (ours only when the reasoning never closed: core/parsers/README.md, "vLLM 0.33 bugs we
  do not follow");
* seed_oss: qwen3's grammar and rules unchanged (`enable_thinking: false` passes the output
  through; the reasoning is not stripped) with other wrappers, each one special token:
  `<seed:think>` / `</seed:think>`, `<seed:tool_call>` / `</seed:tool_call>`, and `<seed:bos>` /
  `<seed:eos>` as the turn boundaries a prompt's markers count after. The Seed-OSS template's
  `thinking_budget` changes nothing here (vLLM's parser reads only `enable_thinking`). Its tool
  parser has no structural-tag model in vLLM, so "required" and a named tool take the generic
  JSON path (`supports_required_and_named`), and "auto" is never constrained.

Streaming follows the non-streaming answer except for that swap when the reasoning never closed,
which only the end of the output decides (vLLM's stream sends the reasoning, then repeats it as
content).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, ToolParser
from core.parsers.engine import Phase
from core.parsers.families.qwen3 import Qwen3ReasoningParser, Qwen3XmlToolParser, qwen3_grammar

STEP3P5 = qwen3_grammar(Phase.REASONING, "step3p5", strip_reasoning=True)
NEMOTRON_V3 = qwen3_grammar(Phase.REASONING, "nemotron_v3", strip_reasoning=True)
NEMOTRON_V3_NO_THINKING = qwen3_grammar(Phase.CONTENT, "nemotron_v3", strip_reasoning=True)
SEED_THINK = ("<seed:think>", "</seed:think>")
SEED_TOOL = ("<seed:tool_call>", "</seed:tool_call>")
SEED_TURN_BOUNDARIES = ("<seed:bos>", "<seed:eos>")
SEED_OSS = qwen3_grammar(Phase.REASONING, "seed_oss", think=SEED_THINK, tool=SEED_TOOL)
SEED_OSS_NO_THINKING = qwen3_grammar(Phase.CONTENT, "seed_oss", think=SEED_THINK, tool=SEED_TOOL)


class Step3p5ReasoningParser(Qwen3ReasoningParser):
    name = "step3p5"
    GRAMMAR = STEP3P5

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return True  # the template always opens reasoning


class Step3p5ToolParser(Qwen3XmlToolParser):
    name = "step3p5"


class NemotronV3ReasoningParser(Qwen3ReasoningParser):
    name = "nemotron_v3"
    GRAMMAR, GRAMMAR_NO_THINKING = NEMOTRON_V3, NEMOTRON_V3_NO_THINKING

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        kwargs = ctx.request_chat_template_kwargs  # (vLLM reads the request's, not the server's defaults)
        self.force_content = kwargs.get("enable_thinking") is False or kwargs.get("force_nonempty_content") is True

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if self._passes_through():  # thinking off: never swapped (README; vLLM swaps a blank output)
            return None, text
        state = self.start(prompt_token_ids)
        r1, c1 = self.feed(state, text, token_ids)
        never_closed = state["e"]["ph"] == Phase.REASONING  # (finish leaves the reasoning phase)
        r2, c2 = self.finish(state)
        reasoning, content = (r1 + r2) or None, (c1 + c2) or None
        # swapped only when the reasoning never closed: after a close vLLM's own stream, as ours,
        # sent the reasoning and the blank content as they are (README, "vLLM 0.33 bugs we do not follow")
        if self.force_content and never_closed and (content is None or not content.strip()):
            reasoning, content = content, reasoning
        return reasoning, content


class SeedOssReasoningParser(Qwen3ReasoningParser):
    name = "seed_oss"
    GRAMMAR, GRAMMAR_NO_THINKING = SEED_OSS, SEED_OSS_NO_THINKING
    BOUNDARIES = SEED_TURN_BOUNDARIES


class SeedOssToolParser(Qwen3XmlToolParser):
    name = "seed_oss"
    GRAMMAR = SEED_OSS
    # vLLM's seed_oss tool parser has no structural-tag model: forced calls are plain JSON
    supports_required_and_named = True

    def adjust_request(self, request: Any) -> Any:
        request = ToolParser.adjust_request(self, request)  # (the JSON schema of a forced call)
        request.skip_special_tokens = False  # the engine needs the markers' text
        return request
