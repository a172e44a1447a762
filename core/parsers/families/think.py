"""`<think>`/`</think>` reasoning: deepseek_r1, deepseek_v3; granite's text markers.

One tag-driven state machine: a phase ("R" reasoning, "C" content, "P" plain pass-through) and
the few characters of a possibly-partial tag held back at the end of a feed. Each phase has a
table of tags and what they do (drop the tag, switch phase, keep the tag as content). The work
per feed is O(len(text)); the state is two short strings.

Rules (vLLM 0.33's `BaseThinkingReasoningParser` and its stream):
* deepseek_r1: text before the first `</think>` is reasoning (every `<think>` in it dropped),
  text after it is content; the prompt is not consulted. vLLM's non-streaming rule differs on
  outputs with a `<think>` that is not at the start: it partitions at the first `<think>`
  anywhere, so it drops the text before it (even a whole answer after `</think>`) and keeps a
  repeated `<think>` as text; its own stream does neither. Both our answers follow the stream
  (a documented vLLM bug, core/parsers/README.md).
* deepseek_v3: deepseek_r1 when the template kwargs turn `thinking`/`enable_thinking` on,
  otherwise everything is content.
* granite: text markers instead of tags (see `GraniteReasoningParser`).
(qwen3, glm45, kimi_k2 and mistral reasoning are vLLM's parser engine: core/parsers/engine.py.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from core.parsers.base import ParserContext, ReasoningParser, State
from core.parsers.text import find_first, partial_suffix

THINK_START = "<think>"
THINK_END = "</think>"
# phases (serialized as these letters)
REASONING, CONTENT, PLAIN = "R", "C", "P"  # PLAIN: reasoning off, everything passes as content

# an action: (next_phase or None to stay, keep the tag text as output of the new phase)
Action = tuple[str | None, bool]


class ThinkTagReasoningParser(ReasoningParser):
    """Table-driven tag machine; subclasses fill `tables()` and the initial phase."""

    name = "think"
    # whether vLLM refuses a tokenizer without `<think>` (step3 looks up `</think>` only)
    needs_start_token: ClassVar[bool] = True

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        self.start_id = tok.token_to_id(THINK_START)
        self.end_id = tok.token_to_id(THINK_END)
        if self.end_id is None or (self.start_id is None and self.needs_start_token):
            raise ValueError(f"{self.name} reasoning parser could not locate think start/end tokens in the tokenizer!")
        self._tables = self.tables()
        self._tags = {phase: tuple(table) for phase, table in self._tables.items()}
        # the characters a tag can start with: text without them needs no scan
        self._first_chars = "".join(sorted({tag[0] for tags in self._tags.values() for tag in tags}))

    def tables(self) -> dict[str, dict[str, Action]]:
        raise NotImplementedError

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        return REASONING

    # -- the contract ---------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": self.initial_phase(prompt_token_ids), "h": ""}


    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if not text:
            return "", ""
        if not state["h"] and not any(c in text for c in self._first_chars):  # fast path: no tag can start here
            return (text, "") if state["p"] == REASONING else ("", text)
        buf = state["h"] + text if state["h"] else text
        reasoning: list[str] = []
        content: list[str] = []
        pos = 0
        phase = state["p"]
        while True:
            tags = self._tags[phase]
            if not tags:
                (reasoning if phase == REASONING else content).append(buf[pos:])
                pos = len(buf)
                break
            at, tag = find_first(buf, tags, pos)
            if tag is None:
                keep = partial_suffix(buf[pos:], tags)
                end = len(buf) - keep
                (reasoning if phase == REASONING else content).append(buf[pos:end])
                pos = end
                break
            (reasoning if phase == REASONING else content).append(buf[pos:at])
            nxt, keep_tag = self._tables[phase][tag]
            if nxt is not None:
                phase = nxt
            if keep_tag:
                (reasoning if phase == REASONING else content).append(tag)
            pos = at + len(tag)
        state["p"] = phase
        state["h"] = buf[pos:]
        return "".join(reasoning), "".join(content)

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        if state["p"] == REASONING:
            return held, ""
        return "", held


class DeepSeekR1ReasoningParser(ThinkTagReasoningParser):
    name = "deepseek_r1"

    def tables(self) -> dict[str, dict[str, Action]]:
        return {REASONING: {THINK_START: (None, False), THINK_END: (CONTENT, False)}, CONTENT: {}}

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        for tid in reversed(token_ids):
            if tid == self.start_id:
                return False
            if tid == self.end_id:
                return True
        return False

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        state = self.start(prompt_token_ids)
        reasoning, content = self.feed(state, text, token_ids)
        more_reasoning, more_content = self.finish(state)
        # like vLLM, the reasoning is a string even when empty ("<think></think>answer")
        return reasoning + more_reasoning, (content + more_content) or None


class DeepSeekV3ReasoningParser(DeepSeekR1ReasoningParser):
    name = "deepseek_v3"

    def __init__(self, ctx: ParserContext) -> None:
        kwargs = ctx.chat_template_kwargs
        self.thinking = bool(kwargs.get("thinking", False)) or bool(kwargs.get("enable_thinking", False))
        super().__init__(ctx)

    def tables(self) -> dict[str, dict[str, Action]]:
        tables = super().tables()
        tables[PLAIN] = {}
        return tables

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        return REASONING if self.thinking else PLAIN

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return super().is_reasoning_end(token_ids) if self.thinking else True

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, text
        return super().parse_complete(text, token_ids, prompt_token_ids)


GRANITE_THINK = ("Here is my thought process:", "Here's my thought process:")
GRANITE_RESPONSE = ("Here is my response:", "Here's my response:")


class GraniteReasoningParser(ReasoningParser):
    """IBM Granite's text markers: "Here is my thought process:" ... "Here is my response:" ...

    vLLM's non-streaming rule: the first thought-process marker followed later by a response
    marker splits reasoning / content (text before the first marker is dropped); without both
    markers everything is content. Ours, streaming and not, differs where that rule takes back
    what vLLM's own stream sent (core/parsers/README.md, "vLLM 0.33 bugs we do not follow"): only
    an output that starts with the thought-process marker (after whitespace) has reasoning: up to
    the first response marker, or, with the reasoning returned, all of it when none comes (with
    `include_reasoning: false` such an output is all content, as vLLM's); any other output is
    content. The stream holds the output's leading whitespace and a possible start of the
    thought-process marker, a partial response marker, and, when the reasoning is not returned,
    the reasoning (it may turn out to be content).
    """

    name = "granite"
    UNDECIDED, REASONING, CONTENT = "U", "R", "C"  # phases (serialized as these letters)

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.hidden = not ctx.include_reasoning

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return False  # text markers: the prompt never leaves Granite's reasoning open or closed

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        # p: phase; h: held text (a possible marker); rh: the whole output so far while hidden
        # reasoning may still turn out to be content
        return {"p": self.UNDECIDED, "h": "", "rh": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        if state["p"] == self.UNDECIDED:
            lead = buf.lstrip()
            marker = next((m for m in GRANITE_THINK if lead.startswith(m)), None)
            if marker is None:
                if not lead or any(m.startswith(lead) for m in GRANITE_THINK):
                    state["h"] = buf
                    return "", ""
                state["p"] = self.CONTENT
                return "", buf
            state["p"] = self.REASONING
            start = len(buf) - len(lead) + len(marker)
            if self.hidden:
                state["rh"] = buf[:start]
            buf = buf[start:]
        if state["p"] == self.CONTENT:
            return "", buf
        at, marker = find_first(buf, GRANITE_RESPONSE)
        if marker is None:
            keep = partial_suffix(buf, GRANITE_RESPONSE)
            state["h"] = buf[len(buf) - keep:]
            reasoning = buf[:len(buf) - keep]
            if self.hidden:
                state["rh"] += reasoning
                return "", ""
            return reasoning, ""
        state["p"] = self.CONTENT
        state["rh"] = ""
        return buf[:at], buf[at + len(marker):]

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        if state["p"] != self.REASONING:
            return "", held
        if self.hidden:  # never answered: vLLM's answer is the whole output as content
            whole, state["rh"] = state["rh"] + held, ""
            return "", whole
        return held, ""

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        lead = text.lstrip()
        marker = next((m for m in GRANITE_THINK if lead.startswith(m)), None)
        if marker is None:  # (vLLM: split at a marker after other text too: README)
            return None, text
        body = lead[len(marker):]
        at, response = find_first(body, GRANITE_RESPONSE)
        if response is None:  # never answered: reasoning, as streamed (vLLM: content; README)
            return (None, text) if self.hidden else (body, None)
        return body[:at], body[at + len(response):] or None
