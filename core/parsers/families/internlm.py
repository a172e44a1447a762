"""InternLM2 / InternLM3: `--tool-call-parser internlm` (vLLM 0.33's
vllm/tool_parsers/internlm2_tool_parser.py), for internlm/internlm2_5-7b-chat and
internlm/internlm3-8b-instruct.

    text<|action_start|><|plugin|>
    {"name": "f", "parameters": {...}}<|action_end|>

vLLM's non-streaming rule (exact where it answers): one call per output. The text is split at
`<|action_start|><|plugin|>`; the action runs to `<|action_end|>` (or the end of the output), is
read from its first `{` as one JSON object with a string "name"; its "parameters" (else
"arguments", else {}) re-serialized with `json.dumps(..., ensure_ascii=False)`. The content is
the text before the marker (None when empty); text after the action is dropped. The tool name is
not checked against the request's tools.

vLLM's parser raises where the output has the marker twice, the action is not such an object
(invalid JSON, text after it, no "name") or has no `{`: its server answers an error. Ours answers
the whole output as content (a derender cannot answer an error for a finished generation).

`adjust_request`: skip_special_tokens false when tools are given and tool_choice is not "none"
(the markers are special tokens). Streaming (json_block.py): vLLM's own stream sends the call but
not its trailing text; ours agrees with the non-streaming answer, but a second marker after the
call went out cannot take it back (core/parsers/README.md, "Where streaming cannot equal ...").
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


class InternLMToolParser(JsonBlockToolParser):
    name = "internlm"
    START, END = "<|action_start|><|plugin|>", "<|action_end|>"
    END_REQUIRED = False

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        return keep_markers_for_tools(request)

    def whole_fails(self, text: str, start: int) -> bool:
        return self.START in text[start + len(self.START):]  # (vLLM unpacks a two-way split)

    def body_fails(self, body: str) -> bool:
        return self.START in body

    def parse_body(self, body: str) -> list[Call]:
        brace = body.find("{")
        try:  # (no `{`: vLLM reads from the last character)
            obj = json.loads(body[brace:])
        except (ValueError, RecursionError) as exc:
            raise BodyFailed from exc
        if not isinstance(obj, dict) or "name" not in obj:
            raise BodyFailed
        args = obj["parameters"] if "parameters" in obj else obj.get("arguments", {})
        return [named_call(obj["name"], dumps(args))]
