"""DeepSeek V3.2 / V4 / V4.1 tool calls (DSML) and V4 / V4.1 reasoning, as vLLM 0.33's parser engines.

    <｜DSML｜tool_calls>                      (V3.2: function_calls; V4.1: "<｜DSML｜ calls>")
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">杭州</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

Rules of vLLM's DeepSeek parser engines, as observed on their non-streaming answers
(tests/core/parsers/golden_frontier/dsml.json):
* content is the text before the block, kept as is (whitespace-only content before a call is
  dropped); the block may also start with a bare invoke; text after the block is dropped, but a
  second block is parsed too;
* a call is its invoke's name and the JSON object of its parameters (`json.dumps`, non-ASCII
  kept): `string="true"` values are the raw text, others `json.loads`-ed when they parse (the
  text otherwise); a parameter ends at its closing tag or where the next one starts; an unclosed
  last parameter is dropped; a wrapper `{"arguments"|"input": {...}}` around a tool's own
  properties is unwrapped; names are not checked against the tools;
* an invoke cut off by the end of output still counts (its name so far, its complete parameters);
* V4 / V4.1 reasoning: `<think>...</think>`, thinking unless `thinking`/`enable_thinking` say
  otherwise or `reasoning_effort` is "none"; the block start ends reasoning; in content a
  `<think>` opens reasoning again and a stray `</think>` is dropped; the reasoning is right-stripped;
  once a block started, think tags are plain text. V3.2 reasons with `deepseek_v3` (think.py).

Streaming: the name goes out when `">` ends it, each parameter once it is complete (the
arguments' JSON grows parameter by parameter), `}` with the invoke's end; the state holds the
current parameter's raw text at most. A call whose first parameter may be an unwrappable wrapper
is held until its invoke ends. Known stream differences: duplicate parameter names (the
non-streaming JSON keeps the last value), handled in `STREAM_CANNOT_MATCH` of the tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from core.parsers.base import (ParserContext, ReasoningParser, State, ToolCallDelta, ToolParser,
                               aggregate_tool_deltas)
from core.parsers.families.glm45 import Glm45ReasoningParser
from core.parsers.families.think import THINK_END, THINK_START, Action
from core.parsers.structural_tag import TagModel, _json_content, apply_structural_tag
from core.parsers.text import find_first, merge_tool_deltas, partial_suffix

_D = "｜DSML｜"
MAX_UNANSWERED_BLOCK = 4096


class Spelling:
    """One dialect's terminals."""

    def __init__(self, block: str, starts: tuple[str, ...], sp: str, tag_model: str,
                 style: str = "deepseek_xml") -> None:
        self.starts = starts  # block openers (the first is the canonical one)
        self.end = f"</{_D}{block}>"
        self.invoke = f'<{_D}{sp}invoke name="'
        self.name_end = '">'
        self.invoke_end = f"</{_D}{sp}invoke>"
        self.param_start = f"<{_D}{sp}parameter"
        self.param_close = f"</{_D}{sp}parameter>"
        start, close = re.escape(self.param_start), re.escape(self.param_close)
        self.head = re.compile(rf'{start}\s+name="([^"]+)"(?:\s+string="([^"]*)")?\s*>')
        self.next_param = re.compile(rf"{start}\s+name=")
        self.tag_model = tag_model
        self.style = style  # xgrammar's JSON style for the arguments in the structural tag
        self.markers = (*starts, self.end, self.invoke, self.name_end, self.invoke_end, self.param_start,
                        self.param_close)


V32 = Spelling("function_calls", (f"<{_D}function_calls>",), "", "deepseek_v3_2")
V4 = Spelling("tool_calls", (f"<{_D}tool_calls>", f"<{_D}toolcalls>", f"<{_D}tool>"), "", "deepseek_v4")
V41 = Spelling(" calls", (f"<{_D} calls>",), " ", "deepseek_v4_1", style="deepseek_v4_1_xml")


# -- arguments -----------------------------------------------------------------------------


def param_value(is_str: str | None, raw: str) -> Any:
    if is_str == "true":
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def unwrap(args: dict[str, Any], properties: dict[str, Any] | None) -> dict[str, Any]:
    """A single `arguments`/`input` key wrapping the tool's own properties is unwrapped (vLLM)."""
    if not properties or not isinstance(args, dict):
        return args
    for wrapper in ("arguments", "input"):
        if set(args) != {wrapper} or wrapper in properties:
            continue
        inner = args[wrapper]
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except ValueError:
                return args
        if isinstance(inner, dict) and set(inner).issubset(properties):
            return inner
    return args


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Params:
    """The parameters of one invoke, read from its raw text as it comes (vLLM's regexes).

    State (in the call state): "b" raw text not consumed yet (from a parameter head on), "s" where
    the search for the value's end resumes, "n" parameters emitted, "w" held parameters (the call
    may be a wrapper to unwrap) or None.
    """

    @staticmethod
    def start(hold: bool) -> dict[str, Any]:
        return {"b": "", "s": 0, "n": 0, "w": [] if hold else None}

    @staticmethod
    def feed(sp: Spelling, p: dict[str, Any], text: str, properties: dict[str, Any] | None) -> str:
        p["b"] += text
        out = []
        while True:
            buf = p["b"]
            m = sp.head.search(buf)
            if m is None:
                # keep only what may still become a parameter head
                at = buf.rfind(sp.param_start[0])
                keep = buf[at:] if at != -1 and (sp.param_start.startswith(buf[at:at + len(sp.param_start)])) else ""
                p["b"], p["s"] = keep, 0
                break
            if m.start() > 0:
                p["b"], p["s"] = buf[m.start():], max(0, p["s"] - m.start())
                continue
            value_from = m.end()
            scan = max(value_from, p["s"])
            close = buf.find(sp.param_close, scan)
            nxt = sp.next_param.search(buf, scan)
            ends = [(close, close + len(sp.param_close)) if close != -1 else None,
                    (nxt.start(), nxt.start()) if nxt is not None else None]
            ends = [e for e in ends if e is not None]
            if not ends:
                # the value is not over; both terminals have a single "<", at their start: resume
                # the search at the last one (nothing before it can still become a terminal)
                at = buf.rfind("<", scan)
                p["s"] = at if at != -1 else len(buf)
                break
            value_end, consumed = min(ends)
            name, is_str = m.group(1), m.group(2)
            value = param_value(is_str, buf[value_from:value_end])
            p["b"], p["s"] = buf[consumed:], 0
            out.append(_Params._emit(p, name, value, properties))
        return "".join(out)

    @staticmethod
    def _emit(p: dict[str, Any], name: str, value: Any, properties: dict[str, Any] | None) -> str:
        if p["w"] is not None:
            if p["n"] == 0 and not p["w"] and name in ("arguments", "input") and properties and name not in properties:
                p["w"].append([name, value])
                return ""
            if p["w"]:
                held, p["w"] = p["w"], None
                out = "".join(_Params._emit(p, n, v, properties) for n, v in held)
                return out + _Params._emit(p, name, value, properties)
            p["w"] = None
        piece = ("{" if p["n"] == 0 else ", ") + _dumps(name) + ": " + _dumps(value)
        p["n"] += 1
        return piece

    @staticmethod
    def finish(p: dict[str, Any], properties: dict[str, Any] | None) -> str:
        if p["w"]:
            (name, value), = p["w"]
            p["w"] = None
            inner = unwrap({name: value}, properties)
            if inner is not None and inner != {name: value}:
                return _dumps(inner)
            return _Params._emit(p, name, value, properties) + "}"
        return "}" if p["n"] else "{}"


def convert_arguments(sp: Spelling, raw: str, properties: dict[str, Any] | None) -> str:
    """vLLM's non-streaming arguments: complete parameters only, then the wrapper rule."""
    params: dict[str, Any] = {}
    pattern = re.compile(sp.head.pattern + rf"(.*?)(?:{re.escape(sp.param_close)}|(?={sp.next_param.pattern}))",
                         re.DOTALL)
    for m in pattern.finditer(raw):
        params[m.group(1)] = param_value(m.group(2), m.group(3))
    return _dumps(unwrap(params, properties))


# -- the tool parser -----------------------------------------------------------------------


class _DsmlToolParser(ToolParser):
    """Phases: C content, P block preamble, N invoke name, A arguments, B between invokes."""

    SPELLING: Spelling
    # V3.2 (classic composition): without any call, vLLM returns the content whole, markup included,
    # so the text after a block opener is held until an invoke comes (at most this many characters)
    keeps_unanswered_block = False
    supports_required_and_named = False  # forced calls come in DSML too (the structural tag)
    drops_special_tokens = True

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        sp = self.SPELLING
        self.MARKERS = sp.markers
        self._tags = {
            "C": (*sp.starts, sp.invoke), "P": (sp.invoke,), "N": (sp.name_end,), "A": (sp.invoke_end, sp.end),
            "B": (sp.invoke, sp.end, *sp.starts)}

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False
        return apply_structural_tag(request, DsmlTagModel(self.SPELLING))

    def _properties(self, name: str) -> dict[str, Any] | None:
        schema = self.ctx.tool_schema(name)
        props = schema.get("properties") if schema else None
        return props if isinstance(props, dict) and props else None

    def start(self) -> State:
        # x: exact (non-streaming) mode: a call's raw arguments are kept and converted at its end;
        # hx: (V3.2) the text since a block opened, while no invoke has come yet
        return {"ph": "C", "h": "", "nm": "", "n": 0, "p": None, "x": False, "hx": None}

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        state = self.start()
        state["x"] = True
        content, deltas = self.feed(state, text, token_ids)
        tail, more = self.finish(state)
        calls = aggregate_tool_deltas(deltas + more)
        return (calls or None), (content + tail) or None

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        sp = self.SPELLING
        buf = state["h"] + text
        content: list[str] = []
        calls: list[ToolCallDelta] = []
        pos = 0
        while pos <= len(buf):
            phase = state["ph"]
            tags = self._tags[phase]
            at, tag = find_first(buf, tags, pos)
            if tag is None:
                end = len(buf) - partial_suffix(buf[pos:], tags)
                self._text(state, buf[pos:end], content, calls)
                pos = end
                break
            self._text(state, buf[pos:at], content, calls)
            pos = at + len(tag)
            if tag == sp.invoke:
                state["ph"], state["nm"], state["hx"] = "N", "", None
            elif tag == sp.name_end:
                self._open_call(state, calls)
            elif tag in (sp.invoke_end, sp.end) and phase == "A":
                self._close_call(state, calls)
                state["ph"] = "B"
            elif tag in sp.starts:
                if phase == "C" and self.keeps_unanswered_block and state["n"] == 0:
                    state["hx"] = tag
                state["ph"] = "P"
            # B + end: stays B
        state["h"] = buf[pos:]
        return "".join(content), merge_tool_deltas(calls)

    def _text(self, state: State, text: str, content: list[str], calls: list[ToolCallDelta]) -> None:
        if not text:
            return
        phase = state["ph"]
        if phase == "C":
            content.append(text)
        elif phase == "N":
            state["nm"] += text
        elif phase == "P" and state["hx"] is not None:
            held = state["hx"] + text
            state["hx"] = held if len(held) <= MAX_UNANSWERED_BLOCK else None
        elif phase == "A":
            if state["x"]:
                state["p"]["raw"] += text
                return
            piece = _Params.feed(self.SPELLING, state["p"], text, self._properties(state["cn"]))
            if piece:
                calls.append({"index": state["n"] - 1, "function": {"arguments": piece}})
        # P and B: the engine has no content there, the text is dropped

    def _open_call(self, state: State, calls: list[ToolCallDelta]) -> None:
        name, state["nm"] = state["nm"], ""
        calls.append({"index": state["n"], "id": None, "type": "function", "function": {"name": name, "arguments": ""}})
        state["n"] += 1
        state["ph"], state["cn"] = "A", name
        state["p"] = {"raw": ""} if state["x"] else _Params.start(hold=self._properties(name) is not None)

    def _close_call(self, state: State, calls: list[ToolCallDelta]) -> None:
        properties = self._properties(state["cn"])
        if state["x"]:
            piece = convert_arguments(self.SPELLING, state["p"]["raw"], properties)
        else:
            piece = _Params.finish(state["p"], properties)
        calls.append({"index": state["n"] - 1, "function": {"arguments": piece}})
        state["p"] = None

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        held, state["h"] = state["h"], ""
        content: list[str] = []
        calls: list[ToolCallDelta] = []
        self._text(state, held, content, calls)
        if state["ph"] == "N":  # cut inside the name: the call still counts, without arguments
            name = state["nm"]
            self._open_call(state, calls)
            calls[-1]["function"]["name"] = name
        if state["ph"] == "A":
            self._close_call(state, calls)
            state["ph"] = "B"
        if state["hx"] is not None and state["n"] == 0:  # a block without any invoke stays content
            content.append(state["hx"])
        state["hx"] = None
        return "".join(content), merge_tool_deltas(calls)


class DsmlTagModel(TagModel):
    """xgrammar's deepseek_v3_2 / deepseek_v4 / deepseek_v4_1 builtin tags."""

    def __init__(self, sp: Spelling) -> None:
        begin = sp.starts[0]
        super().__init__([(sp.invoke + "{name}" + '">\n', sp.invoke_end + "\n")], [begin], style=sp.style,
                         excludes=[THINK_START, THINK_END])
        self.begin, self.end = begin, sp.end

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        tags = self.tags(tools)
        open_block = {"type": "const_string", "value": "\n\n" + self.begin + "\n"}
        close_block = {"type": "const_string", "value": self.end}
        if named:
            return {"type": "sequence", "elements": [open_block, tags[0], close_block]}
        calls = {"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True,
                 "stop_after_first": False}
        if required:
            return {"type": "sequence", "elements": [open_block, calls, close_block]}
        return {"type": "triggered_tags", "triggers": [self.begin],
                "tags": [{"type": "tag", "begin": self.begin + "\n", "content": calls, "end": self.end}],
                "at_least_one": False, "stop_after_first": False, "excludes": list(self.excludes)}


class DeepSeekV32ToolParser(_DsmlToolParser):
    name = "deepseek_v32"
    SPELLING = V32
    # with V3.2's deepseek_v3 reasoning parser vLLM composes the classic way: tool_choice "none"
    # (or no tools) leaves the DSML markup in the content, and so does an output without a call
    engine_based = False
    keeps_unanswered_block = True


class DeepSeekV4ToolParser(_DsmlToolParser):
    name = "deepseek_v4"
    SPELLING = V4
    engine_based = True  # one grammar with the reasoning: the markup never reaches the content


class DeepSeekV41ToolParser(DeepSeekV4ToolParser):
    name = "deepseek_v41"
    SPELLING = V41


# -- reasoning (V4, V4.1) -------------------------------------------------------------------


def thinking_enabled(kwargs: dict[str, Any]) -> bool:
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    return thinking and kwargs.get("reasoning_effort") != "none"


class DeepSeekV4ReasoningParser(Glm45ReasoningParser):
    name = "deepseek_v4"
    SPELLING = V4

    def __init__(self, ctx: ParserContext) -> None:
        self.MARKERS = (THINK_START, THINK_END, *self.SPELLING.markers)
        super().__init__(ctx)
        self.thinking = thinking_enabled(ctx.chat_template_kwargs)
        self.boundary_ids = frozenset()  # no turn boundaries: the prompt is not consulted
        self.reasoning_end_ids = frozenset(i for i in (self.end_id,) if i is not None)

    def tables(self) -> dict[str, dict[str, Action]]:
        sp = self.SPELLING
        into_tools = {tag: ("T", True) for tag in sp.starts}
        return {"R": {THINK_START: (None, False), THINK_END: ("C", False), **into_tools},
                "C": {THINK_END: (None, False), THINK_START: ("R", False), **into_tools, sp.invoke: ("T", True)},
                "T": {}}

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        return "R" if self.thinking else "C"

    # unlike glm45, thinking off still reads think tags in the content: the plain feed and finish
    parse_complete = ReasoningParser.parse_complete

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        for tid in reversed(token_ids):
            if tid in self.reasoning_end_ids:
                return True
            if tid == self.start_id:
                return False
        return not self.thinking


class DeepSeekV41ReasoningParser(DeepSeekV4ReasoningParser):
    name = "deepseek_v41"
    SPELLING = V41

