"""minimax_m3 (reasoning, tools) against vLLM 0.33's MiniMax M3 parsers.

Goldens: tests/core/parsers/golden_frontier/minimax_m3.json (tests/oracle/record_minimax_m3.py,
in-process, on Qwen3's tokenizer with M3's three markers as added tokens: the `minimax_m3` fixture).
The non-streaming answers and finish_reason equal vLLM's; any chunking of any output aggregates to
them but for the documented cases (state through orjson between chunks, bounded); the render-side
adjustments and `is_reasoning_end` equal vLLM's; adversarial text never raises.
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
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.minimax_m3_cases import (
    NESTED,
    NS,
    OUTPUTS,
    TE,
    TOOLS,
    TS,
    S,
    W,
    block,
    el,
    invoke,
)

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "minimax_m3.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# (core/parsers/README.md, "vLLM 0.33 bugs we do not follow") thinking on, then a `<mm:think>` after
# text: vLLM's answer makes that text content, its stream (and ours) sent it as reasoning: ours is
# the stream's
VLLM_BUGS = {"text_before_think__both_auto_thinking"}


def test_the_tokenizer_is_the_recorded_one(minimax_m3):
    for record in RECORDS:
        assert minimax_m3.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    assert set(OUTPUTS) <= {r["case"]["name"].split("__")[0] for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(minimax_m3, record):
    ours = nonstream_message(minimax_m3, record)
    if record["case"]["name"] in VLLM_BUGS:  # (the stream test below checks ours is what the stream sends)
        assert ours[0] != record["message"] and ours[0]["tool_calls"] == record["message"]["tool_calls"]
        return
    assert ours == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(minimax_m3, record):
    expected, _ = nonstream_message(minimax_m3, record)
    for got, finish_reason in streamed_messages(minimax_m3, record, expected):
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == record["finish_reason"] or record["engine_finish_reason"] == "length"


@pytest.mark.parametrize("name", sorted(GOLDEN["adjusted"]))
def test_render_side_adjustments_equal_vllm(minimax_m3, name):
    got, want = adjusted_request(minimax_m3, GOLDEN["adjusted"][name])
    assert got == want  # (vLLM adjusts nothing for M3)


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(minimax_m3, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(minimax_m3, "minimax_m3", None, {}, recorded["chat_template_kwargs"])
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


def test_qwen3_tokenizer_is_refused_for_reasoning(qwen3):
    from core.parsers.pipeline import ChatOutputParser

    with pytest.raises(ValueError, match="could not locate think start/end tokens"):
        ChatOutputParser.check_supported(qwen3, "minimax_m3", "minimax_m3", True)


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = [TS, TE, NS, f"{NS}<tool_call>", f"{NS}</tool_call>", f"{NS}<invoke name=", '"', "'", ">", '">',
          f"{NS}</invoke>", f"{NS}<city>", f"{NS}</city>", f"{NS}<item>", f"{NS}</item>", f"{NS}<hours>",
          f"{NS}</hours>", f"{NS}<", f"{NS}</", "get_weather", "search", "Oslo", "3", "true", "东京", "😀", " ", "\n",
          "<", "x", "<|im_end|>", W, S, block(W), el("days", " 4 "), invoke("ping", "")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none", "required"]), kw=st.sampled_from([{}, {"thinking_mode": "enabled"}]),
       parsers=st.sampled_from([("minimax_m3", "minimax_m3"), (None, "minimax_m3"), ("minimax_m3", None)]))
def test_adversarial_text_never_raises_and_chunking_is_invariant(minimax_m3, pieces, seed, choice, kw, parsers):
    text = "".join(pieces)
    tok = minimax_m3.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS, **({"tool_choice": choice} if choice else {})}
    make_parser(minimax_m3, *parsers, request, kw).parse_complete(tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(minimax_m3, *parsers, request, kw), chunk_texts(minimax_m3, ids, cuts), None)
    whole = stream(make_parser(minimax_m3, *parsers, request, kw), chunk_texts(minimax_m3, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    assert (agg["reasoning"], agg["content"]) == (whole["reasoning"], whole["content"])
    assert [(c["name"], c["arguments"]) for c in agg["tool_calls"]] == \
        [(c["name"], c["arguments"]) for c in whole["tool_calls"]]
    if parsers == ("minimax_m3", None):  # the reasoning parser alone streams its non-streaming answer, any text
        reasoning, content, _ = make_parser(minimax_m3, *parsers, request, kw).parse_complete(tok.decode(ids), ids, None)
        assert (agg["reasoning"], agg["content"]) == (reasoning or "", content or "")


@pytest.mark.parametrize(("text", "want"), [("Intro. <mm:think>r</mm:think>c", ("Intro. r", "c")),
                                            ("a<mm:think>b<mm:think>c", ("ab<mm:think>c", None)),
                                            ("r</mm:think>c<mm:think>x", ("r", "c<mm:think>x"))])
def test_thinking_on_a_later_think_open_is_dropped_streaming_or_not(minimax_m3, text, want):
    """(README, "vLLM 0.33 bugs we do not follow") vLLM's answer makes the text before a later
    `<mm:think>` content; its stream, as ours, sent it as reasoning: ours is the stream's."""
    ids = minimax_m3.tokenizer.encode(text)
    kw = {"thinking_mode": "enabled"}
    assert make_parser(minimax_m3, "minimax_m3", None, {}, kw).parse_complete(text, ids, None)[:2] == want
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(minimax_m3, "minimax_m3", None, {}, kw), chunk_texts(minimax_m3, ids, cuts), None)
        assert (agg["reasoning"] or None, agg["content"] or None) == want


def test_state_is_bounded_and_feed_cost_flat(minimax_m3):
    text = (TS + "Reasoning about it. " * 300 + TE + "Answer text. " * 300
            + block(invoke("ping", "".join(el(f"p{i}", "v" * 40) for i in range(60))), NESTED))
    parser = make_parser(minimax_m3, "minimax_m3", "minimax_m3", {"tools": TOOLS})
    costs, sizes = per_token_run(parser, minimax_m3, text)
    # the current invoke's raw text (here ~4 KB) at most, nothing of the text before it
    assert max(sizes) < 6000, max(sizes)
    assert sizes[len(sizes) // 4] < 600
    assert flat(costs)


@pytest.mark.parametrize("text", ["</mm:think> a</mm:think><mm:think> b", "</mm:think>x<mm:think>r</mm:think>y"])
def test_a_leading_stray_closer_makes_all_the_rest_content_streamed_too(minimax_m3, text):
    """vLLM's answer returns at once after a leading `</mm:think>` (thinking off): a later
    `<mm:think>` is text, in the stream as well (the fuzz found the stream opening reasoning)."""
    ids = minimax_m3.tokenizer.encode(text)
    whole = make_parser(minimax_m3, "minimax_m3", None, {}).parse_complete(text, ids, None)[:2]
    assert whole == (None, text[len("</mm:think>"):])
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(minimax_m3, "minimax_m3", None, {}), chunk_texts(minimax_m3, ids, cuts), None)
        assert (agg["reasoning"], agg["content"]) == ("", whole[1])
