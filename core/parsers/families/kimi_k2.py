"""kimi_k2: `<think>` reasoning and the tool-call section with Kimi's own call ids.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>

Rules of vLLM 0.33's Kimi-K2 parser engine, as observed on its non-streaming answers:
* reasoning as qwen3's, except that the section start ends it implicitly, a repeated
  `</think>` in content is dropped, the reasoning is right-stripped, and thinking is on unless
  `thinking`/`enable_thinking` say otherwise;
* a call's header must look like `ID:N`; the id is the header itself (e.g.
  `functions.get_weather:0`) and the name is its part before `:` without `functions.`; a header
  without `:N` drops the call; names are not checked against the tools;
* arguments are the raw text, stripped (`{}` when empty), not re-serialized;
* content is the text before the section (not stripped); text after the section is dropped.

Streaming sends the header once `<|tool_call_argument_begin|>` arrives, then the arguments as
generated, holding back leading and trailing whitespace (the non-streaming answer strips it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolCallDelta, ToolParser
from core.parsers.families.glm45 import Glm45ReasoningParser
from core.parsers.families.think import THINK_END, THINK_START, Action
from core.parsers.registry import register_reasoning, register_tool
from core.parsers.structural_tag import TagModel, _json_content, apply_structural_tag
from core.parsers.text import find_first, merge_tool_deltas, partial_suffix

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_HEADER = re.compile(r".+:\d+", re.DOTALL)


def _thinking(kwargs: dict[str, Any]) -> bool:
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    return True if thinking is None and enable is None else bool(thinking) or bool(enable)


@register_reasoning("kimi_k2")
class KimiK2ReasoningParser(Glm45ReasoningParser):
    name = "kimi_k2"
    MARKERS = (THINK_START, THINK_END, SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARG_BEGIN, CALL_END)

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        self.thinking = _thinking(ctx.chat_template_kwargs)
        self.boundary_ids = frozenset()
        section = ctx.tokenizer.token_to_id(SECTION_BEGIN)
        self.reasoning_end_ids = frozenset(i for i in (self.end_id, section) if i is not None)

    def tables(self) -> dict[str, dict[str, Action]]:
        return {"R": {THINK_START: (None, False), THINK_END: ("C", False), SECTION_BEGIN: ("C", True)},
                "C": {THINK_END: (None, False)}, "P": {}}


def parse_header(header: str) -> tuple[str, str] | None:
    """(id, name) from a call header, or None when it has no `:N`."""
    match = _HEADER.match(header.strip())
    if match is None:
        return None
    call_id = match.group().strip()
    return call_id, call_id.split(":")[0].removeprefix("functions.")


class KimiTagModel(TagModel):
    """xgrammar's Kimi tag: `functions.NAME:` + digits + argument marker + JSON, inside the section."""

    def tags(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        tags = []
        for function in tools:
            strict = function.get("strict") is True
            schema = (function.get("parameters") if function.get("parameters") is not None
                      else {"type": "object"}) if strict else True
            tags.append({"type": "tag", "begin": f"{CALL_BEGIN}functions.{function.get('name', '')}:",
                         "content": {"type": "sequence", "elements": [
                             {"type": "regex", "pattern": "\\d+"}, {"type": "const_string", "value": ARG_BEGIN},
                             _json_content(schema)]},
                         "end": CALL_END})
        return tags

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        tags = self.tags(tools)
        listed = {"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True,
                  "stop_after_first": False}
        if named:
            body = tags[0] if len(tags) == 1 else dict(listed, stop_after_first=True)
            return {"type": "sequence", "elements": [{"type": "const_string", "value": SECTION_BEGIN}, body,
                                                     {"type": "const_string", "value": SECTION_END}]}
        if required:
            return {"type": "sequence", "elements": [{"type": "const_string", "value": SECTION_BEGIN}, listed,
                                                     {"type": "const_string", "value": SECTION_END}]}
        block = {"type": "tag", "begin": SECTION_BEGIN, "content": listed, "end": SECTION_END}
        return {"type": "triggered_tags", "triggers": [SECTION_BEGIN], "tags": [block], "at_least_one": False,
                "stop_after_first": False, "excludes": [THINK_START, THINK_END, CALL_BEGIN]}


@register_tool("kimi_k2")
class KimiK2ToolParser(ToolParser):
    name = "kimi_k2"
    supports_required_and_named = False
    engine_based = True
    drops_special_tokens = True
    MARKERS = KimiK2ReasoningParser.MARKERS

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        if tok.token_to_id(SECTION_BEGIN) is None or tok.token_to_id(CALL_BEGIN) is None:
            raise ValueError("kimi_k2 tool parser could not locate the tool call tokens in the tokenizer!")
        self.drops = (THINK_END,) if ctx.reasoning_parser and _thinking(ctx.chat_template_kwargs) else ()

    TAG_MODEL = KimiTagModel([], [SECTION_BEGIN])

    def adjust_request(self, request: Any) -> Any:
        request = apply_structural_tag(request, self.TAG_MODEL)
        request.skip_special_tokens = False
        return request

    # ph: C content, P section (between calls; also after the section: dropped), N header, A arguments
    # hd: header text; aw: held whitespace inside the arguments; as: arguments started
    def start(self) -> State:
        return {"ph": "C", "h": "", "n": 0, "hd": "", "aw": "", "as": False, "ok": False}

    _TAGS = {"C": (SECTION_BEGIN,), "P": (CALL_BEGIN,), "N": (ARG_BEGIN,), "A": (CALL_END, SECTION_END)}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        content: list[str] = []
        out: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            tags = self._TAGS[ph] + (self.drops if ph == "C" else ())
            at, tag = find_first(buf, tags, pos)
            end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], tags)
            piece = buf[pos:end]
            if ph == "C":
                content.append(piece)
            elif ph == "N":
                state["hd"] += piece
            elif ph == "A":
                self._args(state, piece, out)
            if tag is None:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            if tag in self.drops:
                continue
            if ph == "C":
                state["ph"] = "P"
            elif ph == "P":
                state["ph"] = "N"
                state["hd"] = ""
            elif ph == "N":
                self._header(state, out)
            else:
                self._end_call(state, out)
                state["ph"] = "P"
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        out: list[ToolCallDelta] = []
        content = ""
        if state["ph"] == "C":
            content = held
        elif state["ph"] == "N":
            state["hd"] += held
            self._header(state, out)
            self._end_call(state, out)
        elif state["ph"] == "A":
            self._args(state, held, out)
            self._end_call(state, out)
        return content, merge_tool_deltas(out)

    def _header(self, state: State, out: list[ToolCallDelta]) -> None:
        parsed = parse_header(state["hd"])
        state["ok"] = parsed is not None
        state["ph"] = "A"
        state["aw"] = ""
        state["as"] = False
        if parsed is not None:
            call_id, name = parsed
            out.append({"index": state["n"], "id": call_id, "type": "function",
                        "function": {"name": name, "arguments": ""}})

    def _args(self, state: State, text: str, out: list[ToolCallDelta]) -> None:
        if not text or not state["ok"]:
            return
        if not state["as"]:
            text = text.lstrip()
            if not text:
                return
            state["as"] = True
        text = state["aw"] + text
        body = text.rstrip()
        state["aw"] = text[len(body):]
        if body:
            out.append({"index": state["n"], "function": {"arguments": body}})

    def _end_call(self, state: State, out: list[ToolCallDelta]) -> None:
        if state["ok"]:
            if not state["as"]:
                out.append({"index": state["n"], "function": {"arguments": "{}"}})
            state["n"] += 1
        state["ok"] = False
        state["aw"] = ""

