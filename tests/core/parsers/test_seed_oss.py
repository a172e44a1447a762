"""seed_oss (reasoning, tools) against vLLM 0.33's Seed-OSS parser engine.

Goldens: tests/core/parsers/golden_frontier/seed_oss.json (tests/oracle/record_seed_oss.py,
in-process, on Qwen3's tokenizer with Seed-OSS's control tokens: the `seed_oss` fixture). The
non-streaming answers and finish_reason equal vLLM's; any chunking of any output aggregates to
them (state through orjson between chunks, bounded); the render-side adjustments and
`is_reasoning_end` on Seed-OSS prompts equal vLLM's; adversarial text never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.golden_checks import (adjusted_request, flat, nonstream_message, per_token_run,
                                              streamed_messages)
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.seed_oss_cases import CALL, CALL2, OUTPUTS, TOOLS

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "seed_oss.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# the call turns malformed, or is cut off, after part of it went out (what was sent cannot be
# taken back: core/parsers/README.md)
STREAM_CANNOT_MATCH = {"markup_in_value__default", "markup_in_value__nothink", "truncated_in_call__default"}


def test_the_tokenizer_is_the_recorded_one(seed_oss):
    tok = seed_oss.tokenizer
    for record in RECORDS:
        assert tok.encode(record["case"]["text"]) == record["text_ids"]
    assert tok.token_to_id("<seed:eos>") == GOLDEN["eos_token_id"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(seed_oss, record):
    assert nonstream_message(seed_oss, record) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(seed_oss, record):
    expected, _ = nonstream_message(seed_oss, record)
    for got, finish in streamed_messages(seed_oss, record, expected):
        if record["case"]["name"] in STREAM_CANNOT_MATCH:
            assert got["reasoning"] == expected["reasoning"]
            continue
        assert got == expected
        assert finish == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(seed_oss, name):
    got, want = adjusted_request(seed_oss, {"reasoning_parser": "seed_oss", "tool_parser": "seed_oss",
                                            **GOLDEN["adjusted"][name]})
    assert got == want  # (never a structural tag: vLLM has no tag model for seed_oss)


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_on_seed_prompts_equals_vllm(seed_oss, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(seed_oss, "seed_oss", None, {}, recorded["chat_template_kwargs"])
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


def test_a_prompt_that_closed_reasoning_starts_in_content(seed_oss):
    prompt = seed_oss.tokenizer.encode("<seed:bos>assistant\n<seed:think></seed:think>")
    parser = make_parser(seed_oss, "seed_oss", "seed_oss", {"tools": TOOLS})
    reasoning, content, calls = parser.parse_complete("Hello " + CALL, [], prompt)
    assert (reasoning, content, [c["function"]["name"] for c in calls]) == (None, "Hello", ["get_weather"])


def test_qwen3_tokenizer_is_refused_at_start_up(qwen3):
    from core.parsers.pipeline import ChatOutputParser

    with pytest.raises(ValueError, match="could not locate think start/end tokens"):
        ChatOutputParser.check_supported(qwen3, "seed_oss", "seed_oss", True)


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<seed:think>", "</seed:think>", "<seed:tool_call>", "</seed:tool_call>", "<seed:bos>", "<seed:eos>",
          "<function=", "get_weather", "search", "</function>", "<parameter=", "city", "days", "</parameter>",
          ">", "<", "\n", " ", "Paris", "3", "true", '{"year": 1}', "天气", "😀", "<think>", "</think>",
          "<tool_call>", "<|im_end|>", "<|endoftext|>", "<seed:cot_budget_reflect>", '"', "\\", "x"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=40), seed=st.integers(0, 2**16),
       kw=st.sampled_from([{}, {"enable_thinking": False}]),
       choice=st.sampled_from([None, "auto", "none", "required"]),
       parsers=st.sampled_from([("seed_oss", "seed_oss"), ("seed_oss", None), (None, "seed_oss")]))
def test_adversarial_text_streams_to_the_nonstream_answer(seed_oss, pieces, seed, kw, choice, parsers):
    text = "".join(pieces)
    ids = seed_oss.tokenizer.encode(text)
    request = {"tools": TOOLS, "chat_template_kwargs": kw, **({"tool_choice": choice} if choice else {})}
    parser = make_parser(seed_oss, *parsers, request, kw)
    reasoning, content, calls = parser.parse_complete(seed_oss.tokenizer.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(seed_oss, *parsers, request, kw), chunk_texts(seed_oss, ids, cuts), None)
    assert agg["max_state"] < 4096 + 4 * len(text)
    assert agg["reasoning"] == (reasoning or "")
    if not any(p in text for p in ("<parameter=", "</function>", "<function=")) or choice == "required":
        # (a call that turned malformed after part of it streamed cannot be taken back)
        assert agg["content"] == (content or "")
        assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
            [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_state_is_bounded_and_feed_cost_flat(seed_oss):
    """A long output: the state stays the same size whatever was already parsed (through orjson
    at every token), and the last feeds cost what the first did."""
    text = "<seed:think>" + "thinking " * 400 + "</seed:think>" + "answer " * 400 + CALL + CALL2
    costs, sizes = per_token_run(make_parser(seed_oss, "seed_oss", "seed_oss", {"tools": TOOLS}), seed_oss, text)
    assert max(sizes) < 2048
    assert max(sizes[len(sizes) // 3: 2 * len(sizes) // 3]) < 600  # the plain-text middle: no growth
    assert flat(costs)


def test_every_output_is_recorded():
    names = {r["case"]["name"].split("__")[0] for r in RECORDS}
    assert set(OUTPUTS) <= names
