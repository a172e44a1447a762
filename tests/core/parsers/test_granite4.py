"""granite4 (tools) and granite_thinking_parser (reasoning) against vLLM 0.33's Granite 4 parsers.

Goldens: tests/core/parsers/golden_frontier/granite4.json (tests/oracle/record_granite4.py,
in-process, on Qwen3's tokenizer with Granite 4's role markers: the `granite4` fixture). The
non-streaming answers and finish_reason equal vLLM's, but where force_nonempty_content makes vLLM's
stream repeat the reasoning as content (ours is that stream's sum); any chunking of any output
aggregates to them (state through orjson between chunks, bounded), but for the documented cases; the
render-side adjustments and `is_reasoning_end` equal vLLM's; adversarial text never raises.
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
from tests.core.parsers.granite4_cases import CALL, CALL2, OUTPUTS, TOOLS
from tests.core.parsers.helpers import chunk_texts, make_parser, stream

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "granite4.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# a later call fails after an earlier one went out (it cannot be taken back: core/parsers/README.md)
CALL_SENT_THEN_FAILED = {"bad_second_call__default"}
# force_nonempty_content, no content but newlines: vLLM's stream sends the reasoning, then all of it again
# as content; its answer swaps them (or, after `</think>\n\n`, has no content). Ours is that stream's
# sum (README, "vLLM 0.33 bugs we do not follow")
REPEATED = {"plain__force", "reasoning_only__force", "empty_content__force", "no_think_tags__force",
            "truncated_in_reasoning__force"}


def test_the_tokenizer_is_the_recorded_one(granite4):
    tok = granite4.tokenizer
    for record in RECORDS:
        assert tok.encode(record["case"]["text"]) == record["text_ids"]
    assert tok.token_to_id("<|end_of_text|>") == GOLDEN["eos_token_id"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(granite4, record):
    if record["case"]["name"] in REPEATED:  # vLLM's stream instead, as ours repeats it
        theirs = record["vllm_stream"]
        repeated = theirs["reasoning"]
        # (vLLM's repeat also has the trailing whitespace its reasoning deltas dropped)
        assert repeated and theirs["content"].rstrip() == repeated and not theirs["tool_calls"]
        assert nonstream_message(granite4, record) == (
            {"reasoning": repeated, "content": repeated, "tool_calls": []}, theirs["finish_reason"])
        return
    assert nonstream_message(granite4, record) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(granite4, record):
    name = record["case"]["name"]
    expected, _ = nonstream_message(granite4, record)
    for got, finish in streamed_messages(granite4, record, expected):
        if name in CALL_SENT_THEN_FAILED:
            assert got["reasoning"] == expected["reasoning"] and len(got["tool_calls"]) == 1
            continue
        assert got == expected
        assert finish == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(granite4, name):
    got, want = adjusted_request(granite4, GOLDEN["adjusted"][name])
    assert got == want  # (never a structural tag: vLLM has no tag model for granite4)


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(granite4, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(granite4, "granite_thinking_parser", None, {}, recorded["chat_template_kwargs"])
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


def test_every_output_is_recorded():
    names = {r["case"]["name"].split("__")[0] for r in RECORDS}
    assert set(OUTPUTS) <= names


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_ca", "</tool", "<|end_of_text|>",
          "<|start_of_role|>", '{"name": "search", "arguments": {"q": 1}}', '{"name": "get_weather", ',
          '"arguments": "x"}', '"arguments": null}', "{", "}", '"', "\\", "\n", "\n\n", " ", "Paris", "3",
          "天气", "😀", "<|im_end|>", "<", "x"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=40), seed=st.integers(0, 2**16),
       kw=st.sampled_from([{}, {"enable_thinking": False}, {"force_nonempty_content": True}]),
       choice=st.sampled_from([None, "auto", "none", "required"]),
       parsers=st.sampled_from([("granite_thinking_parser", "granite4"), ("granite_thinking_parser", None),
                                (None, "granite4")]))
def test_adversarial_text_streams_to_the_nonstream_answer(granite4, pieces, seed, kw, choice, parsers):
    text = "".join(pieces)
    ids = granite4.tokenizer.encode(text)
    request = {"tools": TOOLS, "chat_template_kwargs": kw, **({"tool_choice": choice} if choice else {})}
    parser = make_parser(granite4, *parsers, request, kw)
    reasoning, content, calls = parser.parse_complete(granite4.tokenizer.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(granite4, *parsers, request, kw), chunk_texts(granite4, ids, cuts), None)
    assert agg["max_state"] < 4096 + 4 * len(text)
    assert agg["reasoning"] == (reasoning or "")
    if len(agg["tool_calls"]) == len(calls) or choice == "required":
        # (a later call that failed after one went out cannot be taken back)
        assert agg["content"] == (content or "") or (content or "").strip() == "" == agg["content"].strip()
        assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
            [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    else:
        assert agg["tool_calls"] and not calls


def test_state_is_bounded_and_feed_cost_flat(granite4):
    """A long output: the state stays the same size whatever was already parsed (through orjson
    at every token), and the last feeds cost what the first did."""
    text = "<think>" + "thinking " * 400 + "</think>\n" + "answer " * 400 + CALL + " more " * 100 + CALL2
    parser = make_parser(granite4, "granite_thinking_parser", "granite4", {"tools": TOOLS})
    costs, sizes = per_token_run(parser, granite4, text)
    assert max(sizes) < 2048
    assert max(sizes[len(sizes) // 3: 2 * len(sizes) // 3]) < 600  # the plain-text middle: no growth
    assert flat(costs)


@pytest.mark.parametrize(("text", "extra", "want"), [
    ("<think>Still thinking about it.  \n", {}, ("Still thinking about it.", "Still thinking about it.")),
    ("<think>Done.</think>\n\n", {}, ("Done.", "Done.")),  # (vLLM's answer: no content; its stream repeats)
    ("Done.</think>", {"include_reasoning": False}, (None, "Done.")),
    # (past the tool parser, as vLLM's stream: a named choice makes no call of it)
    ("<think>Still thinking.", {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
     ("Still thinking.", "Still thinking.")),
    ("<think>Done.</think>  ", {}, ("Done.", "  ")),  # content other than newlines: not repeated
    ("<think>Done.</think>\nSunny.", {}, ("Done.", "Sunny.")),
])
def test_granite_thinking_repeats_a_reasoning_without_content(granite4, text, extra, want):
    """(README, "vLLM 0.33 bugs we do not follow") force_nonempty_content and no content but
    newlines: vLLM's reasoning never ends (its stream repeats it as content at the end); ours, per
    token, whole, with the finish alone in an empty last chunk, and the non-streaming answer, are that."""
    kwargs = {"force_nonempty_content": True}
    request = {"tools": TOOLS, **extra, "chat_template_kwargs": kwargs}
    ids = granite4.tokenizer.encode(text)
    parser = make_parser(granite4, "granite_thinking_parser", "granite4", request, kwargs)
    assert parser.parse_complete(text, ids, None) == (*want, [])
    for cuts in (list(range(1, len(ids))), []):
        for last in ([], [("", [])]):
            agg = stream(make_parser(granite4, "granite_thinking_parser", "granite4", request, kwargs),
                         chunk_texts(granite4, ids, cuts) + last, None)
            assert (agg["reasoning"] or None, agg["content"], agg["tool_calls"]) == (*want, [])
