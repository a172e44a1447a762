"""Gemma 4 (google/gemma-4-*): vLLM 0.33's `gemma4` reasoning and tool parsers, one parser engine
(vllm/parser/gemma4.py) on ours (core/parsers/engine.py, engine_parsers.py).

    <|channel>thought
    ...reasoning...<channel|>answer
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

* the output starts in content; `<|channel>` opens reasoning, `<channel|>` or `<|tool_call>` ends
  it; a second `<|channel>` in reasoning and a stray `<channel|>` in content are dropped; the
  reasoning is right-stripped, then a leading `thought\\n` (the channel's name) is removed, and a
  reasoning of just `thought` is none;
* the output is read as if `<|channel>` came first when it starts with `<channel|>` or
  `thought\\n`, or is `thought` (vLLM's `_preprocess_feed`: the template opened the channel in the
  prompt; vLLM's non-streaming answer also does so for a `<channel|>` anywhere without a
  `<|channel>`, and not for a `thought\\n` start with a `<|channel>` later: its own stream decides
  on the start, as ours does, streaming and not). The tool pass applies the same rule to the
  content it gets; without a reasoning parser the added `<|channel>` is then text;
* a prompt that ends inside an open `<|channel>` starts the output in reasoning (vLLM's
  `adjust_initial_state_from_prompt`, which only its stream calls: ours, streaming and not);
* `enable_thinking` (default false) only decides whether a prompt without markers leaves
  reasoning open (`is_reasoning_end`); `<|turn>` / `<|tool_response>` are the turn boundaries;
* a call is `<|tool_call>call:NAME{ARGS}<tool_call|>` (also `:NAME`, `NAME(ARGS)`); the name is
  not checked against the tools; the arguments are core/parsers/families/gemma4_args.py, then the
  schema's types; tool_choice "required" / named are not constrained (no JSON schema, no tag:
  the model writes its own syntax, vLLM only sets skip_special_tokens=False).

Streaming: the arguments go out when the call ends; the start of the output is held while it may
still be `thought\\n` or `<channel|>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolCallDelta
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import EngineReasoningParser, EngineToolParser
from core.parsers.families.gemma4_args import DELIM, gemma4_arguments

CHANNEL_START, CHANNEL_END = "<|channel>", "<channel|>"
TOOL_START, TOOL_END = "<|tool_call>", "<tool_call|>"
TURN_BOUNDARIES = ("<|turn>", "<|tool_response>")
THOUGHT = "thought"
THOUGHT_PREFIX = "thought\n"

C, R, P, N, A = Phase.CONTENT, Phase.REASONING, Phase.PREAMBLE, Phase.NAME, Phase.ARGS


def gemma4_grammar(thinking: bool) -> Grammar:
    """vLLM's `gemma4_config(thinking)`: thinking only changes `wait_for_reasoning`."""
    return Grammar(
        name="gemma4", initial=C, wait_for_reasoning=thinking,
        terminals={"THINK_START": CHANNEL_START, "THINK_END": CHANNEL_END, "TOOL_START": TOOL_START,
                   "TOOL_END": TOOL_END, "CALL_PREFIX": "call:", "COLON": ":", "OPEN_BRACE": "{",
                   "OPEN_PAREN": "("},
        id_terminals=frozenset({CHANNEL_START, CHANNEL_END, TOOL_START, TOOL_END}),
        preserve=frozenset({DELIM}),
        transitions={
            (C, "THINK_START"): (R, (Ev.REASONING_START,)),
            (R, "THINK_START"): (R, ()),
            (R, "THINK_END"): (C, (Ev.REASONING_END,)),
            (R, "TOOL_START"): (P, (Ev.REASONING_END, Ev.CALL_START)),
            (C, "TOOL_START"): (P, (Ev.REASONING_END, Ev.CALL_START)),
            (P, "TOOL_END"): (C, (Ev.CALL_END,)),
            (P, "CALL_PREFIX"): (N, ()),
            (P, "COLON"): (N, ()),  # `<|tool_call>:name{...}`, the "call" left out
            (N, "OPEN_BRACE"): (A, ()),
            (N, "OPEN_PAREN"): (A, ()),
            (N, "TOOL_END"): (C, (Ev.CALL_END,)),
            (A, "TOOL_END"): (C, (Ev.CALL_END,)),
            (C, "TOOL_END"): (C, ()),
            (C, "THINK_END"): (C, ()),
        })


GEMMA4 = gemma4_grammar(thinking=True)
GEMMA4_NO_THINKING = gemma4_grammar(thinking=False)


def opens_channel(text: str, final: bool) -> bool | None:
    """vLLM's `_preprocess_feed` on the start of the output: whether `<|channel>` is put in front;
    None while `text` may still become a start that decides otherwise.

    Decided on the shortest start that settles it, the same for a stream in any chunks and for the
    whole output: an output that starts with `<channel|>` or `thought\n`, or is `thought`. (vLLM's
    non-streaming answer also looks at the rest, a `<channel|>` or `<|channel>` anywhere; its own
    stream decides on its first delta: README, "vLLM 0.33 bugs we do not follow".)"""
    if text.startswith((CHANNEL_END, THOUGHT_PREFIX)):
        return True
    if not final and (THOUGHT_PREFIX.startswith(text) or CHANNEL_END.startswith(text)):
        return None
    return text == THOUGHT


class ChannelPrefix:
    """The start-of-output rewrite, for a parser whose state keeps the undecided start in "pf"
    (None once decided, or when the engine does not start in content)."""

    def __init__(self, ctx: ParserContext) -> None:
        tok = ctx.tokenizer
        # (vLLM rewrites only when both channel markers are tokens)
        self.rewrites = tok.token_to_id(CHANNEL_START) is not None and tok.token_to_id(CHANNEL_END) is not None

    def take(self, state: State, text: str, final: bool) -> str | None:
        """The text to feed (rewritten), or None while the start is held."""
        held = state.get("pf")
        if held is None:
            return text
        text = held + text
        decided = opens_channel(text, final)
        if decided is None:
            state["pf"] = text
            return None
        state["pf"] = None
        return CHANNEL_START + text if decided and self.rewrites else text


class Gemma4ReasoningParser(EngineReasoningParser):
    """State: the engine's, "rw" (held trailing whitespace), "pf" (the undecided start of the
    output) and "tp" (the start of the reasoning while it may still be `thought\\n`, None once
    decided)."""

    name = "gemma4"
    GRAMMAR, GRAMMAR_NO_THINKING = GEMMA4, GEMMA4_NO_THINKING
    BOUNDARIES = TURN_BOUNDARIES
    PASS_THROUGH_WITHOUT_THINKING = False

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.prefix = ChannelPrefix(ctx)
        tok = ctx.tokenizer
        ends = (CHANNEL_END, TOOL_START, *TURN_BOUNDARIES)
        self.closers = frozenset(i for i in (tok.token_to_id(t) for t in ends) if i is not None)

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return bool(ctx.chat_template_kwargs.get("enable_thinking", False))  # (vLLM: its truth value)

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        """Reasoning when the prompt ends inside an open `<|channel>` (vLLM's stream only)."""
        for tid in reversed(prompt_token_ids or ()):
            if tid == self.start_id:
                return R
            if tid in self.closers:
                break
        return C

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        state = super().start(prompt_token_ids)
        state["pf"] = "" if state["e"]["ph"] == C else None
        state["tp"] = ""
        return state

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        text = self.prefix.take(state, text, final=False)
        if text is None:
            return "", ""
        events = self.engine.feed(state["e"], text, skip_tools=True)
        return self._split(state, self._thought(state, events, final=False))

    def finish(self, state: State) -> tuple[str, str]:
        text = self.prefix.take(state, "", final=True)
        events = self.engine.feed(state["e"], text or "", final=True, skip_tools=True)
        reasoning, content = self._split(state, self._thought(state, events, final=True))
        state["rw"] = ""  # the reasoning is right-stripped: held trailing whitespace is dropped
        return reasoning, content

    def _thought(self, state: State, events: list, final: bool) -> list:
        """The reasoning without its `thought\\n` name (vLLM strips it after right-stripping:
        a start that is `thought` plus whitespace is held until more comes)."""
        if state["tp"] is None:
            return events
        out = []
        for kind, value in events:
            if kind != Ev.REASONING or state["tp"] is None:
                out.append((kind, value))
                continue
            held = state["tp"] + value
            if held.startswith(THOUGHT_PREFIX):
                state["tp"] = None
                value = held[len(THOUGHT_PREFIX):]
            elif THOUGHT.startswith(held.rstrip()):
                state["tp"] = held
                continue
            else:
                state["tp"], value = None, held
            if value:
                out.append((kind, value))
        if final and state["tp"] is not None:
            held, state["tp"] = state["tp"], None
            if held.rstrip() != THOUGHT:
                out.append((Ev.REASONING, held))
        return out



class Gemma4ToolParser(EngineToolParser):
    name = "gemma4"
    GRAMMAR = GEMMA4

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.prefix = ChannelPrefix(ctx)

    def adjust_request(self, request: Any) -> Any:
        # vLLM's Gemma4EngineToolParser: no JSON schema and no tag for any tool_choice
        request.skip_special_tokens = False  # the engine needs the markers' text
        return request

    def convert_args(self, raw: str, name: str) -> str:
        return gemma4_arguments(raw)

    def start(self) -> State:
        state = super().start()
        state["pf"] = ""
        return state

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        text = self.prefix.take(state, text, final=False)
        if text is None:
            return "", []
        return super().feed(state, text, token_ids)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        text = self.prefix.take(state, "", final=True)
        content, deltas = super().feed(state, text, []) if text else ("", [])
        tail, more = super().finish(state)
        return content + tail, deltas + more
