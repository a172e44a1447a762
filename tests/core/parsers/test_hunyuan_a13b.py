"""hunyuan_a13b (reasoning, tools) against vLLM 0.33's Hunyuan A13B parsers.

Goldens: tests/core/parsers/golden_frontier/hunyuan_a13b.json (tests/oracle/record_hunyuan_a13b.py,
in-process, on Qwen3's tokenizer as it is: the markers are text). Non-streaming answers (call ids
`call_<16hex>` by shape) and finish_reason equal vLLM's; any chunking aggregates to them but for the
documented cases (core/parsers/README.md); adjust_request and is_reasoning_end equal vLLM's;
adversarial text never raises; the state is orjson-serializable and bounded.
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
    nonstream_message,
    per_token_run,
    streamed_messages,
)
from tests.core.parsers.helpers import chunk_texts, id_shape, make_parser, stream
from tests.core.parsers.hunyuan_a13b_cases import OUTPUTS, TOOLS, E, S, T, W, block

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "hunyuan_a13b.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# (README, "vLLM 0.33 bugs we do not follow"): answers that deliberately differ from vLLM's
# non-streaming one, which reads these otherwise than its own stream sends them; ours is the stream's
REASONING_BUGS = {
    "think_only", "truncated_reasoning",  # cut off in the reasoning: vLLM's answer is all content
    "end_in_reasoning",  # END in the reasoning, none after the answer
    "half_mid",  # <think>\n ... RS after other text, no END: vLLM drops the text before
}
TOOL_BUGS = {"think_wrapped_call"}  # a block inside <think>...</think> of the content: vLLM skips it


def _vllm_bug(case: dict) -> bool:
    output = case["name"].split("__")[0]
    tools_parsed = case["tool_parser"] and case["request"].get("tools") \
        and case["request"].get("tool_choice", "auto") == "auto"
    return bool(case["reasoning_parser"] and output in REASONING_BUGS) or bool(
        tools_parsed and output in TOOL_BUGS)


def _shaped(message: dict) -> dict:
    return {**message, "tool_calls": [{**c, "id": id_shape(c["id"])} for c in message["tool_calls"]]}


def test_every_output_is_recorded():
    assert set(OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


def test_the_tokenizer_is_the_recorded_one(qwen3):
    for record in RECORDS:
        assert qwen3.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(qwen3, record):
    ours = nonstream_message(qwen3, record)
    if _vllm_bug(record["case"]):  # (the stream test below checks ours is what the stream sends)
        assert ours[0] != _shaped(record["message"])
        return
    assert ours == (_shaped(record["message"]), record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(qwen3, record):
    expected, finish = nonstream_message(qwen3, record)
    for got, finish_reason in streamed_messages(qwen3, record, expected):
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == finish or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(qwen3, name):
    got, want = adjusted_request(qwen3, GOLDEN["adjusted"][name])
    assert got == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(qwen3, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(qwen3, "hunyuan_a13b", None, {})
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<think>\n", "<think>", "\n</think>\n<answer>\n", "</think>", "\n</answer>", "<answer>", "<tool_calls>",
          "</tool_calls>", "[", "]", "{", "}", json.dumps(W), ",", '"name"', "null", "东京", "😀", " ", "\n", "x",
          "助手：", block(W), block(W, S), block(raw="[1]"), block(raw="{oops")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none", "required"]),
       parsers=st.sampled_from([("hunyuan_a13b", "hunyuan_a13b"), (None, "hunyuan_a13b"), ("hunyuan_a13b", None)]))
def test_adversarial_text_streams_without_raising(qwen3, pieces, seed, choice, parsers):
    text = "".join(pieces)
    tok = qwen3.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS, **({"tool_choice": choice} if choice else {})}
    make_parser(qwen3, *parsers, request).parse_complete(tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(qwen3, *parsers, request), chunk_texts(qwen3, ids, cuts), None)
    whole = stream(make_parser(qwen3, *parsers, request), chunk_texts(qwen3, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    assert (agg["reasoning"], agg["content"]) == (whole["reasoning"], whole["content"])
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["name"], c["arguments"]) for c in whole["tool_calls"]]
    # any text streams to the non-streaming answer (a block's calls go out together: none can fail later)
    reasoning, content, calls = make_parser(qwen3, *parsers, request).parse_complete(tok.decode(ids), ids, None)
    assert (agg["reasoning"], agg["content"]) == (reasoning or "", content or "")
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


# vLLM's non-streaming rule reads these otherwise than its own stream sends them: ours is the
# stream's (README, "vLLM 0.33 bugs we do not follow"); each through the tokenizer, per token and whole
STREAM_RULE = {
    "<think>\nStill thinking": ("Still thinking", None, []),  # cut off in the reasoning
    "<think>\nr\n</answer> more\n</think>\n<answer>\nA": ("r\n</answer> more", "A", []),  # END only in it
    "pre <think>\nr\n</think>\n<answer>\nA": (None, "pre <think>\nr\n</think>\n<answer>\nA", []),
    "<think>x " + block(W) + " y</think> z": (None, "<think>x ", ["get_weather"]),  # a block inside <think>
}


@pytest.mark.parametrize("text", sorted(STREAM_RULE))
def test_the_non_streaming_answer_is_what_the_stream_sends(qwen3, text):
    ids = qwen3.tokenizer.encode(text)
    request = {"tools": TOOLS}
    reasoning, content, calls = make_parser(qwen3, "hunyuan_a13b", "hunyuan_a13b", request).parse_complete(
        text, ids, None)
    want = STREAM_RULE[text]
    assert (reasoning, content, [c["function"]["name"] for c in calls]) == want
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(qwen3, "hunyuan_a13b", "hunyuan_a13b", request), chunk_texts(qwen3, ids, cuts), None)
        assert (agg["reasoning"] or None, agg["content"] or None, [c["name"] for c in agg["tool_calls"]]) == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(["a", " ", "\n", "ok", "东京", block(W), block(W, S), block(raw="[oops"),
                                        block(raw="{}")]), max_size=10),
       reasoning=st.sampled_from(["", "r", "line\nline"]), closed=st.booleans(), seed=st.integers(0, 2**16))
def test_well_formed_outputs_stream_to_the_nonstream_answer(qwen3, pieces, reasoning, closed, seed):
    """Outputs in Hunyuan's own shape (a reasoning block, an answer, END or cut off) aggregate exactly."""
    text = "<think>\n" + reasoning + "\n</think>\n<answer>\n" + "".join(pieces) + (E if closed else "")
    tok = qwen3.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS}
    got_r, got_c, calls = make_parser(qwen3, "hunyuan_a13b", "hunyuan_a13b", request).parse_complete(text, ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8)))
    agg = stream(make_parser(qwen3, "hunyuan_a13b", "hunyuan_a13b", request), chunk_texts(qwen3, ids, cuts), None)
    assert (agg["reasoning"], agg["content"]) == (got_r or "", got_c or "")
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_state_is_bounded_and_feed_cost_flat(qwen3):
    args = {f"p{i}": "v" * 40 for i in range(60)}
    text = T.replace("Let me think.", "Reasoning about it. " * 300) + "Answer text. " * 300 + \
        block({"name": "ping", "arguments": args}) + " after" * 300 + E
    parser = make_parser(qwen3, "hunyuan_a13b", "hunyuan_a13b", {"tools": TOOLS})
    costs, sizes = per_token_run(parser, qwen3, text)
    assert max(sizes) < 6000, max(sizes)
    assert sizes[len(sizes) // 4] < 600
    assert flat(costs)
