"""Driving a ChatOutputParser the way derender does: token chunks in, deltas out, aggregated."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.model import ModelInfo
from core.parsers.pipeline import ChatOutputParser
from core.protocol.chat import ChatCompletionRequest


def make_parser(model: ModelInfo, reasoning: str | None, tool: str | None, request: dict[str, Any],
                kwargs: dict[str, Any] | None = None, auto: bool = True) -> ChatOutputParser | None:
    body = {"messages": [{"role": "user", "content": "hi"}], **request}
    req = ChatCompletionRequest(**body)
    return ChatOutputParser.for_request(model=model, reasoning_parser=reasoning, tool_call_parser=tool,
                                        enable_auto_tool_choice=auto, request=req,
                                        chat_template_kwargs=kwargs or {})


def chunk_texts(model: ModelInfo, ids: Sequence[int], cuts: Sequence[int]) -> list[tuple[str, list[int]]]:
    """Split ids at `cuts`; each chunk's text is what an incremental detokenizer emits for it
    (prefix decode differences, holding back an incomplete UTF-8 tail)."""
    tok = model.tokenizer
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(ids))), len(ids)]
    out, prev = [], ""
    for a, b in zip(bounds, bounds[1:]):
        cur = tok.decode(ids[:b], skip_special_tokens=False)
        if cur.endswith("\ufffd") and b < len(ids):
            out.append(("", list(ids[a:b])))
            continue
        out.append((cur[len(prev):], list(ids[a:b])))
        prev = cur
    return out


def stream(parser: ChatOutputParser, chunks: list[tuple[str, list[int]]],
           prompt: Sequence[int] | None, roundtrip_state: bool = True) -> dict[str, Any]:
    """Feed chunks (state JSON round-tripped between calls, as in stream_state); aggregate."""
    state = parser.start(prompt)
    agg: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}, "max_state": 0}
    deltas = []
    for text, ids in chunks:
        if roundtrip_state:
            encoded = json.dumps(state, ensure_ascii=False)
            agg["max_state"] = max(agg["max_state"], len(encoded.encode()))
            state = json.loads(encoded)
        deltas.append(parser.feed(state, text, ids))
    deltas.append(parser.finish(state))
    for delta in deltas:
        if delta is None:
            continue
        agg["reasoning"] += delta["reasoning"] or ""
        agg["content"] += delta["content"] or ""
        for call in delta["tool_calls"]:
            slot = agg["calls"].setdefault(call["index"], {"id": None, "name": "", "arguments": ""})
            if "id" in call:
                assert slot["id"] is None, "a call's id is sent once"
                slot["id"] = call["id"]
                assert call["type"] == "function"
            slot["name"] += call["function"].get("name") or ""
            slot["arguments"] += call["function"].get("arguments") or ""
    agg["finish_reason"] = parser.finish_reason(state, "stop")
    agg["tool_calls"] = [agg["calls"][i] for i in sorted(agg["calls"])]
    return agg


def id_shape(tool_id: str | None) -> str | None:
    """Random ids compared by shape: `chatcmpl-tool-<16hex>`, Mistral's 9 alphanumerics."""
    if tool_id and tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30:
        int(tool_id[14:], 16)
        return "chatcmpl-tool-<16hex>"
    if tool_id and len(tool_id) == 9 and tool_id.isalnum() and tool_id.isascii():
        return "<9 alphanumerics>"
    return tool_id
