"""Qwen3-grammar variants: `step3p5` (Step-3.5 / 3.7: reasoning and tools) and `nemotron_v3`
(Nemotron 3 Super: reasoning), vLLM 0.33's Qwen3 parser engine with other settings.

Rules, as observed on vLLM's non-streaming answers (golden_frontier/qwen3_variants.json):
* step3p5: qwen3's reasoning grammar, always thinking (`enable_thinking` is ignored: the template
  always prefills `<think>`), the reasoning right-stripped; tools are qwen3_xml's;
* nemotron_v3: qwen3's grammar with the reasoning right-stripped; `enable_thinking: false`
  starts in content, where a stray `</think>` is dropped and a `<think>` stays text (special
  tokens are dropped either way); with `enable_thinking: false` or `force_nonempty_content: true`
  a whitespace-only (or missing) content is swapped with the reasoning.

Streaming follows the non-streaming answer except for that swap, which only the end of the
output decides (vLLM's stream sends the reasoning, then repeats it as content).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.parsers.base import ParserContext, ReasoningParser, State
from core.parsers.families.glm45 import Glm45ReasoningParser
from core.parsers.families.qwen3 import Qwen3XmlToolParser
from core.parsers.families.qwen3 import Qwen3ReasoningParser


class _StrippedQwen3Reasoning(Qwen3ReasoningParser):
    """Qwen3's reasoning with its trailing whitespace held until more reasoning comes (dropped at the end)."""

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        state = super().start(prompt_token_ids)
        state["rw"] = ""
        return state

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        reasoning, content = super().feed(state, text, token_ids)
        return Glm45ReasoningParser._strip(self, state, reasoning), content  # type: ignore[arg-type]

    def finish(self, state: State) -> tuple[str, str]:
        reasoning, content = super().finish(state)
        reasoning = Glm45ReasoningParser._strip(self, state, reasoning)  # type: ignore[arg-type]
        state["rw"] = ""
        return reasoning, content

    parse_complete = ReasoningParser.parse_complete  # qwen3's "thinking off: untouched" does not apply


class Step3p5ReasoningParser(_StrippedQwen3Reasoning):
    name = "step3p5"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.thinking = True  # the template always opens reasoning
        self.drops_special_tokens = True


class Step3p5ToolParser(Qwen3XmlToolParser):
    name = "step3p5"


class NemotronV3ReasoningParser(_StrippedQwen3Reasoning):
    name = "nemotron_v3"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        kwargs = ctx.chat_template_kwargs
        self.drops_special_tokens = True  # the engine runs with thinking off too
        self.force_content = kwargs.get("enable_thinking") is False or kwargs.get("force_nonempty_content") is True

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        if not self.thinking:
            return "C"  # content, where `</think>` is dropped and `<think>` is text
        return super().initial_phase(prompt_token_ids)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return True if not self.thinking else super().is_reasoning_end(token_ids)

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        reasoning, content = super().parse_complete(text, token_ids, prompt_token_ids)
        if self.force_content and (content is None or not content.strip()):
            reasoning, content = content, reasoning
        return reasoning, content
