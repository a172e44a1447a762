"""Checks shared by the in-process golden files of one family (golden_frontier/<family>.json with
`records`, `adjusted`, `is_reasoning_end`: tests/oracle/record_step3.py, record_minimax_m3.py).

Each returns what a test asserts on, so a family test keeps only its own documented differences.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import orjson

from core.model import ModelInfo
from core.parsers.pipeline import ChatOutputParser
from core.protocol.chat import ChatCompletionRequest
from tests.core.parsers.helpers import chunk_texts, id_shape, make_parser, stream


def case_parser(model: ModelInfo, case: dict[str, Any]) -> ChatOutputParser:
    """The parser pair of a recorded case (its template kwargs in the request too, as a client sends them)."""
    kwargs = case.get("chat_template_kwargs") or {}
    request = {**case["request"], **({"chat_template_kwargs": kwargs} if kwargs else {})}
    return make_parser(model, case["reasoning_parser"], case["tool_parser"], request, kwargs)


def nonstream_message(model: ModelInfo, record: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Our non-streaming message (ids by shape) and finish_reason for a record."""
    parser = case_parser(model, record["case"])
    reasoning, content, calls = parser.parse_complete(model.tokenizer.decode(record["text_ids"]),
                                                      record["token_ids"], None)
    message = {"reasoning": reasoning, "content": content,
               "tool_calls": [{"id": id_shape(c["id"]), "name": c["function"]["name"],
                               "arguments": c["function"]["arguments"]} for c in calls]}
    return message, parser.resolve_finish_reason(record["engine_finish_reason"], bool(calls))


def leading_whitespace_kept(ours: dict[str, Any], vllm: dict[str, Any]) -> bool:
    """Our message differs from vLLM 0.33's only by the leading whitespace of the content before
    calls, which vLLM's non-streaming answer strips and ours keeps, as both streams send it
    (core/parsers/README.md, "vLLM 0.33 bugs we do not follow")."""
    content, theirs = ours["content"], vllm["content"]
    return (bool(content) and content != theirs and content.lstrip() == theirs
            and all(ours[key] == vllm[key] for key in ours if key != "content"))


def text_before_block_kept(text: str, start: str, ours: dict[str, Any], vllm: dict[str, Any]) -> bool:
    """Our message differs from vLLM 0.33's only by the content beside a block of calls that vLLM
    drops: ours is the text before the block's `start` marker, as the stream sends it
    (phi4_mini_json's `functools[`: core/parsers/README.md, "vLLM 0.33 bugs we do not follow")."""
    return (vllm["content"] is None and start in text and bool(ours["content"])
            and ours["content"] == text[:text.find(start)]
            and all(ours[key] == vllm[key] for key in ours if key != "content"))


def streamed_messages(model: ModelInfo, record: dict[str, Any], expected: dict[str, Any]
                      ) -> Iterator[tuple[dict[str, Any], str]]:
    """The record streamed token by token, whole and in a few random chunks: each aggregated
    message (an empty reasoning / content the stream cannot send counted as the answer's "") and
    its finish_reason."""
    case, ids = record["case"], record["text_ids"]
    rng = random.Random(case["name"])
    for cuts in (list(range(1, len(ids))), [], rng.sample(range(1, len(ids)), min(4, len(ids) - 1))):
        agg = stream(case_parser(model, case), chunk_texts(model, ids, cuts), None)
        got = {"reasoning": agg["reasoning"] or None, "content": agg["content"] or None,
               "tool_calls": [{"id": id_shape(c["id"]), "name": c["name"], "arguments": c["arguments"]}
                              for c in agg["tool_calls"]]}
        for key in ("reasoning", "content"):
            if expected[key] == "" and got[key] is None:
                got[key] = ""
        yield got, agg["finish_reason"]


def adjusted_request(model: ModelInfo, recorded: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(skip_special_tokens, structural_tag, json) after our adjust_request, and vLLM's recorded ones."""
    parser = make_parser(model, recorded["reasoning_parser"], recorded["tool_parser"], recorded["request"])
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **recorded["request"])
    for family in (parser.reasoning, parser.tools):
        if family is not None:
            request = family.adjust_request(request)
    so = request.structured_outputs
    schema = so.json_ if so is not None else None
    got = (request.skip_special_tokens, so.structural_tag if so is not None else None,
           json.loads(schema) if isinstance(schema, str) else schema)
    return got, (recorded["skip_special_tokens"], recorded["structural_tag"], recorded["json"])


def per_token_run(parser: ChatOutputParser, model: ModelInfo, text: str) -> tuple[list[float], list[int]]:
    """Feed `text` one token at a time (state through orjson each time): each feed's cost, and
    the serialized state's size every 25 tokens."""
    state = parser.start(None)
    tok = model.tokenizer
    costs: list[float] = []
    sizes: list[int] = []
    for i, tid in enumerate(tok.encode(text)):
        piece = tok.decode([tid], skip_special_tokens=False)
        t0 = time.perf_counter()
        parser.feed(state, piece, [tid])
        costs.append(time.perf_counter() - t0)
        state = orjson.loads(orjson.dumps(state))
        if i % 25 == 0:
            sizes.append(len(orjson.dumps(state)))
    parser.finish(state)
    return costs, sizes


def flat(costs: list[float]) -> bool:
    """The last tenth of the feeds costs (median) what the first tenth did, give or take."""
    n = len(costs) // 10
    return sorted(costs[-n:])[n // 2] < sorted(costs[:n])[n // 2] * 5 + 20e-6
