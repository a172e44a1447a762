"""AI21 Jamba: `--tool-call-parser jamba` (vLLM 0.33's vllm/tool_parsers/jamba_tool_parser.py),
for ai21labs/AI21-Jamba-* (e.g. AI21-Jamba-Mini-1.6, AI21-Jamba-Large-1.7).

    text <tool_calls>[{"name": "f", "arguments": {...}}, ...]</tool_calls>

vLLM's non-streaming rule (exact): the first `<tool_calls>` ... `</tool_calls>` block (regex,
lazy) is read as one JSON value iterated for calls: each must be an object with a string "name"
and an "arguments" key (any JSON, re-serialized with `json.dumps(..., ensure_ascii=False)`). An
empty list, object or string iterates to no calls: a tool call with none. Any failure (no end
marker, invalid JSON, an element without those keys) and the whole output is the content. With
calls the content is the text before the block (None when empty or one space); text after the
block, later blocks included, is dropped.

The markers must be tokens of the vocabulary (vLLM refuses the parser otherwise, so do we);
`adjust_request` sets skip_special_tokens false when tools are given and tool_choice is not
"none". Streaming: json_block.py (vLLM's own stream diffs partial JSON; ours sends each call
whole once its block closes, equal to the non-streaming answer).
"""

from __future__ import annotations

import json
from typing import Any

from core.parsers.families.json_block import (
    BodyFailed,
    Call,
    JsonBlockToolParser,
    named_call,
)
from core.parsers.structural_tag import keep_markers_for_tools
from core.parsers.jsonstream import dumps


class JambaToolParser(JsonBlockToolParser):
    name = "jamba"
    START, END = "<tool_calls>", "</tool_calls>"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        tok = ctx.tokenizer
        if tok.token_to_id(self.START) is None or tok.token_to_id(self.END) is None:
            raise ValueError("jamba tool parser could not locate tool calls start/end tokens in the tokenizer!")

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        return keep_markers_for_tools(request)

    def parse_body(self, body: str) -> list[Call]:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise BodyFailed from exc
        if not isinstance(value, list | dict | str):
            raise BodyFailed  # (not iterable)
        calls = []
        for item in value:  # (a dict iterates its keys, a string its characters: both fail below)
            if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
                raise BodyFailed
            calls.append(named_call(item["name"], dumps(item["arguments"])))
        return calls

    def content_beside(self, before: str) -> str | None:
        return before if before and before != " " else None
