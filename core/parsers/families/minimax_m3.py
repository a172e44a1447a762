"""MiniMax M3 (`MiniMaxAI/Minimax-M3-preview`, the name vLLM 0.33 cites): vLLM 0.33's `minimax_m3`
tool parser engine and its `minimax_m3` reasoning parser.

    <mm:think>reasoning</mm:think>answer
    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="create_order">
    ]<]minimax[>[<user_id>42]<]minimax[>[</user_id>
    ]<]minimax[>[<items>]<]minimax[>[<item>]<]minimax[>[<sku>b1]<]minimax[>[</sku>]<]minimax[>[</item>]<]minimax[>[</items>
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

M2's shape (core/parsers/families/minimax.py: the invoke prefixes and name ends) with the
`]<]minimax[>[` namespace in front of every tag, a block required around the invokes, text after
the block dropped and no name check (vLLM's `minimax_m3_config`). Arguments are vLLM's
`_minimax_m3_arg_converter`: the invoke body's elements `]<]minimax[>[<KEY>...]<]minimax[>[</KEY>`
in order up to the first malformed one; an element holding elements is an object (an array when
its schema says so; a repeated name collects into a list; text beside elements goes under
`$text`), a leaf is coerced by its schema's types (an empty leaf of an array / object schema is
[] / {}); then the engine's usual type fix. The whole arguments go out when the invoke ends
(vLLM: `stream_arg_deltas=False`); content is not stripped beside calls.

The reasoning parser is classic and reads text markers: `<mm:think>` opens reasoning (the text
before it is content), `</mm:think>` closes it; without `thinking_mode: "enabled"` in the
template kwargs an output starts in content and a leading `</mm:think>` is dropped; with it the
output starts inside the reasoning (the template opened it), and a `<mm:think>` before any
`</mm:think>` is dropped there, the reasoning going on after it (vLLM's answer makes the text before
it content, which its own stream, as ours, sent as reasoning: core/parsers/README.md, "vLLM 0.33
bugs we do not follow").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ParserContext, ReasoningParser, State
from core.parsers.coercion import coerce, schema_types, tool_properties
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import EngineToolParser
from core.parsers.families.minimax import INVOKE_END as M2_INVOKE_END
from core.parsers.families.minimax import INVOKE_PREFIXES as M2_INVOKE_PREFIXES
from core.parsers.families.minimax import NAME_ENDS
from core.parsers.text import find_first, partial_suffix

NAMESPACE = "]<]minimax[>["
TOOL_START, TOOL_END = NAMESPACE + "<tool_call>", NAMESPACE + "</tool_call>"
INVOKE_PREFIXES = tuple(NAMESPACE + p for p in M2_INVOKE_PREFIXES)
INVOKE_END = NAMESPACE + M2_INVOKE_END
ELEMENT_START, ELEMENT_END_START = NAMESPACE + "<", NAMESPACE + "</"
MIXED_TEXT_FIELD = "$text"
MAX_ELEMENT_DEPTH = 128

C, P, N, A, B = Phase.CONTENT, Phase.PREAMBLE, Phase.NAME, Phase.ARGS, Phase.BETWEEN

MINIMAX_M3 = Grammar(
    name="minimax_m3", initial=C,
    terminals={"TOOL_START": TOOL_START, "TOOL_END": TOOL_END, "INVOKE_PREFIX": INVOKE_PREFIXES,
               "INVOKE_END": INVOKE_END, "NAME_END": NAME_ENDS},
    transitions={
        (C, "TOOL_START"): (P, ()),
        (P, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (B, "INVOKE_PREFIX"): (N, (Ev.CALL_START,)),
        (N, "NAME_END"): (A, ()),
        # nested elements are argument text: only the invoke closer ends the call
        (A, "INVOKE_END"): (B, (Ev.CALL_END,)),
        # the block ends the message: text after it is dropped
        (P, "TOOL_END"): (B, ()),
        (B, "TOOL_END"): (B, ()),
    },
    strip_content_whitespace_with_tools=False)


# -- arguments -------------------------------------------------------------------------------

Element = str | list[tuple[str, Any]]  # a leaf's text, or the (name, value) children in order


def _element(text: str, pos: int, depth: int) -> tuple[str, Element, int] | None:
    """The element starting at `pos` (at its namespace), or None when malformed or unterminated."""
    if depth > MAX_ELEMENT_DEPTH:
        return None
    name_start = pos + len(ELEMENT_START)
    name_end = text.find(">", name_start)
    if name_end <= name_start:
        return None
    name = text[name_start:name_end]
    if name.startswith("/") or not name.strip():
        return None
    close = f"{ELEMENT_END_START}{name}>"
    pos = name_end + 1
    parts: list[str] = []
    children: list[tuple[str, Any]] = []
    while True:
        marker = text.find(NAMESPACE, pos)
        if marker < 0:
            return None
        parts.append(text[pos:marker])
        if text.startswith(close, marker):
            pos = marker + len(close)
            break
        if not text.startswith(ELEMENT_START, marker):
            return None
        child = _element(text, marker, depth + 1)
        if child is None:
            return None
        children.append(child[:2])
        pos = child[2]
    body = "".join(parts)
    if not children:
        return name, body, pos
    if body.strip():  # mixed text under a reserved field no child uses
        field = MIXED_TEXT_FIELD
        while any(child_name == field for child_name, _ in children):
            field = "$" + field
        children.append((field, body))
    return name, children, pos


def invoke_params(raw: str) -> list[tuple[str, Element]]:
    """The invoke body's elements, up to the first malformed or unterminated one."""
    params: list[tuple[str, Element]] = []
    pos = 0
    while True:
        while pos < len(raw) and raw[pos].isspace():
            pos += 1
        if not raw.startswith(ELEMENT_START, pos):
            return params
        element = _element(raw, pos, 1)
        if element is None:
            return params
        params.append(element[:2])
        pos = element[2]


def _container(schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The first "array" or "object" alternative of a schema."""
    kinds = schema.get("type")
    for kind in ("array", "object"):
        if kinds == kind or (isinstance(kinds, list) and kind in kinds):
            return kind, schema
    if kinds is None:
        if "items" in schema:
            return "array", schema
        if "properties" in schema or "additionalProperties" in schema:
            return "object", schema
    for key in ("anyOf", "oneOf"):
        choices = schema.get(key)
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict) and (found := _container(choice)):
                return found
    return None


def _convert(value: Element, schema: Any) -> Any:
    schema = schema if isinstance(schema, dict) else None
    container = _container(schema) if schema is not None else None
    if isinstance(value, str):
        if schema is None:
            return value
        types = schema_types(schema)
        if container is not None and "string" not in types and not value.strip():
            return [] if container[0] == "array" else {}  # the template writes [] / {} as an empty element
        return coerce(value, types)
    if container is not None and container[0] == "array":
        return [_convert(child, container[1].get("items")) for _, child in value]
    return _object(value, container[1] if container is not None else None)


def _object(elements: list[tuple[str, Element]], schema: dict[str, Any] | None) -> dict[str, Any]:
    """Named elements as an object; a repeated name collects its values into a list."""
    properties = (schema or {}).get("properties") or {}
    properties = properties if isinstance(properties, dict) else {}
    additional = (schema or {}).get("additionalProperties")
    result: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, element in elements:
        value = _convert(element, properties.get(name, additional))
        if name not in result:
            result[name] = value
        elif name in repeated:
            result[name].append(value)
        else:
            result[name] = [result[name], value]
            repeated.add(name)
    return result


def minimax_m3_arguments(raw: str, properties: dict[str, Any]) -> str:
    """vLLM's `_minimax_m3_arg_converter` on a complete invoke body."""
    return json.dumps(_object(invoke_params(raw), {"properties": properties}), ensure_ascii=False)


class MiniMaxM3ToolParser(EngineToolParser):
    name = "minimax_m3"
    GRAMMAR = MINIMAX_M3  # (the base streamer: arguments go out whole when the invoke ends)

    def convert_args(self, raw: str, name: str) -> str:
        # (vLLM looks the tool up by the first call whose raw arguments are the same text; the
        # call's own name, as here, differs only for two calls written alike to other tools)
        return minimax_m3_arguments(raw, tool_properties(self.ctx.tools, name.strip()))


# -- reasoning -------------------------------------------------------------------------------

THINK_START, THINK_END = "<mm:think>", "</mm:think>"


class MiniMaxM3ReasoningParser(ReasoningParser):
    """`<mm:think>` / `</mm:think>` as text (vLLM's MiniMaxM3ReasoningParser, non-streaming rule).

    Phases: "S" the output's start (content; a `</mm:think>` here is dropped and the rest is content
    for good, as vLLM's answer returns early then), "O" content where a
    `<mm:think>` may still open reasoning, "R" reasoning after `<mm:think>` (a second one is text),
    "C" content for good; with `thinking_mode: "enabled"` the output starts in "I", reasoning the
    template opened (a `<mm:think>` there is dropped, the reasoning going on: README). State: the
    phase and a held partial marker.
    """

    name = "minimax_m3"
    START, OPEN, REASONING, CONTENT, INITIAL = "S", "O", "R", "C", "I"

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        self.start_ids = tuple(tok.encode(THINK_START))
        self.end_ids = tuple(tok.encode(THINK_END))
        if tok.token_to_id(THINK_START) is None or tok.token_to_id(THINK_END) is None:
            raise ValueError(f"{self.name} reasoning parser could not locate think start/end tokens in the tokenizer!")
        self.thinking = ctx.chat_template_kwargs.get("thinking_mode") == "enabled"

    @staticmethod
    def _rfind(ids: Sequence[int], marker: tuple[int, ...]) -> int:
        n = len(marker)
        for i in range(len(ids) - n, -1, -1):
            if tuple(ids[i:i + n]) == marker:
                return i
        return -1

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        end = self._rfind(token_ids, self.end_ids)
        return end >= 0 and end > self._rfind(token_ids, self.start_ids)

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return {"p": self.INITIAL if self.thinking else self.START, "h": ""}

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        buf = state["h"] + text
        state["h"] = ""
        reasoning: list[str] = []
        content: list[str] = []
        pos = 0
        while pos < len(buf):
            phase = state["p"]
            if phase == self.CONTENT:
                content.append(buf[pos:])
                break
            if phase == self.START:
                rest = buf[pos:]
                if len(rest) < len(THINK_END) and THINK_END.startswith(rest):
                    state["h"] = rest
                    break
                if rest.startswith(THINK_END):  # a stray closer first: vLLM drops it and reads the rest as content
                    pos += len(THINK_END)
                    state["p"] = self.CONTENT
                else:
                    state["p"] = self.OPEN
                continue
            # O: content until <mm:think>; R: reasoning until </mm:think>; I: the same, and a
            # <mm:think> restarts it (the answer's reasoning is what follows that one)
            tags = {self.OPEN: (THINK_START,), self.REASONING: (THINK_END,)}.get(phase, (THINK_END, THINK_START))
            at, tag = find_first(buf, tags, pos)
            end = at if tag is not None else len(buf) - partial_suffix(buf[pos:], tags)
            (content if phase == self.OPEN else reasoning).append(buf[pos:end])
            if tag is None:
                state["h"] = buf[end:]
                break
            pos = at + len(tag)
            state["p"] = self.CONTENT if tag == THINK_END else self.REASONING
        return "".join(reasoning), "".join(content)

    def finish(self, state: State) -> tuple[str, str]:
        held, state["h"] = state["h"], ""
        return (held, "") if state["p"] in (self.REASONING, self.INITIAL) else ("", held)

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        if not self.thinking and text.startswith(THINK_END):
            return None, text[len(THINK_END):] or None
        if self.thinking:  # in the reasoning the template opened: the first marker decides
            at, tag = find_first(text, (THINK_END, THINK_START), 0)
            if tag == THINK_START:  # dropped, the reasoning goes on (README: vLLM makes the text before it content)
                text = text[:at] + text[at + len(THINK_START):]
            reasoning, end, content = text.partition(THINK_END)
            return (text, None) if not end else (reasoning, content or None)
        if THINK_START not in text:
            return None, text
        before, _, after = text.partition(THINK_START)
        reasoning, end, rest = after.partition(THINK_END)
        return reasoning, ((before + rest) if end else before) or None
