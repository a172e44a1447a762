"""kimi_k2: vLLM 0.33's Kimi-K2 parser engine, with Kimi's own call ids.

    <think>...</think><|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
    <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>

The grammar is vLLM's `kimi_k2_config` (vllm/parser/kimi_k2.py); the rest follows from the
engine (core/parsers/engine.py, engine_parsers.py): the section start ends reasoning, a repeated
`</think>` in content is dropped, the reasoning is right-stripped, text after the section is
dropped (the grammar stays in the tool block), content is not stripped. A call's header must
look like `ID:N`: the id is the header (e.g. `functions.get_weather:0`), the name its part
before `:` without `functions.`. Arguments are the raw JSON stripped (`{}` when empty), with the
tool schema's types applied (then re-serialized). `thinking` / `enable_thinking` false (both
default on) means no reasoning grammar.

One vLLM bug is not followed (core/parsers/README.md): for a header without `:N` vLLM takes a
`"name"` found inside the arguments as the call's name (or, without arguments, the whole
header); such a call is dropped here, as any call whose header has no `:N`.
"""

from __future__ import annotations

import re
from typing import Any

from core.parsers.base import ParserContext
from core.parsers.engine import Ev, Grammar, Phase
from core.parsers.engine_parsers import CallState, EngineToolParser, EngineToolState, JsonArgStreamer
from core.parsers.families.glm45 import Glm45ReasoningParser, thinking_on
from core.parsers.structural_tag import TagModel, _json_content, apply_tag_keeping_markers

THINK_START, THINK_END = "<think>", "</think>"
SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_HEADER = re.compile(r"(?P<id>.+:\d+)")

C, R, P, N, A, B = Phase.CONTENT, Phase.REASONING, Phase.PREAMBLE, Phase.NAME, Phase.ARGS, Phase.BETWEEN


def kimi_grammar(thinking: bool) -> Grammar:
    think = {"THINK_START": THINK_START, "THINK_END": THINK_END} if thinking else {}
    think_transitions = {(R, "THINK_START"): (R, ()), (R, "THINK_END"): (C, (Ev.REASONING_END,)),
                         (C, "THINK_END"): (C, ())} if thinking else {}
    terminals = {**think, "TOOL_SECTION_START": SECTION_BEGIN, "TOOL_SECTION_END": SECTION_END,
                 "TOOL_START": CALL_BEGIN, "TOOL_END": CALL_END, "ARG_START": ARG_BEGIN}
    return Grammar(
        name="kimi_k2", initial=R if thinking else C, terminals=terminals, id_terminals=frozenset(terminals.values()),
        transitions={**think_transitions,
                     (R, "TOOL_SECTION_START"): (P, (Ev.REASONING_END,)),
                     (C, "TOOL_SECTION_START"): (P, ()),
                     (P, "TOOL_START"): (N, (Ev.CALL_START,)),
                     (N, "ARG_START"): (A, ()),
                     (A, "TOOL_END"): (B, (Ev.CALL_END,)),
                     (A, "TOOL_SECTION_END"): (P, (Ev.CALL_END,)),
                     (B, "TOOL_START"): (N, (Ev.CALL_START,)),
                     (P, "TOOL_SECTION_END"): (P, ()),  # text after the section stays dropped
                     (B, "TOOL_SECTION_END"): (P, ())},
        strip_content_whitespace_with_tools=False)


KIMI = kimi_grammar(True)
KIMI_NO_THINKING = kimi_grammar(False)


class KimiK2ReasoningParser(Glm45ReasoningParser):
    name = "kimi_k2"
    GRAMMAR = KIMI
    GRAMMAR_NO_THINKING = KIMI_NO_THINKING
    BOUNDARIES = ()  # vLLM's Kimi config has no turn boundaries


def parse_header(header: str | None) -> tuple[str, str] | None:
    """(id, name) from a call header, or None when it has no `:N` (vLLM's `_extract_tool_id_and_name`)."""
    if header is None:
        return None
    match = _HEADER.match(header.strip())
    if match is None:
        return None
    call_id = match.group("id").strip()
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


class KimiK2ToolParser(EngineToolParser):
    name = "kimi_k2"
    STREAMER = JsonArgStreamer()
    TAG_MODEL = KimiTagModel([], [SECTION_BEGIN])

    def __init__(self, ctx: ParserContext) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        if tok.token_to_id(SECTION_BEGIN) is None or tok.token_to_id(CALL_BEGIN) is None:
            raise ValueError("kimi_k2 tool parser could not locate the tool call tokens in the tokenizer!")

    def grammar_for(self, ctx: ParserContext) -> Grammar:
        return KIMI if thinking_on(ctx.chat_template_kwargs) else KIMI_NO_THINKING

    def adjust_request(self, request: Any) -> Any:
        return apply_tag_keeping_markers(request, self.TAG_MODEL)

    def emit_name(self, state: EngineToolState, call: CallState, name: str | None) -> None:
        parsed = parse_header(name)
        if parsed is None or not parsed[1]:
            call["nm"] = ""
            return
        call["id"] = parsed[0]
        super().emit_name(state, call, parsed[1])

    def on_call_end(self, call: CallState) -> None:
        if not call["sent"]:
            parsed = parse_header(call["nm"])
            call["id"], call["nm"] = parsed if parsed is not None and parsed[1] else ("", "")

    def name_in_args(self, call: CallState) -> str | None:
        return None  # the arguments' "name" is a parameter, never the function (vLLM bug)

    def name_and_args(self, raw: str) -> tuple[Any, str]:
        return "", self.args_json(raw, "")

    def args_json(self, raw: str, name: str) -> str:
        return raw.strip() or "{}"
