"""ERNIE 4.5 (baidu/ERNIE-4.5-*): `--reasoning-parser ernie45` and `--tool-call-parser ernie45`,
vLLM 0.33's legacy parsers.

    abc\\n</think>\\n\\n<response>\\ndef\\n</response>\\n          (an answer)
    abc\\n</think>\\n\\n\\n<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>\\n   (a call)

ernie45 (reasoning), vLLM's non-streaming rule: the output is cut after its first `<think>` (the
text before it dropped) when it has one; without `</think>` after that the rest is reasoning, else
the reasoning is the text before the first `</think>` and the content the text after it, narrowed
to what lies between its first `<response>` and its last `</response>` when both are there in that
order. `is_reasoning_end`: the last `<think>` / `</think>` of the ids. Ours follows it except where
it takes back what its own stream sent (core/parsers/README.md, "vLLM 0.33 bugs we do not follow"):
only a `<think>` that opens the output is dropped (a later one is text), and the content is
narrowed only when it starts with `<response>` after whitespace, to its last `</response>` or, when
none closes it, to the end.

Reasoning streaming: text before `</think>` is reasoning (a `<think>` that opens the output
dropped, any later one kept as text, as vLLM's partition keeps it); after it,
whitespace is held until `<response>` (then dropped) or other text (then sent: the content is
plain, its tags text); inside the response text streams and each `</response>` holds what follows
it until another `</response>` (the held text is content then) or the end (dropped): exactly the
non-streaming answer.

ernie45 (tools), vLLM's non-streaming rule (exact): without `<tool_call>` the output is content.
Else every match of `<tool_call>\\s*({.*?})\\s*</tool_call>` is a call (JSON, its "name" a string,
default ""; its "arguments", default {}, re-serialized with `json.dumps(..., ensure_ascii=False)`);
one body that fails and there are no calls, the whole output content. With calls (or none matched)
the content is the text before the first `<tool_call>`, trailing newlines stripped.

Tool streaming: content before the first `<tool_call>` streams with trailing newlines held; after
it the text is held until a match completes (matches found so far are final: a later text cannot
give an earlier or shorter one), each call goes out whole. Until the first call goes out the held text is
all text since `<tool_call>`, so a failing body turns it all into content as vLLM does; one failing
after a call went out cannot take the call back (README).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.families.think import (
    REASONING,
    THINK_END,
    THINK_START,
    Action,
    DeepSeekR1ReasoningParser,
)
from core.parsers.jsonstream import dumps, escape_lone_surrogates
from core.parsers.text import partial_suffix

RESPONSE_START, RESPONSE_END = "<response>", "</response>"
TC_START, TC_END = "<tool_call>", "</tool_call>"
_CALL = re.compile(r"<tool_call>\s*(?P<json>\{.*?\})\s*</tool_call>", re.DOTALL)

# phases of the reasoning stream besides think.py's (serialized as these letters)
OPENING = "O"  # nothing yet: a `<think>` may open the output
BEFORE = "B"  # after </think>, only whitespace so far (held in "w")
PLAIN_CONTENT = "C"  # content with no response narrowing: tags are text
IN_RESPONSE = "I"  # inside <response>
AFTER_RESPONSE = "A"  # after a </response>: text held in "w" until another </response>


class Ernie45ReasoningParser(DeepSeekR1ReasoningParser):
    """The think-tag machine for the reasoning (is_reasoning_end is deepseek_r1's, vLLM's base);
    the content after `</think>` goes through the response narrowing below."""

    name = "ernie45"

    def tables(self) -> dict[str, dict[str, Action]]:
        # (the content phase is handled by `_content`, not by tag tables)
        # (a `<think>` after the output's first characters stays text, as in vLLM's reasoning)
        return {REASONING: {THINK_END: (BEFORE, False)}, BEFORE: {}}

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": OPENING, "h": "", "w": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        if state["p"] == OPENING:  # a `<think>` that opens the output is dropped
            text = state["h"] + text
            state["h"] = ""
            if len(text) < len(THINK_START) and THINK_START.startswith(text):
                state["h"] = text
                return "", ""
            state["p"] = REASONING
            text = text.removeprefix(THINK_START)
        if state["p"] == REASONING:
            reasoning, rest = super().feed(state, text, token_ids)
            if state["p"] == REASONING:
                return reasoning, ""
            held, state["h"] = state["h"], ""
            return reasoning, self._content(state, rest + held)
        return "", self._content(state, text)

    def _content(self, state: State, text: str) -> str:
        phase = state["p"]
        if phase == PLAIN_CONTENT:
            return text
        buf = state["h"] + text
        state["h"] = ""
        out: list[str] = []
        pos = 0
        while pos < len(buf):
            phase = state["p"]
            if phase == PLAIN_CONTENT:
                out.append(buf[pos:])
                break
            tag = RESPONSE_START if phase == BEFORE else RESPONSE_END
            at = buf.find(tag, pos)
            end = at if at != -1 else len(buf) - partial_suffix(buf[pos:], (tag,))
            piece = buf[pos:end]
            if phase == BEFORE:
                if piece.strip():  # text before <response>: plain content from here on
                    out.append(state["w"] + buf[pos:])
                    state.update(p=PLAIN_CONTENT, w="")
                    return "".join(out)
                state["w"] += piece
            elif phase == IN_RESPONSE:
                out.append(piece)
            else:
                state["w"] += piece
            if at == -1:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            if phase == BEFORE:
                state.update(p=IN_RESPONSE, w="")
            elif phase == IN_RESPONSE:
                state.update(p=AFTER_RESPONSE, w="")
            else:  # another </response>: the one before it and the text between are content
                out.append(RESPONSE_END + state["w"])
                state["w"] = ""
        return "".join(out)

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        phase = state["p"]
        if phase in (REASONING, OPENING):
            return held, ""
        if phase == BEFORE:  # nothing but whitespace (and a partial tag): the content as written
            content, state["w"] = state["w"] + held, ""
            return "", content
        if phase == AFTER_RESPONSE:
            return "", ""  # the text after the last </response> is dropped
        return "", held

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        # (deliberately not vLLM's rule where its stream sends otherwise, README "vLLM 0.33 bugs
        # we do not follow": only a `<think>` that opens the output is dropped, the narrowing
        # applies only to a `<response>` after nothing but whitespace, and runs to the end when
        # no `</response>` closes it)
        text = text.removeprefix(THINK_START)
        if THINK_END not in text:
            return text, None
        reasoning, _, content = text.partition(THINK_END)
        if content.lstrip().startswith(RESPONSE_START):
            content = content[content.find(RESPONSE_START) + len(RESPONSE_START):]
            end = content.rfind(RESPONSE_END)
            content = content[:end] if end != -1 else content
        return reasoning, content or None


def parse_call(body: str) -> dict[str, Any] | None:
    """One matched body as vLLM builds its ToolCall; None where vLLM raises."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    name = obj.get("name", "") if isinstance(obj, dict) else None
    if not isinstance(name, str):
        return None  # (FunctionCall wants a str name)
    return {"id": None, "name": escape_lone_surrogates(name), "arguments": dumps(obj.get("arguments", {}))}


class Ernie45ToolParser(ToolParser):
    name = "ernie45"

    # phases (serialized as these letters)
    TEXT = "T"  # before the first <tool_call>
    CALLS = "K"  # after it
    FAILED = "F"  # a body failed before any call went out: everything is content

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        if TC_START not in text:
            return None, text
        calls = []
        for body in _CALL.findall(text):
            call = parse_call(body)
            if call is None:
                return None, text
            calls.append(call)
        return calls, text[:text.find(TC_START)].rstrip("\n") or None

    def start(self) -> State:
        # h: a partial <tool_call> held; w: trailing newlines held; buf: the text after the last
        # match, which before the first call is all text since the first <tool_call> (a failing
        # body then makes it content); seen: how much of buf was searched without a </tool_call>;
        # n: calls sent
        return {"ph": self.TEXT, "h": "", "w": "", "buf": "", "seen": 0, "n": 0}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        if state["ph"] == self.FAILED:
            return text, []
        calls: list[ToolCallDelta] = []
        if state["ph"] == self.TEXT:
            buf = state["h"] + text
            state["h"] = ""
            at = buf.find(TC_START)
            if at == -1:
                end = len(buf) - partial_suffix(buf, (TC_START,))
                state["h"] = buf[end:]
                return self._text(state, buf[:end]), calls
            out = self._text(state, buf[:at])
            state.update(ph=self.CALLS, buf="", seen=0)
            text = buf[at:]
        else:
            out = ""
        state["buf"] += text
        content = self._matches(state, calls)
        return out + content, calls

    def _text(self, state: State, text: str) -> str:
        """Content before the calls, its trailing newlines held (vLLM strips them with a call)."""
        body = text.rstrip("\n")
        if not body:
            state["w"] += text
            return ""
        out = state["w"] + body
        state["w"] = text[len(body):]
        return out

    def _matches(self, state: State, calls: list[ToolCallDelta]) -> str:
        buf = state["buf"]
        # a match ends with </tool_call>: search only when one has arrived
        if buf.find(TC_END, max(0, state["seen"] - len(TC_END))) == -1:
            self._keep(state, buf)
            return ""
        pos = 0
        while (match := _CALL.search(buf, pos)) is not None:
            call = parse_call(match.group("json"))
            pos = match.end()
            if call is None:
                if not state["n"]:  # vLLM: no calls, the whole output as content
                    content = state["w"] + buf
                    state.update(ph=self.FAILED, w="", buf="", seen=0)
                    return content
                continue  # (a call already went out: it stays, README)
            calls.append({"index": state["n"], "id": None, "type": "function",
                          "function": {"name": call["name"], "arguments": call["arguments"]}})
            state["n"] += 1
        self._keep(state, buf[pos:])
        return ""

    @staticmethod
    def _keep(state: State, rest: str) -> None:
        """Hold the text after the last match; after a call only later matches matter, and none
        starts before the next <tool_call> (before the first call it is all kept: a failing body
        makes it content)."""
        if state["n"]:
            at = rest.find(TC_START)
            rest = rest[at:] if at != -1 else rest[len(rest) - partial_suffix(rest, (TC_START,)):]
        state["buf"] = rest
        state["seen"] = len(rest)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        content = state["w"] + held if state["ph"] == self.TEXT else ""
        state.update(w="", buf="")
        return content, []

    def tools_called(self, state: State) -> bool:
        # vLLM's tools_called: a <tool_call> and no failing body, even with no complete call
        # (its blank content is then dropped)
        return state["n"] > 0 or state["ph"] == self.CALLS
