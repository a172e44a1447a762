"""Phi-4-mini: `--tool-call-parser phi4_mini_json` (vLLM 0.33's vllm/tool_parsers/phi4mini_tool_parser.py),
for microsoft/Phi-4-mini-instruct.

    text functools[{"name": "f", "arguments": {...}}, {"name": "g", "parameters": {...}}] text

vLLM's non-streaming rule (exact): the first `functools[` up to the first `]` after it (a `]`
inside a string or a nested list ends it too) is read as the JSON list `[` + body + `]`. Each
element must be an object with a string "name" and an "arguments" key (else "parameters"; its
value, any JSON, re-serialized with `json.dumps(..., ensure_ascii=False)`); otherwise the whole
output is the content. A body that is not valid JSON still counts as a tool call with no calls.
When the block parses, vLLM's content is None (the text before and after it dropped); ours is
the text before the block, as our stream sends it before the block is seen (vLLM's stream sends
nothing at all for this parser): a vLLM bug we do not follow (core/parsers/README.md). The text
after the block is dropped, as vLLM does.
"""

from __future__ import annotations

import json

from core.parsers.families.json_block import (
    BodyFailed,
    Call,
    JsonBlockToolParser,
    named_call,
)
from core.parsers.jsonstream import dumps


class Phi4MiniJsonToolParser(JsonBlockToolParser):
    name = "phi4_mini_json"
    START, END = "functools[", "]"

    def parse_body(self, body: str) -> list[Call]:
        try:
            items = json.loads("[" + body + "]")
        except ValueError:
            return []  # (vLLM logs the error and reports a tool call with no calls)
        except RecursionError as exc:  # (not a JSONDecodeError: vLLM's outer except, all content)
            raise BodyFailed from exc
        calls = []
        for item in items:
            if not isinstance(item, dict) or "name" not in item or not ("arguments" in item or "parameters" in item):
                raise BodyFailed
            calls.append(named_call(item["name"], dumps(item["arguments"] if "arguments" in item
                                                        else item["parameters"])))
        return calls

    # (the content beside the calls: the text before the block, json_block's default)
