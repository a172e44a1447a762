"""glm45 (GLM-4.5/4.6/4.7): `<think>` reasoning and `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.

Rules of vLLM 0.33's GLM-4.7 parser engine (the `glm45` names map to it), as observed on its
non-streaming answers:
* reasoning: `<think>` is dropped, `</think>` ends reasoning, `<tool_call>` ends it implicitly;
  in content a repeated `</think>` is dropped and `<think>` reopens reasoning; the reasoning is
  right-stripped; `enable_thinking`/`thinking` false means plain content;
* tool calls: the name (stripped) runs to the first `<arg_key>` or `</tool_call>`; a name that
  is not one of the request's tools drops the whole call; each `<arg_key>K</arg_key>` +
  `<arg_value>V</arg_value>` pair is a parameter (key stripped, value raw), coerced to the
  schema's type like qwen3_xml; an unclosed value is dropped;
* content: with calls, the text before the first call, stripped; without, all text outside
  the tool markup.

Streaming keeps the same state machine; string-typed values stream as they are generated.
Deviations: leading whitespace of content before a call, and partial values of a call cut off
by the end of output (vLLM's stream sends those too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, State, ToolCallDelta, ToolParser, aggregate_tool_deltas
from core.parsers.families.qwen3_xml import coerce, dict_arguments, param_types
from core.parsers.families.think import THINK_END, THINK_START, Action, ThinkTagReasoningParser
from core.parsers.jsonstream import dumps_str_body
from core.parsers.registry import register_reasoning, register_tool
from core.parsers.structural_tag import TagModel, _json_content, apply_structural_tag
from core.parsers.text import find_first, hold_trailing_space, merge_tool_deltas, partial_suffix

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
KEY, KEY_END, VALUE, VALUE_END = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
TURN_BOUNDARIES = ("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>")


def _thinking(kwargs: dict[str, Any]) -> bool:
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    return True if thinking is None and enable is None else bool(thinking) or bool(enable)


@register_reasoning("glm45", "glm47")
class Glm45ReasoningParser(ThinkTagReasoningParser):
    name = "glm45"
    drops_special_tokens = True  # the engine drops other special tokens, thinking or not
    MARKERS = (THINK_START, THINK_END, TOOL_START, TOOL_END, KEY, KEY_END, VALUE, VALUE_END)

    def __init__(self, ctx: ParserContext) -> None:
        self.thinking = _thinking(ctx.chat_template_kwargs)
        tok = ctx.tokenizer
        self.boundary_ids = frozenset(i for i in (tok.token_to_id(t) for t in TURN_BOUNDARIES) if i is not None)
        super().__init__(ctx)
        tool_id = tok.token_to_id(TOOL_START)
        self.reasoning_end_ids = frozenset(i for i in (self.end_id, tool_id) if i is not None)

    def tables(self) -> dict[str, dict[str, Action]]:
        return {"R": {THINK_START: (None, False), THINK_END: ("C", False), TOOL_START: ("C", True)},
                "C": {THINK_END: (None, False), THINK_START: ("R", False)}, "P": {}}

    def adjust_request(self, request):
        request.skip_special_tokens = False
        return request

    def initial_phase(self, prompt_token_ids: Sequence[int] | None) -> str:
        if not self.thinking:
            return "P"
        if prompt_token_ids and self.boundary_ids and self.is_reasoning_end(prompt_token_ids):
            return "C"
        return "R"

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        if not self.thinking:
            return True  # vLLM: without thinking, `<think>` in the prompt opens nothing
        for tid in reversed(token_ids):
            if tid in self.reasoning_end_ids:
                return True
            if tid == self.start_id:
                return False
            if tid in self.boundary_ids:
                break
        return False

    # the reasoning is right-stripped: hold its trailing whitespace until more reasoning comes
    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        state = super().start(prompt_token_ids)
        state["rw"] = ""
        return state

    def _strip(self, state: State, reasoning: str) -> str:
        if not reasoning:
            return ""
        text = state["rw"] + reasoning
        body = text.rstrip()
        state["rw"] = text[len(body):]
        return body

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        reasoning, content = super().feed(state, text, token_ids)
        return self._strip(state, reasoning), content

    def finish(self, state: State) -> tuple[str, str]:
        reasoning, content = super().finish(state)
        reasoning = self._strip(state, reasoning)
        state["rw"] = ""
        return reasoning, content

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, text
        return super().parse_complete(text, token_ids, prompt_token_ids)


GLM_EXCLUDES = [THINK_START, THINK_END, TOOL_START, TOOL_END, KEY, KEY_END, VALUE, VALUE_END]


def _any_text() -> dict[str, Any]:
    return {"type": "any_text", "excludes": list(GLM_EXCLUDES), "max_tokens": None, "max_chars": None}


def _one_or_or(formats: list[dict[str, Any]]) -> dict[str, Any]:
    return formats[0] if len(formats) == 1 else {"type": "or", "elements": formats}


def _glm_value_format(prop: Any) -> dict[str, Any]:
    """A value's format as vLLM's `_glm_4_7_value_format`: enum constants, free text for strings,
    else the bare JSON type (`{"type": T}`: the rest of the property schema is not used)."""
    prop = prop if isinstance(prop, dict) else {}
    if "enum" in prop:
        values = prop["enum"] if isinstance(prop["enum"], list) else []
        return _one_or_or([{"type": "const_string", "value": v if isinstance(v, str) else json.dumps(v)}
                           for v in values])
    kind = prop.get("type")
    if isinstance(kind, list):
        formats = [_glm_value_format({"type": t}) for t in kind if t != "string"]
        if "string" in kind:
            formats.append(_any_text())
        return _one_or_or(formats)
    if kind in (None, "string"):
        return _any_text()
    return _json_content({"type": kind})


def _glm_plain_properties(params: dict[str, Any]) -> dict[str, Any] | None:
    """`properties` when the schema is a plain object schema (else the arguments are free)."""
    properties = params.get("properties")
    if (not isinstance(properties, dict) or not properties or params.get("additionalProperties") is True
            or any(key in params for key in ("$ref", "allOf", "anyOf", "oneOf", "patternProperties"))):
        return None
    return properties


def _glm_xml_content(schema: Any) -> dict[str, Any]:
    content = _json_content(schema)
    content["style"] = "glm_xml"
    return content


class GlmTagModel(TagModel):
    """vLLM's GLM-4.7 tag (`_glm_4_7_tool_tag`): per non-strict tool with a plain object schema,
    any number of `<arg_key>K</arg_key><arg_value>V</arg_value>` pairs with pinned keys and basic
    value types; other tools (and strict ones) take their arguments as `glm_xml` JSON schema."""

    def tags(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        tags = []
        for function in tools:
            raw = function.get("parameters")
            if function.get("strict") is True:
                content = _glm_xml_content(raw if raw is not None else True)
            else:
                props = _glm_plain_properties(raw if isinstance(raw, dict) else {})
                if props is None:
                    content = _glm_xml_content(True)
                else:
                    pairs = [{"type": "sequence", "elements": [
                        {"type": "const_string", "value": f"{KEY}{key}{KEY_END}{VALUE}"}, _glm_value_format(prop),
                        {"type": "const_string", "value": VALUE_END}]} for key, prop in props.items()]
                    content = {"type": "star", "content": _one_or_or(pairs)}
            tags.append({"type": "tag", "begin": TOOL_START + function.get("name", ""), "content": content,
                         "end": TOOL_END})
        return tags

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        if tools and all(f.get("strict") is True for f in tools):
            # all (callable) tools strict: vLLM hands over to xgrammar's builtin GLM-4.7 tag, where
            # a named tool is one bare tag and "required" stays a triggered list
            tags = self.tags(tools)
            if named and len(tags) == 1:
                return tags[0]
            if required and not named:
                return {"type": "triggered_tags", "triggers": self.triggers, "tags": tags,
                        "at_least_one": True, "stop_after_first": False, "excludes": self.excludes}
        return super().format(tools, required, named)


@register_tool("glm45", "glm47")
class Glm45ToolParser(ToolParser):
    name = "glm45"
    supports_required_and_named = False
    engine_based = True
    drops_special_tokens = True
    MARKERS = Glm45ReasoningParser.MARKERS
    TAG_MODEL = GlmTagModel([], [TOOL_START], excludes=[THINK_START, THINK_END, TOOL_END, KEY, KEY_END, VALUE, VALUE_END],
                            named_single_tag=False, function_level=True)

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        # with reasoning on, the engine's content state drops a repeated </think>
        self.drops = (THINK_END,) if ctx.reasoning_parser and _thinking(ctx.chat_template_kwargs) else ()
        self.names = {(t.get("function") or {}).get("name") for t in (ctx.tools or [])}

    def adjust_request(self, request: Any) -> Any:
        request = apply_structural_tag(request, self.TAG_MODEL)
        request.skip_special_tokens = False
        return request

    # -- the machine ----------------------------------------------------------------------
    # ph: C content, D content after a call (dropped), N name, A between parameters, K key,
    # W waiting for <arg_value>, V value, Z inside a dropped call

    def start(self) -> State:
        return {"ph": "C", "h": "", "n": 0, "cw": "", "called": False, "nm": "", "name": "",
                "pk": "", "pv": "", "pa": False, "ps": False}

    _TAGS = {"C": (TOOL_START,), "D": (TOOL_START,), "N": (KEY, TOOL_END), "A": (KEY, TOOL_END),
             "K": (KEY_END, TOOL_END), "W": (VALUE, KEY, TOOL_END), "V": (VALUE_END, TOOL_END), "Z": (TOOL_END,)}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        buf = state["h"] + text if state["h"] else text
        state["h"] = ""
        content: list[str] = []
        out: list[ToolCallDelta] = []
        pos = 0
        while pos < len(buf):
            ph = state["ph"]
            tags = self._TAGS[ph] + (self.drops if ph in ("C", "D") else ())
            at, tag = find_first(buf, tags, pos)
            end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], tags)
            self._text(state, buf[pos:end], content, out)
            if tag is None:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            self._tag(state, tag, out)
        return "".join(content), merge_tool_deltas(out)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        content: list[str] = []
        out: list[ToolCallDelta] = []
        held, state["h"] = state["h"], ""
        self._text(state, held, content, out)
        if state["ph"] in ("N", "A", "K", "W", "V"):
            self._end_call(state, out)
        if not state["called"] and state["cw"]:
            content.append(state["cw"])
        state["cw"] = ""
        return "".join(content), merge_tool_deltas(out)

    def _text(self, state: State, text: str, content: list[str], out: list[ToolCallDelta]) -> None:
        if not text:
            return
        ph = state["ph"]
        if ph == "C":
            hold_trailing_space(state, text, content)
        elif ph == "N":
            state["nm"] += text
        elif ph == "K":
            state["pk"] += text
        elif ph == "V":
            if state["ps"]:
                self._args(state, out, dumps_str_body(text))
            else:
                state["pv"] += text

    def _tag(self, state: State, tag: str, out: list[ToolCallDelta]) -> None:
        ph = state["ph"]
        if tag in self.drops:
            return
        if ph in ("C", "D"):  # <tool_call>
            state.update(ph="N", nm="", pa=False, pk="", pv="")
        elif ph == "N":
            name = state["nm"].strip()
            if self.names and name not in self.names:
                state["ph"] = "Z" if tag == KEY else self._after(state)
                return
            self._header(state, name, out)
            if tag == KEY:
                state.update(ph="K", pk="")
            else:
                state["ph"] = "A"
                self._end_call(state, out)
        elif ph == "Z":
            state["ph"] = self._after(state)
        elif tag == TOOL_END:
            if ph == "V" and state["ps"]:
                self._args(state, out, '"')  # an unclosed value; keep the streamed JSON well-formed
            self._end_call(state, out)
        elif ph == "A" or (ph == "W" and tag == KEY):
            state.update(ph="K", pk="")
        elif ph == "K":  # </arg_key>
            state["pk"] = state["pk"].strip()
            state["ph"] = "W"
        elif ph == "W":  # <arg_value>
            types = param_types(self.ctx, state["name"], state["pk"])
            state["ps"] = (types is None or types == {"string"}) and not state.get("ns")
            state["pv"] = ""
            state["ph"] = "V"
            if state["ps"]:
                self._args(state, out, self._key_prefix(state) + '"')
        elif ph == "V":  # </arg_value>
            if state["ps"]:
                self._args(state, out, '"')
            else:
                value = coerce(state["pv"], param_types(self.ctx, state["name"], state["pk"]) or {"string"})
                self._args(state, out, self._key_prefix(state) + json.dumps(value, ensure_ascii=False))
            state["ph"] = "A"

    def _after(self, state: State) -> str:
        return "D" if state["called"] else "C"

    def _key_prefix(self, state: State) -> str:
        prefix = ", " if state["pa"] else "{"
        state["pa"] = True
        return prefix + json.dumps(state["pk"], ensure_ascii=False) + ": "

    def _header(self, state: State, name: str, out: list[ToolCallDelta]) -> None:
        state["name"] = name
        state["called"] = True
        state["cw"] = ""
        out.append({"index": state["n"], "id": None, "type": "function", "function": {"name": name, "arguments": ""}})

    def _args(self, state: State, out: list[ToolCallDelta], text: str) -> None:
        out.append({"index": state["n"], "function": {"arguments": text}})

    def _end_call(self, state: State, out: list[ToolCallDelta]) -> None:
        if state["ph"] == "N":  # cut off inside the name
            name = state["nm"].strip()
            if self.names and name not in self.names:
                state["ph"] = self._after(state)
                return
            self._header(state, name, out)
        elif state["ph"] == "V" and state["ps"]:
            self._args(state, out, '"')
        self._args(state, out, "}" if state["pa"] else "{}")
        state["n"] += 1
        state["ph"] = "D"

    # -- non-streaming ---------------------------------------------------------------------

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        state = self.start()
        state["ns"] = True
        content, deltas = self.feed(state, text, token_ids)
        tail, more = self.finish(state)
        content += tail
        calls = aggregate_tool_deltas(deltas + more)
        if not calls:
            return None, content or None
        return dict_arguments(calls), content.strip() or None
