"""Qwen3-grammar variants: `step3p5` (Step-3.5 / 3.7: reasoning and tools) and `nemotron_v3`
(Nemotron 3 Super: reasoning), vLLM 0.33's Qwen3 parser engine with other settings
(vllm/parser/step3p5.py, nemotron_v3.py):

* step3p5: `qwen3_config(thinking=True)` with ChatML turn boundaries and the reasoning
  right-stripped; always thinking (`enable_thinking` is ignored: the template always prefills
  `<think>`); tools are qwen3_xml's;
* nemotron_v3: `qwen3_config(thinking)` with the reasoning right-stripped; with `enable_thinking:
  false` the reasoning parser returns the output untouched (as qwen3; a tool pass behind it starts
  in content, where a stray `</think>` is dropped and `<think>` is text), and with that flag or
  `force_nonempty_content: true` in the request's own `chat_template_kwargs` (not the server's
  defaults: vLLM reads the request) a whitespace-only (or missing) content is swapped with the
  reasoning.

Streaming follows the non-streaming answer except for that swap, which only the end of the
output decides (vLLM's stream sends the reasoning, then repeats it as content).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.parsers.base import ParserContext
from core.parsers.engine import Phase
from core.parsers.families.qwen3 import Qwen3ReasoningParser, Qwen3XmlToolParser, qwen3_grammar

STEP3P5 = qwen3_grammar(Phase.REASONING, "step3p5", strip_reasoning=True)
NEMOTRON_V3 = qwen3_grammar(Phase.REASONING, "nemotron_v3", strip_reasoning=True)
NEMOTRON_V3_NO_THINKING = qwen3_grammar(Phase.CONTENT, "nemotron_v3", strip_reasoning=True)


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
        reasoning, content = super().parse_complete(text, token_ids, prompt_token_ids)
        if self.force_content and (content is None or not content.strip()):
            reasoning, content = content, reasoning
        return reasoning, content
