"""longcat (tools) against vLLM 0.33's LongcatFlashToolParser, hermes with `<longcat_tool_call>`.

Goldens: tests/core/parsers/golden_frontier/longcat.json (tests/oracle/record_longcat.py, in-process,
on Qwen3's tokenizer with LongCat's two markers: the `longcat` fixture). The non-streaming answers
and finish_reason equal vLLM's; any chunking aggregates to them but for hermes' documented case;
the render-side adjustments equal vLLM's; adversarial text never raises, state stays small.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.golden_checks import adjusted_request, flat, nonstream_message, per_token_run, streamed_messages
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.longcat_cases import END, OUTPUTS, START, TOOLS, S, W, call

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "longcat.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# (core/parsers/README.md, "Where streaming cannot equal the non-streaming answer": a call
# streamed before it turned malformed); vLLM's answer is then all content
STREAMED_THEN_BROKE = {"second_bad", "truncated_after_call", "truncated_in_call", "no_arguments", "end_in_value"}


def test_the_tokenizer_is_the_recorded_one(longcat):
    for record in RECORDS:
        assert longcat.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    assert set(OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(longcat, record):
    assert nonstream_message(longcat, record) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(longcat, record):
    expected, _ = nonstream_message(longcat, record)
    parsed = record["case"]["request"].get("tools") and record["case"]["request"].get("tool_choice") != "none"
    for got, finish_reason in streamed_messages(longcat, record, expected):
        if parsed and record["case"]["name"].split("__")[0] in STREAMED_THEN_BROKE:
            assert not expected["tool_calls"] and got["tool_calls"]
            continue
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(longcat, name):
    got, want = adjusted_request(longcat, GOLDEN["adjusted"][name])
    assert got == want


def test_markers_written_as_text_are_read_too(qwen3):
    """vLLM matches the markers in the text: Qwen3's own tokenizer, without them as tokens, finds the same call."""
    parser = make_parser(qwen3, None, "longcat", {"tools": TOOLS})
    _, content, calls = parser.parse_complete("Hi " + W, [], None)
    assert content == "Hi "
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [("get_weather", '{"city": "Tokyo", "days": 3}')]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = [START, END, "<tool_call>", "{", "}", '"name"', ": ", '"search"', '"arguments"', ", ", '{"query": "q"}',
          "3", "null", "东京", "😀", " ", "\n", '"', "<", "x", W, S, call('{"name": "search"}')]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none", "required"]))
def test_adversarial_text_streams_to_the_nonstream_answer(longcat, pieces, seed, choice):
    text = "".join(pieces)
    tok = longcat.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS, **({"tool_choice": choice} if choice else {})}
    _, content, calls = make_parser(longcat, None, "longcat", request).parse_complete(tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(longcat, None, "longcat", request), chunk_texts(longcat, ids, cuts), None)
    whole = stream(make_parser(longcat, None, "longcat", request), chunk_texts(longcat, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    got_calls = [(c["name"], c["arguments"]) for c in agg["tool_calls"]]
    assert (agg["content"], got_calls) == (whole["content"], [(c["name"], c["arguments"]) for c in whole["tool_calls"]])
    if not calls and agg["tool_calls"]:
        return  # hermes' documented case: a call broke after an earlier one went out
    assert agg["content"] == (content or "")
    assert got_calls == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_state_is_bounded_and_feed_cost_flat(longcat):
    args = json.dumps({f"p{i}": "v" * 40 for i in range(60)})
    text = "Answer text. " * 300 + call(f'{{"name": "search", "arguments": {args}}}') + W + " after" * 300
    costs, sizes = per_token_run(make_parser(longcat, None, "longcat", {"tools": TOOLS}), longcat, text)
    assert max(sizes) < 2000, max(sizes)
    assert flat(costs)
