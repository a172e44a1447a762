"""ernie45 (reasoning, tools) against vLLM 0.33's ERNIE 4.5 parsers.

Goldens: tests/core/parsers/golden_frontier/ernie45.json (tests/oracle/record_ernie45.py, in-process,
on Qwen3's tokenizer with `<response>` / `</response>` added: the `ernie45` fixture). Non-streaming
answers and finish_reason equal vLLM's; any chunking aggregates to them but for the documented cases
(core/parsers/README.md); adjust_request and is_reasoning_end equal vLLM's; adversarial text never
raises; the state is orjson-serializable and bounded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.ernie45_cases import OUTPUTS, TOOLS, S, W, call
from tests.core.parsers.golden_checks import (
    adjusted_request,
    flat,
    nonstream_message,
    per_token_run,
    streamed_messages,
)
from tests.core.parsers.helpers import chunk_texts, make_parser, stream

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "ernie45.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# (README, "vLLM 0.33 bugs we do not follow"): the reasoning parser's answers that deliberately
# differ from vLLM's non-streaming one, which drops or keeps text its own stream did otherwise
REASONING_BUGS = {
    "think_mid", "think_after_end",  # a <think> after text: vLLM drops what precedes it
    "text_before_response",  # text before <response>: vLLM narrows to the response anyway
    "response_unclosed", "truncated_in_response",  # <response> never closed: vLLM keeps it as text
}
# (README, "Where streaming cannot equal the non-streaming answer")
TOOL_DIFFS = {"bad_second"}  # a call went out before the answer lost its calls


def _vllm_bug(case: dict) -> bool:
    return bool(case["reasoning_parser"]) and case["name"].split("__")[0] in REASONING_BUGS


def _differs(case: dict) -> bool:
    output = case["name"].split("__")[0]
    tools_parsed = case["tool_parser"] and case["request"].get("tools") \
        and case["request"].get("tool_choice", "auto") == "auto"
    return bool(tools_parsed and output in TOOL_DIFFS)


def test_the_tokenizer_is_the_recorded_one(ernie45):
    for record in RECORDS:
        assert ernie45.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    assert set(OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(ernie45, record):
    ours = nonstream_message(ernie45, record)
    if _vllm_bug(record["case"]):  # (the stream test below checks ours is what the stream sends)
        assert ours[0] != record["message"]
        return
    assert ours == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(ernie45, record):
    expected, _ = nonstream_message(ernie45, record)
    for got, finish_reason in streamed_messages(ernie45, record, expected):
        if _differs(record["case"]):
            assert got != expected
            continue
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == record["finish_reason"] or record["engine_finish_reason"] == "length"


def test_documented_differences_are_recorded_ones():
    names = {r["case"]["name"].split("__")[0] for r in RECORDS}
    assert REASONING_BUGS | TOOL_DIFFS <= names


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(ernie45, name):
    got, want = adjusted_request(ernie45, GOLDEN["adjusted"][name])
    assert got == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(ernie45, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(ernie45, "ernie45", None, {})
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<think>", "</think>", "<response>", "</response>", "<tool_call>", "</tool_call>", "{", "}", '"name"',
          ": ", '"ping"', ', "arguments": ', "{}", '{"a": 1}', "NaN", "东京", "😀", "<|im_end|>", " ", "\n", "\n\n",
          '"', "<", "x", W, S, call("ping", {}), call(None, raw="{oops}")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none", "required"]),
       parsers=st.sampled_from([("ernie45", "ernie45"), (None, "ernie45"), ("ernie45", None)]))
def test_adversarial_text_streams_without_raising(ernie45, pieces, seed, choice, parsers):
    text = "".join(pieces)
    tok = ernie45.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS, **({"tool_choice": choice} if choice else {})}
    make_parser(ernie45, *parsers, request).parse_complete(tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(ernie45, *parsers, request), chunk_texts(ernie45, ids, cuts), None)
    whole = stream(make_parser(ernie45, *parsers, request), chunk_texts(ernie45, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    # chunking never changes the stream's own answer
    assert (agg["reasoning"], agg["content"]) == (whole["reasoning"], whole["content"])
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["name"], c["arguments"]) for c in whole["tool_calls"]]
    if parsers == ("ernie45", None):  # the reasoning parser alone streams its non-streaming answer, any text
        reasoning, content, _ = make_parser(ernie45, *parsers, request).parse_complete(tok.decode(ids), ids, None)
        assert (agg["reasoning"], agg["content"]) == (reasoning or "", content or "")


# vLLM's non-streaming rule drops or keeps text its own stream sent otherwise: ours is the stream's
# (README, "vLLM 0.33 bugs we do not follow"); each through the tokenizer, per token and whole
STREAM_RULE = {
    "abc<think>r</think>c": ("abc<think>r", "c"),  # a <think> after text: its text kept, as text
    "r</think>c<think>x": ("r", "c<think>x"),  # a <think> after </think>: content
    "r</think>\nSure.\n<response>\nA\n</response>\n": ("r", "\nSure.\n<response>\nA\n</response>\n"),
    "r</think>\n\n<response>\nA cut": ("r", "\nA cut"),  # a <response> never closed
}


@pytest.mark.parametrize("text", sorted(STREAM_RULE))
def test_the_non_streaming_answer_is_what_the_stream_sends(ernie45, text):
    ids = ernie45.tokenizer.encode(text)
    reasoning, content, _ = make_parser(ernie45, "ernie45", None, {}).parse_complete(text, ids, None)
    assert (reasoning, content) == STREAM_RULE[text]
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(ernie45, "ernie45", None, {}), chunk_texts(ernie45, ids, cuts), None)
        assert (agg["reasoning"], agg["content"]) == STREAM_RULE[text]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(["r", " ", "\n", "ok", "东京", W, S, call("ping", {})]), max_size=12),
       answer=st.sampled_from(["", "\n\n<response>\nA\n</response>\n", "\nplain answer", "\n\n"]),
       seed=st.integers(0, 2**16))
def test_well_formed_outputs_stream_to_the_nonstream_answer(ernie45, pieces, answer, seed):
    """Outputs in ERNIE's own shapes (reasoning, `</think>`, a response or calls) aggregate exactly."""
    text = "reasoning</think>" + answer + "".join(pieces)
    if "<response>" in answer and "<tool_call>" in text:
        text = "reasoning</think>" + answer
    tok = ernie45.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS}
    reasoning, content, calls = make_parser(ernie45, "ernie45", "ernie45", request).parse_complete(text, ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8)))
    agg = stream(make_parser(ernie45, "ernie45", "ernie45", request), chunk_texts(ernie45, ids, cuts), None)
    assert (agg["reasoning"], agg["content"]) == (reasoning or "", content or "")
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_state_is_bounded_and_feed_cost_flat(ernie45):
    args = {f"p{i}": "v" * 40 for i in range(60)}
    text = "Reasoning about it. " * 300 + "</think>\n\n" + "Answer text. " * 300 + "\n" + \
        call("ping", args) + "\n" + W * 20 + " after the calls" * 300
    parser = make_parser(ernie45, "ernie45", "ernie45", {"tools": TOOLS})
    costs, sizes = per_token_run(parser, ernie45, text)
    # one call's text (~4 KB) at most, nothing of the text before it
    assert max(sizes) < 6000, max(sizes)
    assert sizes[len(sizes) // 4] < 600 and sizes[-1] < 600
    assert flat(costs)
