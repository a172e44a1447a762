"""olmo3 (reasoning, tools) against vLLM 0.33's Olmo3ReasoningParser and Olmo3PythonicToolParser.

Goldens: tests/core/parsers/golden_frontier/olmo3.json (reasoning) and olmo3_tools.json (the tool
parser alone and behind the reasoning), tests/oracle/record_olmo3.py, in-process, on Qwen3's
tokenizer without its think tokens (the `olmo3` fixture). The non-streaming answers and
finish_reason equal vLLM's but for three vLLM bugs we do not follow (reasoning never closed: ours
is reasoning, as streamed; `vllm_bug`: the text before a block of calls, a call list without tags
whose calls span lines); any chunking aggregates to them;
`adjust_request` and `is_reasoning_end` equal vLLM's; adversarial text never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.parsers.base import ParserContext
from core.parsers.families.olmo3 import Olmo3ReasoningParser
from tests.core.parsers.golden_checks import (
    adjusted_request,
    flat,
    nonstream_message,
    per_token_run,
    streamed_messages,
    text_before_block_kept,
)
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.olmo3_cases import CALL_TOOLS, CLOSE, OPEN, OUTPUTS, TOOL_OUTPUTS, S, W, block

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "olmo3.json").read_text(encoding="utf-8"))
TOOLS_GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "olmo3_tools.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"] + TOOLS_GOLDEN["records"]
ADJUSTED = {**GOLDEN["adjusted"], **TOOLS_GOLDEN["adjusted"]}


def never_closed(text: str) -> bool:
    """(core/parsers/README.md, "vLLM 0.33 bugs we do not follow") no `</think>`: vLLM's answer is
    all content, its stream and ours send reasoning, our answer is that reasoning."""
    return "</think>" not in text


def tool_text(case: dict) -> str:
    """What the tool parser reads: the content after the olmo3 reasoning split, or the output."""
    text = case["text"]
    return text.split("</think>", 1)[1] if case["reasoning_parser"] and "</think>" in text else text


# a call list without tags whose call spans lines: content (vLLM's joined lines still parse)
SPANS_LINES = {"bare_call_closed_next_line"}


def vllm_bug(case: dict, ours: dict, vllm: dict) -> bool:
    """(core/parsers/README.md, "vLLM 0.33 bugs we do not follow") our message differs from vLLM's
    only where it keeps what both streams send as content: the text before a block of calls, or
    a call list without the tags whose call spans lines."""
    text = tool_text(case)
    if text_before_block_kept(text, OPEN, ours, vllm):
        return True
    return (case["name"].split("__")[0] in SPANS_LINES and bool(vllm["tool_calls"])
            and ours == {"reasoning": vllm["reasoning"], "content": text, "tool_calls": []})


def test_the_tokenizer_is_the_recorded_one(olmo3):
    for record in RECORDS:
        assert olmo3.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    assert set(OUTPUTS) | set(TOOL_OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(olmo3, record):
    message, finish_reason = nonstream_message(olmo3, record)
    text = record["case"]["text"]
    if record["case"]["reasoning_parser"] and never_closed(text) and text:
        # vLLM: no reasoning (the text is content, or calls); ours: the same text as reasoning (a
        # leading <think> dropped), no content, no calls
        assert record["message"]["reasoning"] is None
        assert (message, finish_reason) == ({"reasoning": text.removeprefix("<think>") or None, "content": None,
                                             "tool_calls": []}, record["engine_finish_reason"])
        return
    if message != record["message"]:
        assert vllm_bug(record["case"], message, record["message"])
        if not message["tool_calls"]:  # (no call: the engine's finish_reason)
            assert finish_reason == record["engine_finish_reason"]
            return
        message = record["message"]
    assert (message, finish_reason) == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(olmo3, record):
    expected, want_finish = nonstream_message(olmo3, record)
    for got, finish_reason in streamed_messages(olmo3, record, expected):
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == want_finish or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(ADJUSTED))
def test_render_side_adjustments_equal_vllm(olmo3, name):
    got, want = adjusted_request(olmo3, ADJUSTED[name])
    assert got == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(olmo3, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(olmo3, "olmo3", None, {})
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = ["<think>", "</think>", "<", "</", "<th", "ink>", "think", ">", "/", "r", "c", " ", "\n", "东京", "😀",
          "<|im_end|>", "</think >", "<function_calls>"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16))
def test_adversarial_text_streams_to_the_nonstream_answer(olmo3, pieces, seed):
    tok = olmo3.tokenizer
    ids = tok.encode("".join(pieces))
    text = tok.decode(ids)
    reasoning, content, _ = make_parser(olmo3, "olmo3", None, {}).parse_complete(text, ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(olmo3, "olmo3", None, {}), chunk_texts(olmo3, ids, cuts), None)
    assert agg["max_state"] < 200
    assert (agg["reasoning"], agg["content"]) == (reasoning or "", content or "")


@pytest.mark.parametrize("text", ["<think>Still thinking", "No think tags at all", 'get_weather(city="x")'])
def test_reasoning_never_closed_is_reasoning_streaming_or_not(olmo3, text):
    """(README, "vLLM 0.33 bugs we do not follow") vLLM's answer would be content (or calls): ours is
    what the stream sends, per token and whole, the tool parser behind it or not."""
    ids = olmo3.tokenizer.encode(text)
    want = (text.removeprefix("<think>"), "", [])
    for parsers in (("olmo3", None), ("olmo3", "olmo3")):
        request = {"tools": CALL_TOOLS}
        reasoning, content, calls = make_parser(olmo3, *parsers, request).parse_complete(text, ids, None)
        assert (reasoning, content or "", calls) == want
        for cuts in (list(range(1, len(ids))), []):
            agg = stream(make_parser(olmo3, *parsers, request), chunk_texts(olmo3, ids, cuts), None)
            assert (agg["reasoning"], agg["content"], agg["tool_calls"]) == want


def test_state_is_bounded_and_feed_cost_flat(olmo3):
    text = "<think>" + "Reasoning about it. " * 400 + "</think>" + "Answer text. " * 400
    costs, sizes = per_token_run(make_parser(olmo3, "olmo3", None, {}), olmo3, text)
    assert max(sizes) < 200, max(sizes)
    assert flat(costs)


def test_a_tokenizer_without_the_pieces_is_refused():
    """vLLM looks the `</think>` pieces up at start-up (a KeyError there): ours refuses too."""

    class NoPieces:
        def token_to_id(self, token: str) -> int | None:
            return {"</": 1, "think": 2}.get(token)

    with pytest.raises(ValueError, match="olmo3 reasoning parser"):
        Olmo3ReasoningParser(ParserContext(tokenizer=NoPieces()))  # type: ignore[arg-type]


# -- tools ------------------------------------------------------------------------------------

def test_blocks_of_calls_stream_whole(olmo3):
    """The calls go out when the block closes, each whole, and nothing after the block."""
    parser = make_parser(olmo3, "olmo3", "olmo3", {"tools": CALL_TOOLS})
    state = parser.start(None)
    deltas = [parser.feed(state, piece, []) for piece in ("r</think>", OPEN, "\n" + W + "\n", S, "\n" + CLOSE, "tail")]
    assert not any(d and d["tool_calls"] for d in deltas[:4])
    assert [c["function"]["name"] for c in deltas[4]["tool_calls"]] == ["get_weather", "search"]
    assert deltas[5] is None and parser.finish(state) is None


TOOL_PIECES = [OPEN, CLOSE, "<function", "</think>", "\n", " ", "get_weather(", "ping()", "search(", "city=",
               "query=", '"Paris"', "'x'", "3", "true", "None", ")", ",", "(", "[", "]", "x", "Sure.", "东京", "😀",
               "<|im_end|>", W, S, block(W), "functions.ping()"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(TOOL_PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none"]), parsers=st.sampled_from([("olmo3", "olmo3"), (None, "olmo3")]))
def test_adversarial_tool_text_streams_to_the_nonstream_answer(olmo3, pieces, seed, choice, parsers):
    tok = olmo3.tokenizer
    ids = tok.encode("".join(pieces))
    text = tok.decode(ids)
    request = {"tools": CALL_TOOLS, **({"tool_choice": choice} if choice else {})}
    reasoning, content, calls = make_parser(olmo3, *parsers, request).parse_complete(text, ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(olmo3, *parsers, request), chunk_texts(olmo3, ids, cuts), None)
    whole = stream(make_parser(olmo3, *parsers, request), chunk_texts(olmo3, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    got_calls = [(c["name"], c["arguments"]) for c in agg["tool_calls"]]
    assert (agg["reasoning"], agg["content"], got_calls) == (
        whole["reasoning"], whole["content"], [(c["name"], c["arguments"]) for c in whole["tool_calls"]])
    assert agg["reasoning"] == (reasoning or "")
    want_calls = [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    assert (agg["content"], got_calls) == (content or "", want_calls)


def test_tool_state_is_bounded_and_feed_cost_flat(olmo3):
    text = ("Reasoning about it. " * 300 + "</think>" + "Answer text. " * 300 + block(W, S, "ping()")
            + " after" * 300)
    parser = make_parser(olmo3, "olmo3", "olmo3", {"tools": CALL_TOOLS})
    costs, sizes = per_token_run(parser, olmo3, text)
    # the block's text at most (vLLM reads it whole), nothing of the text before or after it
    assert max(sizes) < 600, max(sizes)
    assert flat(costs)
