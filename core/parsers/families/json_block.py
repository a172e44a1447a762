"""The shape shared by vLLM 0.33's single-block JSON tool parsers (phi4_mini_json, internlm,
jamba): text, then one block `START body END` whose body is JSON, and nothing after it counts.

vLLM's non-streaming rule for each reads the first block only: its body is parsed as a whole
(the family's `parse_body`), text after the block is dropped, and any failure makes the whole
output the content. The families differ in the body (a list, one object), the content kept
beside calls and whether the end marker may be missing (then the body runs to the end).

Streaming (ours; vLLM's own streams are absent or partial): text before the block streams as it
comes (a partial start marker held back); the body is held until its end marker (state: one
block's text, as vLLM holds it) and then goes out whole; after the block nothing is sent. A body
that fails turns the rest into content verbatim, which aggregates to the non-streaming answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.jsonstream import escape_lone_surrogates
from core.parsers.text import partial_suffix

Call = dict[str, Any]


class BodyFailed(Exception):
    """The body is not what vLLM's parser accepts: the whole output is the content."""


def named_call(name: Any, arguments: str) -> Call:
    """A call as vLLM's FunctionCall takes it: the name must be a string (pydantic, no coercion)."""
    if not isinstance(name, str):
        raise BodyFailed
    return {"id": None, "name": escape_lone_surrogates(name), "arguments": arguments}


class JsonBlockToolParser(ToolParser):
    START: ClassVar[str]
    END: ClassVar[str]
    END_REQUIRED: ClassVar[bool] = True  # False: a block never closed runs to the end of the output

    TEXT, BLOCK, DONE, PLAIN = "T", "B", "D", "X"  # before the block, in it, after it, after a failure

    def parse_body(self, body: str) -> list[Call]:
        """The calls of one block body (possibly none: vLLM's tools_called with no call); raises
        BodyFailed where vLLM's parser gives up (or raises)."""
        raise NotImplementedError

    def content_beside(self, before: str) -> str | None:
        """vLLM's content when the block parsed: by default the text before it."""
        return before or None

    def whole_fails(self, text: str, start: int) -> bool:
        """A rule on the whole output that fails it (internlm: a second start marker)."""
        return False

    def body_fails(self, body: str) -> bool:
        """A rule on the held body that fails it before its end (internlm: a start marker in it)."""
        return False

    # -- non-streaming: vLLM's rule ------------------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]) -> tuple[list[Call] | None, str | None]:
        at = text.find(self.START)
        if at < 0:
            return None, text
        begin = at + len(self.START)
        end = text.find(self.END, begin)
        if end < 0 and self.END_REQUIRED:
            return None, text
        try:
            if self.whole_fails(text, at):
                raise BodyFailed
            calls = self.parse_body(text[begin:] if end < 0 else text[begin:end])
        except BodyFailed:
            return None, text
        return calls, self.content_beside(text[:at])

    # -- streaming ------------------------------------------------------------------------

    def start(self) -> State:
        # h: held text (a partial start marker before the block; the body inside it)
        return {"ph": self.TEXT, "h": ""}

    def tools_called(self, state: State) -> bool:
        return state["ph"] == self.DONE

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        ph = state["ph"]
        if ph == self.PLAIN:
            return text, []
        if ph == self.DONE:
            return "", []  # (vLLM drops the text after the block)
        held, state["h"] = state["h"], ""
        buf = held + text
        content = ""
        if ph == self.TEXT:
            at = buf.find(self.START)
            if at < 0:
                keep = partial_suffix(buf, (self.START,))
                state["h"] = buf[len(buf) - keep:]
                return buf[:len(buf) - keep], []
            content, buf, held = buf[:at], buf[at + len(self.START):], ""
            state["ph"] = self.BLOCK
        # in the block: only the new text (and a marker's worth before it) can hold the end
        end = buf.find(self.END, max(0, len(held) - len(self.END) + 1))
        body = buf if end < 0 else buf[:end]
        if self.body_fails(body):
            return content + self._fail(state, buf), []
        if end < 0:
            state["h"] = buf
            return content, []
        return self._close(state, content, body, buf)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        if state["ph"] != self.BLOCK:
            return held, []
        if self.END_REQUIRED:  # never closed: vLLM's answer is all content
            return self._fail(state, held), []
        return self._close(state, "", held, held)

    def _close(self, state: State, content: str, body: str, buf: str) -> tuple[str, list[ToolCallDelta]]:
        try:
            calls = self.parse_body(body)
        except BodyFailed:
            return content + self._fail(state, buf), []
        state["ph"] = self.DONE
        return content, [{"index": i, "id": None, "type": "function",
                          "function": {"name": c["name"], "arguments": c["arguments"]}} for i, c in enumerate(calls)]

    def _fail(self, state: State, rest: str) -> str:
        state["ph"] = self.PLAIN
        return self.START + rest
