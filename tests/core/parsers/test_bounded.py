"""The parser state stays small and each feed costs the same whatever the output length.

The raw streaming derender carries the state in `stream_state` on every call, so it must be
bounded by the current tool call, not by the output; and per-call work must not grow with the
output (vLLM's replay is O(n) per chunk, docs/vllm-wire-spec.md §8).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.core.parsers.helpers import make_parser

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "note": "%s"}}\n</tool_call>'


def _tokens(model, text):
    tok = model.tokenizer
    return [(tok.decode([i], skip_special_tokens=False), [i]) for i in tok.encode(text)]


@pytest.mark.parametrize("combo", [("qwen3", "hermes"), ("qwen3", "qwen3_xml"), ("glm45", "glm45")])
def test_state_is_bounded_by_the_current_call(qwen3, combo):
    reasoning = "Thinking about the weather in many cities. " * 400
    calls = [CALL % ("x" * n) for n in (10, 400, 10)]
    if combo[1] != "hermes":  # the same shape in the family's own markup
        calls = [f"<tool_call>\n<function=get_weather>\n<parameter=note>\n{'x' * n}\n</parameter>\n</function>\n</tool_call>"
                 if combo[1] == "qwen3_xml" else
                 f"<tool_call>get_weather<arg_key>note</arg_key><arg_value>{'x' * n}</arg_value></tool_call>"
                 for n in (10, 400, 10)]
    text = "<think>" + reasoning + "</think>Answer. " * 50 + "".join(calls)
    parser = make_parser(qwen3, combo[0], combo[1], {"tools": TOOLS})
    state = parser.start(None)
    sizes = []
    for piece, ids in _tokens(qwen3, text):
        parser.feed(state, piece, ids)
        sizes.append(len(json.dumps(state)))
    parser.finish(state)
    # ~4k tokens of output; the state never holds more than the current call's own text
    assert max(sizes) < 600 + 420, max(sizes)
    assert sizes[-1] < 600


def test_feed_cost_does_not_grow_with_the_output(qwen3):
    parser = make_parser(qwen3, "qwen3", "hermes", {"tools": TOOLS})
    pieces = _tokens(qwen3, "<think>" + "Some reasoning text, with words. " * 3000)
    state = parser.start(None)

    def timed(chunk):
        t0 = time.perf_counter()
        for piece, ids in chunk:
            parser.feed(state, piece, ids)
        return time.perf_counter() - t0

    first = min(timed(pieces[100:1100]) for _ in range(1))
    for piece, ids in pieces[1100:-1000]:
        parser.feed(state, piece, ids)
    last = timed(pieces[-1000:])
    assert last < first * 3 + 0.002, (first, last)


def test_check_supported_names_the_flag(qwen3, llama3):
    from core.parsers.pipeline import ChatOutputParser

    ChatOutputParser.check_supported(qwen3, "qwen3", "hermes", True)
    with pytest.raises(ValueError, match="--reasoning-parser deepseek_r1"):
        ChatOutputParser.check_supported(llama3, "deepseek_r1", None, False)  # no <think> token in Llama-3
    with pytest.raises(ValueError, match="unknown tool-call parser"):
        ChatOutputParser.check_supported(qwen3, None, "no_such_parser", True)
    ChatOutputParser.check_supported(qwen3, None, "no_such_parser", False)  # tool parsers need auto tool choice
