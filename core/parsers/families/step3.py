"""Step 3 (stepfun-ai/step3): `step3` tool calls and `step3` reasoning, vLLM 0.33's legacy parsers.

    <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME">
    <steptml:parameter name="KEY">VALUE</steptml:parameter>...</steptml:invoke><｜tool_call_end｜>...<｜tool_calls_end｜>

vLLM's non-streaming rule (`extract_complete`, exact): the block is the text between the first
`<｜tool_calls_begin｜>` and the first `<｜tool_calls_end｜>` after it (no closing marker: no
calls). The block is split at every `<｜tool_call_begin｜>` (the text before the first one is a
part too); a part is a call when it holds `<｜tool_call_end｜>`, its text before that marker holds
`<｜tool_sep｜>`, the text before the separator is "function" up to whitespace, and an
`<steptml:invoke name="...">` tag is found after it. Every `<steptml:parameter>` of that text is
an argument (stripped, a repeated key keeps its first place and last value), typed by the tool's
schema for the five scalar types only (Python's `int()` / `float()`, booleans and null by their
lower-case spelling), serialized with `json.dumps(..., ensure_ascii=False)`. With a call, the
content is the text before and after the block joined and stripped (ours: right-stripped only,
whitespace alone none; vLLM's own stream sends the leading whitespace: README, "vLLM 0.33 bugs we
do not follow"); with none, the whole output.

Streaming: content before the block streams with its trailing whitespace held (the strip); the
block's text is held until its first call completes (a block with no call is all content, as the
whole output), each call goes out whole at its `<｜tool_call_end｜>`. Held state: the current part
and, before the first call, the block. A block cut off after a call went out cannot equal the
non-streaming answer (vLLM then answers with no calls; README).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import State, ToolCallDelta, ToolParser
from core.parsers.families.think import (
    CONTENT,
    REASONING,
    THINK_END,
    Action,
    ThinkTagReasoningParser,
)
from core.parsers.structural_tag import keep_markers_for_tools
from core.parsers.text import find_first, partial_suffix

CALLS_BEGIN = "<｜tool_calls_begin｜>"
CALLS_END = "<｜tool_calls_end｜>"
CALL_BEGIN = "<｜tool_call_begin｜>"
CALL_END = "<｜tool_call_end｜>"
SEP = "<｜tool_sep｜>"
BLOCK_TAGS = (CALL_BEGIN, CALL_END, CALLS_END)

_INVOKE = re.compile(r'<steptml:invoke name="([^"]+)">')
_PARAM = re.compile(r'<steptml:parameter name="([^"]+)">(.*?)</steptml:parameter>', re.DOTALL)


class Step3ReasoningParser(ThinkTagReasoningParser):
    """Everything before the first `</think>` is reasoning (a `<think>` in it is kept as text),
    everything after it content; without `</think>` the whole output is reasoning. vLLM looks up
    `</think>` only, and its `is_reasoning_end` is that id anywhere in the ids."""

    name = "step3"
    needs_start_token = False

    def tables(self) -> dict[str, dict[str, Action]]:
        return {REASONING: {THINK_END: (CONTENT, False)}, CONTENT: {}}

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return self.end_id in token_ids

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        at = text.find(THINK_END)
        if at == -1:
            return text, None
        # (the reasoning stays a string when empty: vLLM returns the slice as it is)
        return text[:at], text[at + len(THINK_END):] or None


def _typed(value: str, schema: Any) -> Any:
    """vLLM's `_cast_arguments` for one (already stripped) value."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "integer":
        with contextlib.suppress(ValueError):
            return int(value)
    elif kind == "number":
        with contextlib.suppress(ValueError):
            return float(value)
    elif kind == "boolean":
        lower = value.lower()
        return lower == "true" if lower in ("true", "false") else value
    elif kind == "null":
        return None if value.lower() == "null" else value
    return value


class Step3ToolParser(ToolParser):
    name = "step3"

    # phases (serialized as these letters)
    TEXT = "T"  # before the block
    BLOCK = "B"  # inside the block
    AFTER = "E"  # after a block that had calls: content, its trailing whitespace dropped
    PLAIN = "X"  # after a block without calls: the whole output is content

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        return keep_markers_for_tools(request)

    # -- one call -----------------------------------------------------------------------------

    def parse_call(self, part: str) -> dict[str, Any] | None:
        """A block part's text before `<｜tool_call_end｜>` as a call {name, arguments}, or None."""
        if SEP not in part:
            return None
        kind, _, invoke = part.partition(SEP)
        if kind.strip() != "function":
            return None
        head = _INVOKE.search(invoke)
        if head is None:
            return None
        name = head.group(1)
        params: dict[str, Any] = {key: value.strip() for key, value in _PARAM.findall(invoke)}
        schema = self._properties(name)
        if schema is not None:
            for key, value in params.items():
                params[key] = _typed(value, schema.get(key, {}))
        return {"id": None, "name": name, "arguments": json.dumps(params, ensure_ascii=False)}

    def _properties(self, name: str) -> dict[str, Any] | None:
        """The first tool of that name's `properties` (vLLM types only against that one)."""
        for tool in self.ctx.tools or ():
            function = tool.get("function") or {}
            if function.get("name") == name:
                params = function.get("parameters") or {}
                props = params.get("properties", {}) if isinstance(params, dict) else {}
                return props if isinstance(props, dict) else {}
        return None

    # -- non-streaming: vLLM's rule, exactly ----------------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        pre, found, rest = text.partition(CALLS_BEGIN)
        if not found or CALLS_END not in rest:
            return None, text
        block, _, post = rest.partition(CALLS_END)
        calls = []
        for part in block.split(CALL_BEGIN):
            if CALL_END in part:
                call = self.parse_call(part.partition(CALL_END)[0])
                if call is not None:
                    calls.append(call)
        if not calls:
            return None, text
        content = pre + post
        return calls, content.rstrip() if content.strip() else None

    # -- streaming ----------------------------------------------------------------------------

    def start(self) -> State:
        # h: a possible marker held at the end; w: whitespace held (stripped if a call is made);
        # nw: content other than whitespace went out; n: calls sent; raw: the block's text until a
        # call goes out; op: a part is open (not yet closed by its end marker); the open part's
        # text is raw[po:] while raw is kept (not held twice), else pt
        return {"ph": self.TEXT, "h": "", "w": "", "nw": False, "n": 0, "raw": None, "op": False, "po": 0, "pt": ""}

    def _content(self, state: State, text: str, out: list[str]) -> None:
        """Content with its trailing whitespace held (the answer is right-stripped when a call is
        found); whitespace alone is held until other text releases it (or the end drops it)."""
        body = text.rstrip()
        if not body:
            state["w"] += text
            return
        out.append(state["w"] + body)
        state["w"] = text[len(body):]
        state["nw"] = True

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        if state["ph"] == self.PLAIN:
            return text, []
        out: list[str] = []
        calls: list[ToolCallDelta] = []
        if state["ph"] == self.AFTER:
            self._content(state, text, out)
            return "".join(out), calls
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        pos = 0
        while pos < len(buf):
            if state["ph"] == self.TEXT:
                at = buf.find(CALLS_BEGIN, pos)
                if at == -1:
                    end = len(buf) - partial_suffix(buf[pos:], (CALLS_BEGIN,))
                    self._content(state, buf[pos:end], out)
                    state["h"] = buf[end:]
                    break
                self._content(state, buf[pos:at], out)
                pos = at + len(CALLS_BEGIN)
                state.update(ph=self.BLOCK, raw=CALLS_BEGIN, op=True, po=len(CALLS_BEGIN), pt="")
                continue
            if state["ph"] != self.BLOCK:  # the block ended in this feed
                rest = buf[pos:]
                if state["ph"] == self.PLAIN:
                    out.append(rest)
                else:
                    self._content(state, rest, out)
                break
            at, tag = find_first(buf, BLOCK_TAGS, pos)
            end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], BLOCK_TAGS)
            raw = state["raw"]
            if raw is not None:
                state["raw"] = raw = raw + buf[pos:end] + (tag or "")
            elif state["op"]:
                state["pt"] += buf[pos:end]
            if tag is None:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            if tag == CALL_BEGIN:
                state.update(op=True, po=len(raw) if raw is not None else 0, pt="")
            elif tag == CALL_END:
                if state["op"]:
                    part = raw[state["po"]:len(raw) - len(CALL_END)] if raw is not None else state["pt"]
                    state.update(op=False, po=0, pt="")
                    call = self.parse_call(part)
                    if call is not None:
                        calls.append({"index": state["n"], "id": None, "type": "function",
                                      "function": {"name": call["name"], "arguments": call["arguments"]}})
                        state["n"] += 1
                        state["raw"] = None
            else:  # the block's end
                state.update(op=False, po=0, pt="")
                if state["n"]:
                    state["ph"] = self.AFTER
                else:  # no call: the whole output is content, as written
                    out.append(state["w"] + state["raw"])
                    state.update(ph=self.PLAIN, w="", raw=None)
        return "".join(out), calls

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        ph = state["ph"]
        content = ""
        if ph == self.TEXT:
            content = state["w"] + held
        elif ph == self.BLOCK and state["raw"] is not None:  # cut off before any call: all content
            content = state["w"] + state["raw"] + held
        # (a block cut off after a call went out: vLLM's answer has no calls, ours keeps them)
        state.update(w="", raw=None, op=False, po=0, pt="")
        return content, []

    def tools_called(self, state: State) -> bool:
        return state["n"] > 0
