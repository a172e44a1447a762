"""step3 (reasoning, tools) against vLLM 0.33's Step 3 parsers.

Goldens: tests/core/parsers/golden_frontier/step3.json (tests/oracle/record_step3.py, in-process,
on Qwen3's tokenizer with Step 3's five tool-call markers: the `step3` fixture). The non-streaming
answers and finish_reason equal vLLM's but for the leading whitespace of the content with calls
(a vLLM bug we do not follow, `LEADING_WS`); any chunking of any output aggregates to them but for the
documented cases (state through orjson between chunks, bounded); the render-side adjustments and
`is_reasoning_end` equal vLLM's; adversarial text never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.golden_checks import (
    adjusted_request,
    flat,
    leading_whitespace_kept,
    nonstream_message,
    per_token_run,
    streamed_messages,
)
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.step3_cases import (
    CALL_BEGIN,
    CALL_END,
    CALLS_BEGIN,
    CALLS_END,
    OUTPUTS,
    SEP,
    TOOLS,
    S,
    W,
    block,
    call,
    param,
)

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "step3.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# (core/parsers/README.md, "Where streaming cannot equal the non-streaming answer")
# a block cut off after a call went out (a call streamed before it turned malformed): vLLM's answer
# is then the whole output as content
CUT_AFTER_CALL = {"truncated_after_call", "truncated_after_calls"}
# (core/parsers/README.md, "vLLM 0.33 bugs we do not follow") vLLM strips the content's leading
# whitespace when a call is found; ours keeps it, as both streams send it
LEADING_WS = {"content_call", "ws_content_call", "text_after", "text_after_only", "second_block"}


def test_the_tokenizer_is_the_recorded_one(step3):
    for record in RECORDS:
        assert step3.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    assert set(OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(step3, record):
    message, finish_reason = nonstream_message(step3, record)
    if record["case"]["name"].split("__")[0] in LEADING_WS and message != record["message"]:
        assert leading_whitespace_kept(message, record["message"])
        message = record["message"]
    assert (message, finish_reason) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(step3, record):
    case = record["case"]
    expected, _ = nonstream_message(step3, record)
    output = case["name"].split("__")[0]
    tools_parsed = case["tool_parser"] and case["request"].get("tool_choice", "auto") == "auto" \
        and case["request"].get("tools")
    for got, finish_reason in streamed_messages(step3, record, expected):
        if tools_parsed and output in CUT_AFTER_CALL:
            assert got["reasoning"] == expected["reasoning"] and got["tool_calls"]
            continue
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(step3, name):
    got, want = adjusted_request(step3, GOLDEN["adjusted"][name])
    assert got == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(step3, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(step3, "step3", None, {})
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


def test_markers_written_as_text_are_read_too(qwen3):
    """vLLM reads the markers as text and checks no vocabulary: without them as tokens (Qwen3's
    own tokenizer) the same calls are found."""
    parser = make_parser(qwen3, "step3", "step3", {"tools": TOOLS})
    reasoning, content, calls = parser.parse_complete("r</think>Hi " + block(W), [], None)
    assert (reasoning, content) == ("r", "Hi")
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [("get_weather", '{"city": "Tokyo", "days": 3}')]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = [CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP, "function", "code", '<steptml:invoke name="',
          "get_weather", "ping", '">', "</steptml:invoke>", '<steptml:parameter name="', "city", "days",
          "</steptml:parameter>", "3", "true", "Oslo", "东京", "😀", "<think>", "</think>", "<|im_end|>", " ", "\n",
          '"', "<", "x", W, S, block(W), param("days", " 4 "), call("ping", {})]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none", "required"]),
       parsers=st.sampled_from([("step3", "step3"), (None, "step3"), ("step3", None)]))
def test_adversarial_text_streams_to_the_nonstream_answer(step3, pieces, seed, choice, parsers):
    text = "".join(pieces)
    tok = step3.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS, **({"tool_choice": choice} if choice else {})}
    reasoning, content, calls = make_parser(step3, *parsers, request).parse_complete(tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(step3, *parsers, request), chunk_texts(step3, ids, cuts), None)
    whole = stream(make_parser(step3, *parsers, request), chunk_texts(step3, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    assert agg["reasoning"] == (reasoning or "") == whole["reasoning"]
    got_calls = [(c["name"], c["arguments"]) for c in agg["tool_calls"]]
    assert (agg["content"], got_calls) == (whole["content"], [(c["name"], c["arguments"]) for c in whole["tool_calls"]])
    want_calls = [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    if _documented_difference(content, calls, agg):
        return
    assert agg["content"] == (content or "")
    assert got_calls == want_calls


def _documented_difference(content, calls, agg) -> bool:
    """A block cut off after a call went out (vLLM: no calls, the whole output as content: a call
    streamed before it turned malformed, README)."""
    return not calls and bool(agg["tool_calls"])


def test_state_is_bounded_and_feed_cost_flat(step3):
    params = {f"p{i}": "v" * 40 for i in range(60)}
    text = "Reasoning about it. " * 300 + "</think>" + "Answer text. " * 300 + block(call("ping", params), W) + \
        " after" * 300
    parser = make_parser(step3, "step3", "step3", {"tools": TOOLS})
    costs, sizes = per_token_run(parser, step3, text)
    # the current call's text (here ~4 KB) at most, nothing of the text before it
    assert max(sizes) < 6000, max(sizes)
    assert sizes[-1] < 600 and sizes[len(sizes) // 4] < 600
    assert flat(costs)
