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
  defaults: vLLM reads the request) vLLM's answer swaps a whitespace-only (or missing) content with
  the reasoning; ours follows vLLM's stream instead (core/parsers/README.md, "vLLM 0.33 bugs we do
  not follow"): nothing is swapped, and a reasoning never closed is sent, then repeated whole as
  content at the end (`NemotronV3ReasoningParser`);
* seed_oss: qwen3's grammar and rules unchanged (`enable_thinking: false` passes the output
  through; the reasoning is not stripped) with other wrappers, each one special token:
  `<seed:think>` / `</seed:think>`, `<seed:tool_call>` / `</seed:tool_call>`, and `<seed:bos>` /
  `<seed:eos>` as the turn boundaries a prompt's markers count after. The Seed-OSS template's
  `thinking_budget` changes nothing here (vLLM's parser reads only `enable_thinking`). Its tool
  parser has no structural-tag model in vLLM, so "required" and a named tool take the generic
  JSON path (`supports_required_and_named`), and "auto" is never constrained.

Streaming follows the non-streaming answer, the repeat included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolParser
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
    """With `force_nonempty_content: true` in the request's own kwargs, thinking on (vLLM's other
    trigger, `enable_thinking: false`, turns it off: nothing is then repeated) and the prompt
    leaving the reasoning open, an output whose reasoning never ended is sent as reasoning and
    then, at the end, all of it again as content (vLLM's stream:
    parser/nemotron_v3.py `get_streaming_fallback_content`, abstract_parser.py
    `finalize_generation`); the non-streaming answer is that sum (README, "vLLM 0.33 bugs we do
    not follow"). Only then does the state keep the reasoning sent so far ("rs")."""

    name = "nemotron_v3"
    GRAMMAR, GRAMMAR_NO_THINKING = NEMOTRON_V3, NEMOTRON_V3_NO_THINKING

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        kwargs = ctx.request_chat_template_kwargs  # (vLLM reads the request's, not the server's defaults)
        self.force_content = kwargs.get("enable_thinking") is False or kwargs.get("force_nonempty_content") is True

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        state = super().start(prompt_token_ids)
        # (with thinking off, or a prompt that closed the reasoning, vLLM's stream starts past the
        # reasoning: its fallback never runs)
        if self.force_content and not self._passes_through() and state["e"]["ph"] == Phase.REASONING:
            state["rs"] = ""
        return state

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        reasoning, content = self._parts(state, text, token_ids)
        keep_sent(state, reasoning, state["e"]["ph"] != Phase.REASONING)
        return reasoning, content

    def finish(self, state: State) -> tuple[str, str]:
        ended = state["e"]["ph"] != Phase.REASONING  # (before: the engine's finish leaves the reasoning phase)
        reasoning, content = self._last_parts(state)
        keep_sent(state, reasoning, ended)
        return reasoning, content

    def _parts(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        return super().feed(state, text, token_ids)

    def _last_parts(self, state: State) -> tuple[str, str]:
        return super().finish(state)

    def repeat(self, state: State) -> str:
        return state.pop("rs", "")

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        return self.split_complete(text, token_ids, prompt_token_ids)[:2]

    def split_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None, str]:
        if self._passes_through():
            return None, text, ""  # thinking off: never repeated (README; vLLM swaps a blank output)
        state = self.start(prompt_token_ids)
        r1, c1 = self.feed(state, text, token_ids)
        r2, c2 = self.finish(state)
        return (r1 + r2) or None, (c1 + c2) or None, self.repeat(state)


def keep_sent(state: State, reasoning: str, ended: bool) -> None:
    """Keep the reasoning sent (`rs`, present only while its repeat may come), or forget it for
    good once vLLM's stream would have ended the reasoning."""
    if "rs" not in state:
        return
    if ended:
        del state["rs"]
    elif reasoning:
        sent = state.pop("rs")  # (popped first: `+=` then extends the one string in place)
        sent += reasoning
        state["rs"] = sent


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
