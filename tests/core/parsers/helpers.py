"""Driving a ChatOutputParser the way derender does: token chunks in, deltas out, aggregated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

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
    """Feed chunks (state round-tripped through orjson between calls, as in stream_state); aggregate."""
    state = parser.start(prompt)
    agg: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}, "max_state": 0}
    deltas = []
    for text, ids in chunks:
        if roundtrip_state:
            encoded = orjson.dumps(state)
            agg["max_state"] = max(agg["max_state"], len(encoded))
            state = orjson.loads(encoded)
        deltas.append(parser.feed(state, text, ids))
    if roundtrip_state:
        state = orjson.loads(orjson.dumps(state))
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
    """Random ids compared by shape: `chatcmpl-tool-<16hex>`, `call_<16hex>`, Mistral's 9 alphanumerics."""
    if tool_id and tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30:
        int(tool_id[14:], 16)
        return "chatcmpl-tool-<16hex>"
    if tool_id and tool_id.startswith("call_") and len(tool_id) == 21:  # hunyuan_a13b's own ids
        int(tool_id[5:], 16)
        return "call_<16hex>"
    if tool_id and len(tool_id) == 9 and tool_id.isalnum() and tool_id.isascii():
        return "<9 alphanumerics>"
    return tool_id


# -- the differential fuzz (fuzz_cases.py) --------------------------------------------------

def case_parser(case: dict[str, Any], models: dict[str, ModelInfo]) -> ChatOutputParser | None:
    return make_parser(models[case["tokenizer"]], case["reasoning_parser"], case["tool_parser"], case["request"],
                       case["chat_template_kwargs"], auto=case.get("enable_auto_tools", True))


def prepare_case(case: dict[str, Any], models: dict[str, ModelInfo]) -> dict[str, Any]:
    """Token ids of the output and prompt (the text is what they decode to, as derender sees it)."""
    tok = models[case["tokenizer"]].tokenizer
    ids = tok.encode(case["text"])
    case["token_ids"] = ids
    case["text"] = tok.decode(ids, skip_special_tokens=False)
    prompt = case.get("prompt_text")
    case["prompt_token_ids"] = tok.encode(prompt) if prompt is not None else None
    return case


def non_streaming_message(case: dict[str, Any], models: dict[str, ModelInfo]) -> dict[str, Any]:
    """Our non-streaming answer in the recorder's shape (ids by shape)."""
    parser = case_parser(case, models)
    if parser is None:
        return {"message": {"reasoning": None, "content": case["text"], "tool_calls": []}, "finish_reason": "stop"}
    reasoning, content, calls = parser.parse_complete(case["text"], case["token_ids"], case["prompt_token_ids"])
    return {"message": {"reasoning": reasoning, "content": content, "tool_calls": [
        {"id": id_shape(c["id"]), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in calls]}, "finish_reason": parser.resolve_finish_reason("stop", bool(calls))}


def streamed_message(case: dict[str, Any], models: dict[str, ModelInfo], cuts: Sequence[int],
                     empty_last_chunk: bool) -> dict[str, Any]:
    """The stream's aggregate in the same shape: chunks at `cuts`, the finish alone in an empty
    last chunk or with the last tokens."""
    model = models[case["tokenizer"]]
    parser = case_parser(case, models)
    if parser is None:
        return {"message": {"reasoning": None, "content": case["text"], "tool_calls": []}, "finish_reason": "stop"}
    chunks = chunk_texts(model, case["token_ids"], cuts)
    if empty_last_chunk:
        chunks.append(("", []))
    agg = stream(parser, chunks, case["prompt_token_ids"])
    return {"message": {"reasoning": agg["reasoning"] or None, "content": agg["content"] or None, "tool_calls": [
        {"id": id_shape(c["id"]), "name": c["name"], "arguments": c["arguments"]} for c in agg["tool_calls"]]},
        "finish_reason": agg["finish_reason"], "max_state": agg["max_state"]}


# -- goldens recorded in-process (tests/oracle/record_*.py: records with case, text_ids, token_ids) --
