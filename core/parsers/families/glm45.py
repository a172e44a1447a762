"""glm45 / glm47 (GLM-4.5/4.6/4.7): vLLM 0.33's GLM-4.7 parser engine.

    <think>...</think>
    <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>

The grammar is vLLM's `glm47_moe_config` (vllm/parser/glm47_moe.py); the rest follows from the
engine (core/parsers/engine.py, engine_parsers.py): `<tool_call>` ends reasoning implicitly, in
content a repeated `</think>` is dropped and `<think>` reopens reasoning, the reasoning is
right-stripped, a call whose name (stripped) is not one of the request's tools is dropped, the
text of other special tokens is dropped. The arguments are vLLM's `_glm47_arg_converter`: every
`<arg_key>K</arg_key>` + `<arg_value>V</arg_value>` pair (key stripped, value as written), a
value never closed dropped; then the tool schema's types. `thinking` / `enable_thinking` false
(both default on) means no reasoning grammar at all.
"""

from __future__ import annotations

import json
import re
from typing import Any

import regex

from core.parsers.base import ParserContext
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import CallState, EngineReasoningParser, EngineToolParser, EngineToolState
from core.parsers.families.qwen3 import XmlArgStreamer
from core.parsers.jsonstream import dumps
from core.parsers.structural_tag import TagModel, _json_content, apply_tag_keeping_markers

THINK_START, THINK_END = "<think>", "</think>"
TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
KEY, KEY_END, VALUE, VALUE_END = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
TURN_BOUNDARIES = ("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>")

C, R, N, A = Phase.CONTENT, Phase.REASONING, Phase.NAME, Phase.ARGS


def thinking_on(kwargs: dict[str, Any]) -> bool:
    """`thinking` / `enable_thinking`: on unless one of them says otherwise."""
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    return True if thinking is None and enable is None else bool(thinking) or bool(enable)


def glm_grammar(thinking: bool) -> Grammar:
    think = {"THINK_START": THINK_START, "THINK_END": THINK_END} if thinking else {}
    think_transitions = {(C, "THINK_START"): (R, (Ev.REASONING_START,)),
                         (R, "THINK_END"): (C, (Ev.REASONING_END,)),
                         (C, "THINK_END"): (C, ())} if thinking else {}
    arg_tags = {(A, t): (A, (Ev.ARGS,)) for t in ("ARG_KEY_START", "ARG_KEY_END", "ARG_VALUE_START", "ARG_VALUE_END")}
    return Grammar(
        name="glm47_moe", initial=R if thinking else C,
        terminals={**think, "TOOL_START": TOOL_START, "TOOL_END": TOOL_END, "ARG_KEY_START": KEY,
                   "ARG_KEY_END": KEY_END, "ARG_VALUE_START": VALUE, "ARG_VALUE_END": VALUE_END},
        id_terminals=frozenset(think.values()) | {TOOL_START, TOOL_END},
        transitions={**think_transitions,
                     (R, "THINK_START"): (R, ()),
                     (R, "TOOL_START"): (N, (Ev.REASONING_END, Ev.CALL_START)),
                     (C, "TOOL_START"): (N, (Ev.CALL_START,)),
                     (N, "ARG_KEY_START"): (A, (Ev.ARGS,)),
                     (N, "TOOL_END"): (C, (Ev.CALL_END,)),
                     (A, "TOOL_END"): (C, (Ev.CALL_END,)),
                     **arg_tags},
        validate_tool_names=True)


GLM = glm_grammar(True)
GLM_NO_THINKING = glm_grammar(False)


class Glm45ReasoningParser(EngineReasoningParser):
    name = "glm45"
    GRAMMAR = GLM
    GRAMMAR_NO_THINKING = GLM_NO_THINKING
    BOUNDARIES = TURN_BOUNDARIES

    def thinking_enabled(self, ctx: ParserContext) -> bool:
        return thinking_on(ctx.chat_template_kwargs)


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


_ARG_RE = re.compile(r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL)
_ARG_HEAD = regex.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>", regex.DOTALL)


def glm_arguments(raw: str) -> str:
    """vLLM's `_glm47_arg_converter` on a complete call."""
    return dumps({m.group("key").strip(): m.group("value") for m in _ARG_RE.finditer(raw)})


class GlmArgStreamer(XmlArgStreamer):
    HEAD = _ARG_HEAD

    def key_of(self, match: regex.Match) -> str:
        return match.group(1).strip()

    def value_end(self, raw: str, start: int) -> tuple[int, int, bool]:
        at = raw.find(VALUE_END, start)
        if at != -1:
            return at, at + len(VALUE_END), True
        for k in range(min(len(VALUE_END) - 1, len(raw) - start), 0, -1):  # a partial end is held
            if raw.endswith(VALUE_END[:k]):
                return len(raw) - k, len(raw) - k, False
        return len(raw), len(raw), False


class Glm45ToolParser(EngineToolParser):
    name = "glm45"
    STREAMER = GlmArgStreamer()
    TAG_MODEL = GlmTagModel([], [TOOL_START], excludes=[THINK_START, THINK_END, TOOL_END, KEY, KEY_END, VALUE, VALUE_END],
                            named_single_tag=False, function_level=True)

    def grammar_for(self, ctx: ParserContext) -> Grammar:
        return GLM if thinking_on(ctx.chat_template_kwargs) else GLM_NO_THINKING

    def adjust_request(self, request: Any) -> Any:
        return apply_tag_keeping_markers(request, self.TAG_MODEL)

    def emit_name(self, state: EngineToolState, call: CallState, name: str | None) -> None:
        super().emit_name(state, call, name.strip() if name is not None else None)

    def on_call_end(self, call: CallState) -> None:
        call["nm"] = call["nm"].strip()

    def convert_args(self, raw: str, name: str) -> str:
        return glm_arguments(raw)
