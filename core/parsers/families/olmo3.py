"""olmo3 reasoning (allenai/Olmo-3-*): `<think>...</think>` written with ordinary vocabulary
entries (Olmo 3 has no think tokens), read as text (vLLM 0.33's Olmo3ReasoningParser).

vLLM's non-streaming rule (`parse_complete`, exact): `^(?:<think>)?(.*?)</think>(.*)$` over the
whole output: reasoning is the text before the first `</think>` (one leading `<think>` dropped,
any other kept as text), content everything after it, markers included; an empty part is None.
Without a `</think>` the whole output is content (an empty output: content "").

Streaming: the output starts in reasoning (a leading `<think>`, even split across chunks, is
dropped); the text before the first `</think>` streams as reasoning (only a partial `</think>` is
held), everything after it as content with no further tag handling. State: a phase letter and
at most seven held characters. An output that never writes `</think>` has streamed as reasoning
while the non-streaming answer makes it content: only the end tells (core/parsers/README.md,
"Where streaming cannot equal the non-streaming answer"; vLLM's own stream does the same).

`is_reasoning_end` is vLLM's check on ids: `</` or `Ġ</` followed by `think`, `>` (each a
vocabulary entry, looked up at start-up: a tokenizer without them is refused like vLLM's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.parsers.base import ParserContext, ReasoningParser, State
from core.parsers.text import partial_suffix

THINK_START, THINK_END = "<think>", "</think>"
_SPLIT = re.compile(r"^(?:<think>)?(?P<reasoning>.*?)</think>(?P<content>.*)$", re.DOTALL)
# vLLM's token pieces of `</think>` (byte-level BPE spellings)
END_FIRST, END_REST = ("Ġ</", "</"), ("think", ">")
# phases (serialized as these letters)
OPENING, REASONING, CONTENT = "O", "R", "C"  # OPENING: a leading <think> may still come


class Olmo3ReasoningParser(ReasoningParser):
    name = "olmo3"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        ids = {t: ctx.tokenizer.token_to_id(t) for t in END_FIRST + END_REST}  # (a lookup each, not the vocab)
        missing = [t for t, i in ids.items() if i is None]
        if missing:
            raise ValueError(f"olmo3 reasoning parser could not find {missing} in the tokenizer's vocabulary")
        self.end_first = {ids[t] for t in END_FIRST}
        self.end_rest = [ids[t] for t in END_REST]

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        ids, rest = list(token_ids), self.end_rest
        return any(ids[i] in self.end_first and ids[i + 1:i + 1 + len(rest)] == rest
                   for i in range(len(ids) - len(rest) - 1, -1, -1))

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        match = _SPLIT.match(text)
        if match is None:
            return None, text  # (vLLM's: an empty output is content "", not None)
        return match["reasoning"] or None, match["content"] or None

    # -- streaming --------------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        # p: phase; h: held text (a partial leading <think>, or a partial </think>)
        return {"p": OPENING, "h": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if state["p"] == CONTENT:
            return "", text
        buf, state["h"] = state["h"] + text, ""
        if state["p"] == OPENING:
            if THINK_START.startswith(buf) and len(buf) < len(THINK_START):
                state["h"] = buf  # maybe the leading <think>: wait
                return "", ""
            state["p"] = REASONING
            if buf.startswith(THINK_START):
                buf = buf[len(THINK_START):]
        at = buf.find(THINK_END)
        if at != -1:
            state["p"] = CONTENT
            return buf[:at], buf[at + len(THINK_END):]
        keep = partial_suffix(buf, (THINK_END,))
        state["h"] = buf[len(buf) - keep:]
        return buf[:len(buf) - keep], ""

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        return (held, "") if state["p"] != CONTENT else ("", held)
