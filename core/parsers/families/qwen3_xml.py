"""qwen3_xml / qwen3_coder: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>`.

Rules of vLLM 0.33's Qwen3 parser engine, as observed on its non-streaming answers (spec 6.3):
* a call starts at `<tool_call>` (then `<function=`) or at a bare `<function=`; the name is the
  text up to `>` (stripped); it ends at `</function>`, at the next `<function=`/`<tool_call>`
  (from its name), or at the end of the output (a cut-off call is still a call, with the
  parameters completed so far);
* a parameter is `<parameter=KEY>VALUE</parameter>`, or its value runs to the next
  `<parameter=`; one leading and one trailing newline are trimmed; a value never closed is
  dropped; the key is the text after `=` without its leading blanks;
* values are coerced to the tool schema's type (null > integer > number > boolean > object >
  array > string, vLLM's `coerce_to_schema_type`), else kept as strings; the arguments are
  `json.dumps` of the parameters in order;
* content is the text before the first call (stripped when there are calls); text after the
  first call is dropped; a `<tool_call>...</tool_call>` without `<function=` before any call is
  dropped and the content goes on after it (all but the text before the first markup when a
  call follows; whitespace-only content around such markup is None); the text of special tokens that are not markers (`<|im_end|>`,
  `<|endoftext|>`, ...) is dropped everywhere (core/parsers/special.py), and so is `</think>`
  when a reasoning parser is configured.

Streaming: the arguments are built as JSON while the parameters arrive: string-typed values
stream character by character (trimming newlines by holding one back), other types are sent
once the value is complete and coerced. Deviations (no stream can do better): content that
starts with whitespace keeps it when a call follows, a call cut off inside a value keeps
the partial value, and content already sent after a function-less `<tool_call>` block stays
sent when a real call follows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolCallDelta, ToolParser, aggregate_tool_deltas
from core.parsers.jsonstream import dumps_str_body
from core.parsers.registry import register_tool
from core.parsers.structural_tag import THINK_EXCLUDES, TagModel, apply_structural_tag
from core.parsers.text import find_first, hold_trailing_space, merge_tool_deltas, partial_suffix

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"
THINK_END = "</think>"

_TYPE_ALIASES = {"str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
                 "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer",
                 "uint64": "integer", "long": "integer", "short": "integer", "unsigned": "integer",
                 "float": "number", "float32": "number", "float64": "number", "double": "number",
                 "bool": "boolean", "dict": "object", "arr": "array", "list": "array", "sequence": "array"}
_ENUM_TYPES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))


def param_types(ctx: ParserContext, function: str, key: str) -> set[str] | None:
    """Schema types of a tool parameter, or None when the value stays a plain string."""
    schema = ctx.tool_schema(function)
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not isinstance(props.get(key), dict):
        return None
    return schema_types(props[key])


def dict_arguments(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Arguments as vLLM's engine parsers return them: built as a dict, so a repeated key keeps
    its last value (json.loads does the same); text that is not JSON stays as it is."""
    for call in calls:
        try:
            call["arguments"] = json.dumps(json.loads(call["arguments"]), ensure_ascii=False)
        except ValueError:
            pass
    return calls


def schema_types(schema: Any) -> set[str]:
    """The JSON-schema types a property allows (type, enum values, anyOf/oneOf/allOf); default string."""
    if not isinstance(schema, dict):
        return {"string"}
    types: set[str] = set()
    kind = schema.get("type")
    if isinstance(kind, str):
        types.add(kind)
    elif isinstance(kind, list):
        types.update(t for t in kind if isinstance(t, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        for value in enum:
            for py, name in _ENUM_TYPES:
                if isinstance(value, py):
                    types.add(name)
                    break
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for choice in schema[key]:
                types |= schema_types(choice)
    return types or {"string"}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def coerce(value: str, types: set[str]) -> Any:
    """A raw parameter string as the schema's type, in vLLM's priority order."""
    wanted = {_TYPE_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    if "null" in wanted and value.lower() == "null":
        return None
    if "integer" in wanted:
        try:
            return int(value)
        except (ValueError, TypeError):
            pass
    if "number" in wanted:
        try:
            return int(value)
        except (ValueError, TypeError):
            try:
                number = float(value)
            except (ValueError, TypeError):
                number = None
            if number is not None and math.isfinite(number):
                return number if number != int(number) else int(number)
    if "boolean" in wanted:
        lowered = value.lower().strip()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
    for kind in ("object", "array"):
        if kind in wanted:
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if _finite(parsed):
                return parsed
    if "string" in wanted:
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if _finite(parsed) else value


def _trim(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


@register_tool("qwen3_xml", "qwen3_coder")
class Qwen3XmlToolParser(ToolParser):
    name = "qwen3_xml"
    supports_required_and_named = False
    engine_based = True
    drops_special_tokens = True
    MARKERS = ("<think>", THINK_END, TOOL_START, TOOL_END, FUNC, FUNC_END, PARAM, PARAM_END, ">")
    TAG_MODEL = TagModel([("<tool_call>\n<function={name}>\n", "\n</function>\n</tool_call>")],
                         ["<tool_call>\n<function="], style="qwen_xml", excludes=THINK_EXCLUDES,
                         required_triggered=True)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # special tokens (`<|im_end|>`...) are dropped before this parser (drops_special_tokens)
        self.drops = (THINK_END,) if ctx.reasoning_parser else ()
        self.content_tags = (TOOL_START, FUNC) + self.drops

    def adjust_request(self, request: Any) -> Any:
        request = apply_structural_tag(request, self.TAG_MODEL)
        request.skip_special_tokens = False  # the engine parser keeps markers
        return request

    # -- the machine (shared by streaming and non-streaming) ------------------------------

    def start(self) -> State:
        # ph: C content, P preamble, N name, A args, K param key, V param value, B between, D done-content
        # cw: held trailing whitespace of content; nm: name so far; pk: key; pv: held value text;
        # pa: whether any param was emitted; ps: value streams as string; pf: first char of value seen
        return {"ph": "C", "h": "", "n": 0, "cw": "", "called": False, "nm": "", "hdr": False,
                "pk": "", "pv": "", "pa": False, "ps": False, "pf": False}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        content: list[str] = []
        out: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            tags = self._tags(ph)
            at, tag = find_first(buf, tags, pos)
            end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], tags)
            self._text(state, buf[pos:end], content, out)
            if tag is None:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            self._tag(state, tag, content, out)
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        held, state["h"] = state["h"], ""
        self._text(state, held, content, out)
        ph = state["ph"]
        if ph in ("N", "A", "K", "V"):
            self._end_call(state, out, finished=True)
        if not state["called"] and state["cw"]:
            # whitespace-only content around tool markup that held no call: vLLM's content is None
            if state.get("nw") or not state.get("mk"):
                content.append(state["cw"])
            state["cw"] = ""
        return "".join(content), merge_tool_deltas(out)

    def _tags(self, ph: str) -> tuple[str, ...]:
        if ph in ("C", "D"):
            return self.content_tags
        if ph == "P":
            return (FUNC, TOOL_END)
        if ph == "N":
            return (">", FUNC_END, TOOL_END, TOOL_START, FUNC)
        if ph == "A":
            return (PARAM, FUNC_END, FUNC)
        if ph == "K":
            return (">", FUNC_END, FUNC)
        if ph == "V":
            return (PARAM_END, PARAM, FUNC_END, FUNC)
        return (TOOL_END, TOOL_START, FUNC)  # between calls

    def _text(self, state: State, text: str, content: list[str], out: list[ToolCallDelta]) -> None:
        if not text:
            return
        ph = state["ph"]
        if ph == "C":
            if hold_trailing_space(state, text, content):
                state["nw"] = True
        elif ph == "N":
            state["nm"] += text
        elif ph == "K":
            state["pk"] += text
        elif ph == "V":
            self._value_text(state, text, out)
        # preamble, args outside parameters, between calls, after the first call: dropped

    def _tag(self, state: State, tag: str, content: list[str], out: list[ToolCallDelta]) -> None:
        ph = state["ph"]
        if tag in self.drops and ph in ("C", "D"):
            return
        if ph in ("C", "D", "B"):
            if tag == TOOL_START:
                state["ph"] = "P"
                state["mk"] = True
                self._leave_content(state)
            elif tag == FUNC:
                self._leave_content(state)
                self._start_call(state)
            elif tag == TOOL_END:
                state["ph"] = "D"
        elif ph == "P":
            if tag == FUNC:
                self._start_call(state)
            elif state["called"]:
                state["ph"] = "D"
            else:  # `<tool_call>...</tool_call>` without a function, before any call: content goes on
                state["ph"] = "C"
                state["rc"] = True
        elif ph == "N":
            if tag == ">":
                self._send_header(state, out)
                state["ph"] = "A"
            else:
                self._end_call(state, out)
                self._after_call_tag(state, tag)
        elif ph == "A":
            if tag == PARAM:
                self._start_param(state)
            else:
                self._end_call(state, out)
                self._after_call_tag(state, tag)
        elif ph == "K":
            if tag == ">":
                self._key_done(state, out)
            else:  # a key never closed: not a parameter
                state["pk"] = ""
                self._end_call(state, out)
                self._after_call_tag(state, tag)
        elif ph == "V":
            if tag == PARAM_END:
                self._value_done(state, out)
                state["ph"] = "A"
            elif tag == PARAM:
                self._value_done(state, out)
                self._start_param(state)
            else:  # the call ends inside an unclosed value: vLLM drops that parameter
                self._drop_value(state, out)
                self._end_call(state, out)
                self._after_call_tag(state, tag)

    def _leave_content(self, state: State) -> None:
        """Content is over at the first tool markup (later text is dropped)."""

    def _after_call_tag(self, state: State, tag: str) -> None:
        if tag == FUNC:
            self._start_call(state)
        elif tag == TOOL_START:
            state["ph"] = "P"
        elif tag == FUNC_END:
            state["ph"] = "B"
        else:
            state["ph"] = "D"

    def _start_call(self, state: State) -> None:
        state.update(ph="N", nm="", hdr=False, pa=False, pk="", pv="", ps=False, pf=False)

    def _send_header(self, state: State, out: list[ToolCallDelta]) -> None:
        if state["hdr"]:
            return
        state["hdr"] = True
        state["called"] = True
        state["cw"] = ""
        state["name"] = state["nm"].strip()
        out.append({"index": state["n"], "id": None, "type": "function",
                    "function": {"name": state["name"], "arguments": ""}})

    def _start_param(self, state: State) -> None:
        state.update(ph="K", pk="", pv="", pf=False)

    def _key_done(self, state: State, out: list[ToolCallDelta]) -> None:
        key = state["pk"].lstrip()
        state["pk"] = key
        types = param_types(self.ctx, state["name"], key)
        # non-streaming ("ns") buffers every value: an unclosed one must leave no trace
        state["ps"] = (types is None or types == {"string"}) and not state.get("ns")
        state["ph"] = "V"
        state["pv"] = ""
        state["pf"] = False
        if state["ps"]:
            self._args(state, out, self._key_prefix(state, key) + '"')

    def _key_prefix(self, state: State, key: str) -> str:
        prefix = ", " if state["pa"] else "{"
        state["pa"] = True
        return prefix + json.dumps(key, ensure_ascii=False) + ": "

    def _value_text(self, state: State, text: str, out: list[ToolCallDelta]) -> None:
        if not state["ps"]:
            state["pv"] += text
            return
        # string value: drop one leading newline, hold one trailing newline
        if not state["pf"]:
            state["pf"] = True
            if text.startswith("\n"):
                text = text[1:]
        text = state["pv"] + text
        state["pv"] = "\n" if text.endswith("\n") else ""
        if state["pv"]:
            text = text[:-1]
        if text:
            self._args(state, out, dumps_str_body(text))

    def _value_done(self, state: State, out: list[ToolCallDelta]) -> None:
        if state["ps"]:
            self._args(state, out, '"')
        else:
            value = coerce(_trim(state["pv"]), param_types(self.ctx, state["name"], state["pk"]) or {"string"})
            self._args(state, out, self._key_prefix(state, state["pk"]) + json.dumps(value, ensure_ascii=False))
        state["pv"] = ""

    def _drop_value(self, state: State, out: list[ToolCallDelta]) -> None:
        """An unclosed value at the end of a call: not a parameter (already-sent text stays)."""
        if state["ps"]:
            self._args(state, out, '"')  # keep the streamed JSON well-formed
        state["pv"] = ""

    def _args(self, state: State, out: list[ToolCallDelta], text: str) -> None:
        out.append({"index": state["n"], "function": {"arguments": text}})

    def _end_call(self, state: State, out: list[ToolCallDelta], finished: bool = False) -> None:
        if finished and state["ph"] == "V":
            self._drop_value(state, out)
        self._send_header(state, out)
        self._args(state, out, "}" if state["pa"] else "{}")
        state["n"] += 1
        state["ph"] = "B"

    # -- non-streaming ---------------------------------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        state = self.start()
        state["ns"] = True
        content, deltas = self.feed(state, text, token_ids)
        tail, more = self.finish(state)
        calls = aggregate_tool_deltas(deltas + more)
        content = content + tail
        if not calls:
            return None, content or None
        if state.get("rc"):  # with calls, the content is only the text before the first markup
            first = min((i for i in (text.find(TOOL_START), text.find(FUNC)) if i != -1), default=len(text))
            head = self.start()
            content, _ = self.feed(head, text[:first], token_ids)
            content += self.finish(head)[0]
        return dict_arguments(calls), content.strip() or None

