"""olmo3 reasoning and tools (allenai/Olmo-3-*), vLLM 0.33's Olmo3ReasoningParser and
Olmo3PythonicToolParser.

Reasoning: `<think>...</think>` written with ordinary vocabulary entries (Olmo 3 has no think
tokens), read as text.

vLLM's non-streaming rule (`parse_complete`): `^(?:<think>)?(.*?)</think>(.*)$` over the
whole output: reasoning is the text before the first `</think>` (one leading `<think>` dropped,
any other kept as text), content everything after it, markers included; an empty part is None.
Without a `</think>` vLLM makes the whole output content; ours makes it reasoning (a leading
`<think>` dropped), as both vLLM's stream and ours send it (core/parsers/README.md, "vLLM 0.33
bugs we do not follow"); an empty output stays content "".

Streaming: the output starts in reasoning (a leading `<think>`, even split across chunks, is
dropped); the text before the first `</think>` streams as reasoning (only a partial `</think>` is
held), everything after it as content with no further tag handling. State: a phase letter and
at most seven held characters.

`is_reasoning_end` is vLLM's check on ids: `</` or `Ġ</` followed by `think`, `>` (each a
vocabulary entry, looked up at start-up: a tokenizer without them is refused like vLLM's).

Tools: newline-separated pythonic calls, `<function_calls>\nf(a=1)\ng(b="x")\n</function_calls>`.
vLLM's non-streaming rule (`extract_complete`): the inside of the first `<function_calls>` ...
`</function_calls>` (stripped), else the whole output, has its non-blank lines stripped and
joined with ", " into `[...]`, which must pass the pythonic rule (vLLM's loose call-list pattern,
then a list of calls whose keyword arguments are literals; `null` / `true` / `false` too): the
calls, and no content (the text around the block is dropped); otherwise no call and the output is
content as written. Two deliberate differences, where vLLM's answer drops or reads otherwise what
both streams sent as content (core/parsers/README.md, "vLLM 0.33 bugs we do not follow"): the
text before a block of calls is the content beside them, and a call list without the tags is
calls only if each of its non-blank lines is a call (or calls) by itself, a name and `(` first.

Streaming: an output whose lines all read as calls so far (a call list without the tags) is held
and answered whole at its end by the rule above; the first line that is not a call releases it
as content. Then `<function_calls>` opens a block, held until `</function_calls>` and answered by
the same rule: its calls go out whole and the rest of the output is dropped, or, when it is no
call list, its text and the rest are content. The state holds that list or block (vLLM reads it
whole).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from typing import Any

from core.parsers.base import ParserContext, ReasoningParser, State, ToolCallDelta, ToolParser
from core.parsers.families.pythonic import call_list, calls_of
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
        if match is None:  # never closed: reasoning, as streamed (vLLM: content; README)
            return (text.removeprefix(THINK_START) or None, None) if text else (None, text)
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


BLOCK_OPEN, BLOCK_CLOSE = "<function_calls>", "</function_calls>"
_BLOCK = re.compile(r"<function_calls>(.*?)</function_calls>", re.DOTALL)
# the line boundaries of str.splitlines (what vLLM splits the calls at)
_LINE_END = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# a line that may still become a call: a (dotted) name, then at most its `(` and anything after
_CALL_HEAD = re.compile(r"[^\W\d][\w.]*(?:\(|\Z)")


def joined_calls(body: str) -> list[dict[str, Any]] | None:
    """vLLM's reading of a block's inside (or of a whole output): its non-blank lines stripped and
    joined with ", " into one pythonic list of calls."""
    return call_list("[" + ", ".join(line.strip() for line in body.splitlines() if line.strip()) + "]")


def call_line(line: str) -> bool:
    """A line of a call list without the tags: blank, or a call (or calls) by itself, a (dotted)
    name and `(` first (the stream releases the output as content at the first other line)."""
    line = line.strip()
    return not line or (_CALL_HEAD.match(line) is not None and calls_of("[" + line + "]") is not None)


class Olmo3ToolParser(ToolParser):
    name = "olmo3"

    # phases (serialized as these letters)
    BARE = "L"  # every line so far may be a call: the whole output is held (a call list without tags)
    TEXT = "T"  # content, until <function_calls>
    BLOCK = "B"  # in the first block: held until </function_calls>
    DROP = "D"  # after a block of calls: the rest is dropped
    PLAIN = "X"  # the block was no call list: the rest is content

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        match = _BLOCK.search(text)
        if match is not None:
            calls = joined_calls(match.group(1).strip())
            # the text before the block went out before the block appeared: it is the content
            return (calls, text[:match.start()] or None) if calls is not None else (None, text)
        calls = joined_calls(text) if all(call_line(line) for line in text.splitlines()) else None
        return (calls, None) if calls is not None else (None, text)

    def start(self) -> State:
        # ph: phase; raw: the held output (BARE) or block (BLOCK); ln: where the current line starts
        # in raw and hd: its head (a name and `(`) was seen (BARE); h: a partial tag held at the end
        # (TEXT, BLOCK); n: calls sent
        return {"ph": self.BARE, "raw": "", "ln": 0, "hd": False, "h": "", "n": 0}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        ph = state["ph"]
        if ph == self.PLAIN:
            return text, []
        if ph == self.DROP:
            return "", []
        if ph == self.BARE:
            text = self._bare(state, text)
            if state["ph"] == self.BARE:
                return "", []
        return self._tagged(state, text)

    def _bare(self, state: State, text: str) -> str:
        """Hold the output while every line may be a call; else release it all (returned) as text.
        Each line is read once when it ends (new text only is searched for line ends), and the
        current line's head only until its `(` is seen."""
        scanned = len(state["raw"])
        state["raw"] += text
        raw = state["raw"]
        for end in _LINE_END.finditer(raw, scanned):
            if not call_line(raw[state["ln"]:end.start()]):
                return self._release(state)
            state.update(ln=end.end(), hd=False)
        if not state["hd"]:
            line = raw[state["ln"]:].lstrip()
            head = _CALL_HEAD.match(line)
            if line and head is None:
                return self._release(state)
            state["hd"] = bool(line) and line[head.end() - 1:head.end()] == "("
        return ""

    def _release(self, state: State) -> str:
        raw = state["raw"]
        state.update(ph=self.TEXT, raw="", ln=0, hd=False)
        return raw

    def _tagged(self, state: State, text: str) -> tuple[str, list[ToolCallDelta]]:
        buf, state["h"] = state["h"] + text, ""
        if state["ph"] == self.TEXT:
            at = buf.find(BLOCK_OPEN)
            if at == -1:
                end = len(buf) - partial_suffix(buf, (BLOCK_OPEN,))
                state["h"] = buf[end:]
                return buf[:end], []
            state.update(ph=self.BLOCK, raw=BLOCK_OPEN)
            content, buf = buf[:at], buf[at + len(BLOCK_OPEN):]
        else:
            content = ""
        at = buf.find(BLOCK_CLOSE)
        if at == -1:
            end = len(buf) - partial_suffix(buf, (BLOCK_CLOSE,))
            state["raw"] += buf[:end]
            state["h"] = buf[end:]
            return content, []
        block = state["raw"] + buf[:at]
        calls = joined_calls(block[len(BLOCK_OPEN):].strip())
        state["raw"] = ""
        if calls is None:  # no call list: the block and all that follows are content, as written
            state["ph"] = self.PLAIN
            return content + block + buf[at:], []
        state["ph"] = self.DROP
        return content, self._deltas(state, calls)

    def _deltas(self, state: State, calls: list[dict[str, Any]]) -> list[ToolCallDelta]:
        out = [{"index": state["n"] + i, "id": None, "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]}} for i, c in enumerate(calls)]
        state["n"] += len(calls)
        return out

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        ph, held = state["ph"], state["h"]
        raw = state["raw"]
        state.update(raw="", h="", ln=0, hd=False)
        if ph == self.BARE:  # the whole output held: vLLM's rule, exactly
            calls, content = self.extract_complete(raw, ())
            state["ph"] = self.DROP if calls else self.PLAIN
            return content or "", self._deltas(state, calls or [])
        if ph == self.BLOCK:  # never closed: content as written
            state["ph"] = self.PLAIN
            return raw + held, []
        return ("" if ph == self.DROP else held), []

    def tools_called(self, state: State) -> bool:
        return state["n"] > 0
