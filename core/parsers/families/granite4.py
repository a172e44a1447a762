"""Granite 4: `--tool-call-parser granite4` and `--reasoning-parser granite_thinking_parser`
(vLLM 0.33's vllm/tool_parsers/granite4_tool_parser.py and vllm/parser/granite_thinking.py).

    <think>...</think>
    text <tool_call>{"name": "f", "arguments": {...}}</tool_call> more text <tool_call>...</tool_call>

granite4 (tools), vLLM's non-streaming rule (`extract_complete`, exact): the output is cut at
every `<tool_call>` / `</tool_call>` in order; each call body must be a JSON object with a
string "name" and an "arguments" key (a string is taken as written, anything else but null is
re-serialized with `json.dumps(..., ensure_ascii=False)`; other keys are ignored, a repeated key
keeps its last value). The content is all the text outside the calls, joined. Any failure — a
body that is empty or not such an object, a start inside a call, an end outside one, a call never
closed — and there are no calls: the whole output is the content.

Streaming: text outside calls streams as it comes (a partial tag held back); a call's body is
held until its `</tool_call>` (state: one call's text, as vLLM's own stream holds it) and then
goes out whole. A failure before any call went out turns the rest into content verbatim, which
aggregates to the non-streaming answer; one after a call went out cannot take that call back
(core/parsers/README.md, "Where streaming cannot equal the non-streaming answer").

granite_thinking_parser (reasoning) is nemotron_v3's engine grammar (Qwen3's markers, reasoning
right-stripped, `enable_thinking: false` passing the output through) with two Granite rules: the
content loses its leading newlines (the template writes `\\n</think>\\n`), and vLLM's
`enable_thinking: false` / `force_nonempty_content: true` swap fires only when the content was
absent (None), not when it was present but blank; ours, as vLLM's stream, repeats the reasoning as
content at the end whenever no content came but newlines (`GraniteThinkingReasoningParser`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.families.qwen3_variants import NemotronV3ReasoningParser, keep_sent
from core.parsers.jsonstream import dumps, escape_lone_surrogates
from core.parsers.structural_tag import keep_markers_for_tools
from core.parsers.text import partial_suffix

TC_START, TC_END = "<tool_call>", "</tool_call>"
_TAGS = (TC_START, TC_END)


def parse_call(body: str) -> dict[str, Any] | None:
    """One call body as vLLM's `_collect_results` reads it; None where vLLM raises."""
    if not body:
        return None  # (vLLM asserts text between the tags)
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or obj.get("arguments") is None:
        return None  # (FunctionCall wants a str name and str arguments; null arguments fail)
    args = obj["arguments"]
    arguments = escape_lone_surrogates(args) if isinstance(args, str) else dumps(args)
    return {"id": None, "name": escape_lone_surrogates(obj["name"]), "arguments": arguments}


def _next_tag(text: str, pos: int) -> tuple[int, str | None]:
    """The first `<tool_call>` or `</tool_call>` at or after pos (vLLM's alternation, leftmost)."""
    start, end = text.find(TC_START, pos), text.find(TC_END, pos)
    if start == -1 and end == -1:
        return -1, None
    if end == -1 or (start != -1 and start < end):
        return start, TC_START
    return end, TC_END


class Granite4ToolParser(ToolParser):
    name = "granite4"
    # no structural-tag model in vLLM for granite4: forced calls take the generic JSON path
    supports_required_and_named = True

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        return keep_markers_for_tools(request)

    # -- non-streaming: vLLM's rule, exactly ---------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        segments: list[str] = []
        calls: list[dict[str, Any]] = []
        pos, in_call = 0, False
        while True:
            at, tag = _next_tag(text, pos)
            if tag is None:
                break
            if (tag == TC_START) == in_call:
                return None, text  # a start inside a call, or an end outside one
            if in_call:
                call = parse_call(text[pos:at])
                if call is None:
                    return None, text
                calls.append(call)
            else:
                segments.append(text[pos:at])
            in_call = not in_call
            pos = at + len(tag)
        if in_call:
            return None, text  # never closed
        segments.append(text[pos:])
        return (calls or None), "".join(segments) or None

    # -- streaming --------------------------------------------------------------------------

    TEXT, CALL, PLAIN = "T", "C", "X"  # outside a call, inside one, after a failure (all content)

    def start(self) -> State:
        # h: held text (a partial tag outside a call; the call's body inside one); n: calls sent
        return {"ph": self.TEXT, "h": "", "n": 0}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        ph = state["ph"]
        if ph == self.PLAIN or (ph == self.TEXT and not state["h"] and "<" not in text):
            return text, []  # fast path: plain content
        held = state["h"]
        buf = held + text
        # only the new text (and a tag's worth before it) can hold a new tag: flat per-token cost
        pos = max(0, len(held) - len(TC_END) + 1) if ph == self.CALL else 0
        content: list[str] = []
        out: list[ToolCallDelta] = []
        body_from = 0  # where the held call body starts in buf
        while True:
            at, tag = _next_tag(buf, pos)
            if state["ph"] == self.TEXT:
                if tag is None:
                    keep = partial_suffix(buf[body_from:], _TAGS)
                    content.append(buf[body_from:len(buf) - keep])
                    state["h"] = buf[len(buf) - keep:]
                    return "".join(content), out
                content.append(buf[body_from:at])
                if tag == TC_END:  # an end outside a call: vLLM gives up on every call
                    return self._fail(state, content, buf[at:]), out
                state["ph"], body_from, pos = self.CALL, at + len(TC_START), at + len(TC_START)
            else:  # inside a call
                if tag is None:
                    state["h"] = buf[body_from:]
                    return "".join(content), out
                if tag == TC_START:  # a start inside a call
                    return self._fail(state, content, TC_START + buf[body_from:]), out
                call = parse_call(buf[body_from:at])
                if call is None:
                    return self._fail(state, content, TC_START + buf[body_from:]), out
                out.append({"index": state["n"], "id": None, "type": "function",
                            "function": {"name": call["name"], "arguments": call["arguments"]}})
                state["n"] += 1
                state["ph"], body_from, pos = self.TEXT, at + len(TC_END), at + len(TC_END)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        if state["ph"] == self.CALL:  # never closed: vLLM's answer is all content
            state["ph"] = self.PLAIN
            return TC_START + held, []
        return held, []

    def _fail(self, state: State, content: list[str], rest: str) -> str:
        """vLLM's non-streaming answer is now the whole output as content: with no call sent,
        the content so far plus the rest verbatim is exactly that."""
        state["ph"], state["h"] = self.PLAIN, ""
        content.append(rest)
        return "".join(content)


class GraniteThinkingReasoningParser(NemotronV3ReasoningParser):
    """nemotron_v3's rules, the content's leading newlines dropped; vLLM's reasoning counts as
    ended only once the content starts (parser/granite_thinking.py `reasoning_ended`), so its
    stream's end repeats the reasoning (as nemotron_v3's) whenever no content came but newlines."""

    name = "granite_thinking_parser"

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        state = super().start(prompt_token_ids)
        state["cs"] = False  # content started: its leading newlines are behind us
        return state

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        reasoning, content = self._lstrip(state, *self._parts(state, text, token_ids))
        keep_sent(state, reasoning, state["cs"])
        return reasoning, content

    def finish(self, state: State) -> tuple[str, str]:
        reasoning, content = self._lstrip(state, *self._last_parts(state))
        keep_sent(state, reasoning, state["cs"])
        return reasoning, content

    @staticmethod
    def _lstrip(state: State, reasoning: str, content: str) -> tuple[str, str]:
        if content and not state["cs"]:
            content = content.lstrip("\n")
            state["cs"] = bool(content)
        return reasoning, content

    def split_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None, str]:
        if self._passes_through():  # (thinking off: vLLM's qwen3 returns the output untouched, then the newline rule)
            return None, text.lstrip("\n") or None, ""
        return super().split_complete(text, token_ids, prompt_token_ids)
