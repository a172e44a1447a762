"""`<think>`/`</think>` reasoning: deepseek_r1, qwen3, deepseek_v3.

One tag-driven state machine: a phase ("R" reasoning, "C" content, "P" plain pass-through) and
the few characters of a possibly-partial tag held back at the end of a feed. Each phase has a
table of tags and what they do (drop the tag, switch phase, keep the tag as content). The work
per feed is O(len(text)); the state is two short strings.

Rules, from vLLM 0.33's non-streaming parsers (spec 6.3):
* deepseek_r1 (`BaseThinkingReasoningParser`): text after the first `</think>` is content;
  before it, reasoning. Its non-streaming rule also drops any text before a `<think>` — a look
  ahead no stream can do, so `parse_complete` applies it on the whole text while the stream
  (like vLLM's own stream) keeps such text as reasoning. The prompt is not consulted.
* qwen3 (engine grammar): reasoning until `</think>`, or until `<tool_call>` (implicit end; the
  tag stays for the tool parser); `<think>` is dropped, and after reasoning a repeated `</think>`
  is dropped too; the text of every other special token (`<|im_end|>`, `<|endoftext|>`, ...) is
  dropped everywhere by the pipeline (`drops_special_tokens`, core/parsers/special.py).
  `enable_thinking: false` means plain content (nothing dropped) and reasoning already ended.
  A prompt that already closed reasoning (spec 7.3) starts in content.
* deepseek_v3: deepseek_r1 when the template kwargs turn `thinking`/`enable_thinking` on,
  otherwise everything is content.
* granite: text markers instead of tags (see `GraniteReasoningParser`).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.parsers.base import ParserContext, ReasoningParser, State
from core.parsers.registry import register_reasoning
from core.parsers.text import find_first, partial_suffix

THINK_START = "<think>"
THINK_END = "</think>"

# an action: (next_phase or None to stay, keep the tag text as output of the new phase)
Action = tuple[str | None, bool]


class ThinkTagReasoningParser(ReasoningParser):
    """Table-driven tag machine; subclasses fill `tables()` and the initial phase."""

    name = "think"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        self.start_id = tok.token_to_id(THINK_START)
        self.end_id = tok.token_to_id(THINK_END)
        if self.start_id is None or self.end_id is None:
            raise ValueError(f"{self.name} reasoning parser could not locate think start/end tokens in the tokenizer!")
        self._tables = self.tables()
        self._tags = {phase: tuple(table) for phase, table in self._tables.items()}

    @property
    def _first_chars(self) -> str:
        """The characters a tag can start with: text without them needs no scan."""
        chars = self.__dict__.get("_first_chars_cache")
        if chars is None:
            chars = "".join(sorted({tag[0] for tags in self._tags.values() for tag in tags}))
            self.__dict__["_first_chars_cache"] = chars
        return chars

    def tables(self) -> dict[str, dict[str, Action]]:
        raise NotImplementedError

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        return "R"

    # -- the contract ---------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": self.initial_phase(prompt_token_ids), "h": ""}

    def reasoning_finished(self, state: State) -> bool:
        return state["p"] != "R"

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if not text:
            return "", ""
        if not state["h"] and not any(c in text for c in self._first_chars):  # fast path: no tag can start here
            return (text, "") if state["p"] == "R" else ("", text)
        buf = state["h"] + text if state["h"] else text
        reasoning: list[str] = []
        content: list[str] = []
        pos = 0
        phase = state["p"]
        while True:
            tags = self._tags[phase]
            if not tags:
                (reasoning if phase == "R" else content).append(buf[pos:])
                pos = len(buf)
                break
            at, tag = find_first(buf, tags, pos)
            if tag is None:
                keep = partial_suffix(buf[pos:], tags)
                end = len(buf) - keep
                (reasoning if phase == "R" else content).append(buf[pos:end])
                pos = end
                break
            (reasoning if phase == "R" else content).append(buf[pos:at])
            nxt, keep_tag = self._tables[phase][tag]
            if nxt is not None:
                phase = nxt
            if keep_tag:
                (reasoning if phase == "R" else content).append(tag)
            pos = at + len(tag)
        state["p"] = phase
        state["h"] = buf[pos:]
        return "".join(reasoning), "".join(content)

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        if state["p"] == "R":
            return held, ""
        return "", held


@register_reasoning("deepseek_r1")
class DeepSeekR1ReasoningParser(ThinkTagReasoningParser):
    name = "deepseek_r1"

    def tables(self) -> dict[str, dict[str, Action]]:
        return {"R": {THINK_START: (None, False), THINK_END: ("C", False)}, "C": {}}

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        for tid in reversed(token_ids):
            if tid == self.start_id:
                return False
            if tid == self.end_id:
                return True
        return False

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        before, found, after = text.partition(THINK_START)
        text = after if found else before
        if THINK_END not in text:
            return text, None
        reasoning, _, content = text.partition(THINK_END)
        return reasoning, content or None


@register_reasoning("qwen3")
class Qwen3ReasoningParser(ThinkTagReasoningParser):
    name = "qwen3"
    # the prompt scan of is_reasoning_end stops at a turn boundary (vLLM's turn_boundary_tokens)
    TURN_BOUNDARIES = ("<|im_start|>", "<|im_end|>")
    TOOL_START = "<tool_call>"
    # vLLM's qwen3 engine terminals (reasoning and qwen3_xml tool markup): never dropped as special
    MARKERS = (THINK_START, THINK_END, TOOL_START, "</tool_call>", "<function=", "</function>", "<parameter=",
               "</parameter>", ">")

    def __init__(self, ctx: ParserContext) -> None:
        self.thinking = ctx.chat_template_kwargs.get("enable_thinking", True)
        self.drops_special_tokens = bool(self.thinking)  # thinking off: vLLM returns the output untouched
        tok = ctx.tokenizer
        boundaries = (tok.token_to_id(t) for t in self.TURN_BOUNDARIES)
        self.boundary_ids = frozenset(i for i in boundaries if i is not None)
        tool_id = tok.token_to_id(self.TOOL_START)
        super().__init__(ctx)
        self.reasoning_end_ids = frozenset(i for i in (self.end_id, tool_id) if i is not None)

    def tables(self) -> dict[str, dict[str, Action]]:
        drop: Action = (None, False)
        reasoning = {THINK_START: drop, THINK_END: ("C", False), self.TOOL_START: ("C", True)}
        return {"R": reasoning, "C": {THINK_END: drop}, "P": {}}

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        if not self.thinking:
            return "P"
        if prompt_token_ids and self.boundary_ids and self.is_reasoning_end(prompt_token_ids):
            return "C"
        return "R"

    def adjust_request(self, request):
        # vLLM's engine parsers keep special tokens so the markers reach the parser
        request.skip_special_tokens = False
        return request

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, text  # vLLM returns the output untouched, "" included
        return super().parse_complete(text, token_ids, prompt_token_ids)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        if not self.thinking:
            return True  # vLLM: with thinking off reasoning has ended, whatever the prompt holds
        for tid in reversed(token_ids):
            if tid in self.reasoning_end_ids:
                return True
            if tid == self.start_id:
                return False
            if tid in self.boundary_ids:
                break
        return False


@register_reasoning("deepseek_v3")
class DeepSeekV3ReasoningParser(DeepSeekR1ReasoningParser):
    name = "deepseek_v3"

    def __init__(self, ctx: ParserContext) -> None:
        kwargs = ctx.chat_template_kwargs
        self.thinking = bool(kwargs.get("thinking", False)) or bool(kwargs.get("enable_thinking", False))
        super().__init__(ctx)

    def tables(self) -> dict[str, dict[str, Action]]:
        tables = super().tables()
        tables["P"] = {}
        return tables

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        return "R" if self.thinking else "P"

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return super().is_reasoning_end(token_ids) if self.thinking else True

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, text
        return super().parse_complete(text, token_ids, prompt_token_ids)


GRANITE_THINK = ("Here is my thought process:", "Here's my thought process:")
GRANITE_RESPONSE = ("Here is my response:", "Here's my response:")
_GRANITE_RE = None


@register_reasoning("granite")
class GraniteReasoningParser(ReasoningParser):
    """IBM Granite's text markers: "Here is my thought process:" ... "Here is my response:" ...

    vLLM's non-streaming rule (`parse_complete`, exact): the first thought-process marker
    followed later by a response marker splits reasoning / content (text before the first
    marker is dropped); without both markers everything is content. That needs the response
    marker before anything is known, so the stream follows vLLM's own stream instead: an output
    that *starts* with the thought-process marker streams as reasoning until the response
    marker, anything else streams as content. They agree whenever the model follows its format.
    """

    name = "granite"

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return False  # text markers: the prompt never leaves Granite's reasoning open or closed

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": "U", "h": ""}

    def reasoning_finished(self, state: State) -> bool:
        return state["p"] == "C"

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        buf = state["h"] + text
        state["h"] = ""
        if state["p"] == "U":
            for marker in GRANITE_THINK:
                if buf.startswith(marker):
                    state["p"] = "R"
                    buf = buf[len(marker):]
                    break
            else:
                if any(m.startswith(buf) for m in GRANITE_THINK):
                    state["h"] = buf
                    return "", ""
                state["p"] = "C"
        if state["p"] == "C":
            return "", buf
        at, marker = find_first(buf, GRANITE_RESPONSE)
        if marker is None:
            keep = partial_suffix(buf, GRANITE_RESPONSE)
            state["h"] = buf[len(buf) - keep:]
            return buf[:len(buf) - keep], ""
        state["p"] = "C"
        return buf[:at], buf[at + len(marker):]

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        return (held, "") if state["p"] == "R" else ("", held)

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        import re

        global _GRANITE_RE
        if _GRANITE_RE is None:
            _GRANITE_RE = re.compile(r"(?:Here's|Here is) my thought process:(.*?)(?:Here's|Here is) my response:(.*)",
                                     re.DOTALL)
        match = _GRANITE_RE.search(text)
        if match is None:
            return None, text
        return match.group(1), match.group(2) or None
