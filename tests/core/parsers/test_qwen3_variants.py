"""step3p5 (reasoning, tools) and nemotron_v3 (reasoning) against vLLM 0.33's parser engines.

Goldens: tests/core/parsers/golden_frontier/qwen3_variants.json (tests/oracle/record_qwen3_variants.py,
in-process on the oracle's tiny-qwen3, the same tokenizer as the `qwen3` fixture). Non-streaming
answers equal vLLM's but for nemotron_v3's swap (vLLM bugs we do not follow: after a closed
reasoning ours is what both streams send; for a reasoning never closed, what vLLM's stream sends,
the reasoning and then all of it again as content); any chunking aggregates to them.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import orjson
import pytest

from tests.core.parsers.golden_checks import flat
from tests.core.parsers.helpers import chunk_texts, id_shape, make_parser, stream

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "qwen3_variants.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# nemotron_v3 with force_nonempty_content, a reasoning never closed: vLLM's stream sends it, then all of
# it again as content, its answer swaps them; ours is that stream's sum (README, "vLLM 0.33 bugs we do
# not follow")
REPEATED = {"nemotron_v3:reasoning_only__force", "nemotron_v3:no_close__force"}
# after a closed reasoning (or with thinking off) vLLM still swaps a blank content, which its own
# stream, as ours, sent as it is: ours does not swap (README, "vLLM 0.33 bugs we do not follow")
VLLM_BUGS = {"nemotron_v3:empty_content__force"}


def _parser(model, case):
    # (recorded with the kwargs in the request too, as a client sends them)
    request = {**case["request"], "chat_template_kwargs": case["chat_template_kwargs"]}
    return make_parser(model, case["reasoning_parser"], case["tool_parser"], request, case["chat_template_kwargs"])


def _message(parser, model, ids):
    reasoning, content, calls = parser.parse_complete(model.tokenizer.decode(ids[:-1]), ids, None)
    return {"reasoning": reasoning, "content": content,
            "tool_calls": [{"id": id_shape(c["id"]), "name": c["function"]["name"],
                            "arguments": c["function"]["arguments"]} for c in calls]}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(qwen3, record):
    parser = _parser(qwen3, record["case"])
    got = _message(parser, qwen3, record["token_ids"])
    if record["case"]["name"] in VLLM_BUGS:  # (the stream test below checks ours is what the stream sends)
        assert got != record["message"]
        return
    if record["case"]["name"] in REPEATED:  # vLLM's stream instead, as ours repeats it
        theirs = record["vllm_stream"]
        repeated = theirs["reasoning"]
        # (vLLM's repeat also has the trailing whitespace its reasoning deltas dropped)
        assert repeated and theirs["content"].rstrip() == repeated and not theirs["tool_calls"]
        assert got == {"reasoning": repeated, "content": repeated, "tool_calls": []}
        assert parser.resolve_finish_reason("stop", False) == theirs["finish_reason"]
        return
    assert got == record["message"]
    assert parser.resolve_finish_reason("stop", bool(got["tool_calls"])) == record["finish_reason"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(qwen3, record):
    case = record["case"]
    ids = record["token_ids"][:-1]
    expected = _message(_parser(qwen3, case), qwen3, record["token_ids"])
    rng = random.Random(case["name"])
    for cuts in (list(range(1, len(ids))), [], rng.sample(range(1, len(ids)), min(4, len(ids) - 1))):
        agg = stream(_parser(qwen3, case), chunk_texts(qwen3, ids, cuts), None)
        got = {"reasoning": agg["reasoning"] or None, "content": agg["content"] or None,
               "tool_calls": [{"id": id_shape(c["id"]), "name": c["name"], "arguments": c["arguments"]}
                              for c in agg["tool_calls"]]}
        assert got == expected, cuts


def test_step3p5_ignores_enable_thinking_and_nemotron_does_not(qwen3):
    tool = [{"type": "function", "function": {"name": "f"}}]
    step = make_parser(qwen3, "step3p5", "step3p5", {"tools": tool}, {"enable_thinking": False})
    nemo = make_parser(qwen3, "nemotron_v3", None, {}, {"enable_thinking": False})
    assert step.is_reasoning_end([]) is False and nemo.is_reasoning_end([]) is True


def test_nemotron_v3_swaps_on_the_requests_own_kwargs_only(qwen3):
    """vLLM's swap (ours: the repeat of its stream) reads `request.chat_template_kwargs`: a server
    default does not swap."""
    text = "All of it is reasoning.\n"
    asked = make_parser(qwen3, "nemotron_v3", None, {"chat_template_kwargs": {"force_nonempty_content": True}},
                        {"force_nonempty_content": True})
    default = make_parser(qwen3, "nemotron_v3", None, {}, {"force_nonempty_content": True})
    assert asked.parse_complete(text, [], None)[:2] == ("All of it is reasoning.", "All of it is reasoning.")
    assert default.parse_complete(text, [], None)[:2] == ("All of it is reasoning.", None)


@pytest.mark.parametrize(("text", "kwargs", "want"), [
    ("All of it is reasoning.\n</think>\n\n", {"force_nonempty_content": True}, ("All of it is reasoning.", "\n\n")),
    ("r</think>", {"force_nonempty_content": True}, ("r", None)),
    ("\n\n", {"enable_thinking": False}, (None, "\n\n")),
])
def test_nemotron_v3_does_not_swap_what_the_stream_sent(qwen3, text, kwargs, want):
    """(README, "vLLM 0.33 bugs we do not follow") after a closed reasoning, or with thinking off,
    vLLM's answer swaps a blank content with the reasoning its own stream, as ours, had sent as
    they are: ours is the stream's, per token and whole."""
    ids = qwen3.tokenizer.encode(text)
    request = {"chat_template_kwargs": kwargs}
    assert make_parser(qwen3, "nemotron_v3", None, request, kwargs).parse_complete(text, ids, None)[:2] == want
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(qwen3, "nemotron_v3", None, request, kwargs), chunk_texts(qwen3, ids, cuts), None)
        assert (agg["reasoning"] or None, agg["content"] or None) == want


TOOL = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize(("text", "extra", "want"), [
    ("Still thinking about it.  \n", {}, ("Still thinking about it.", "Still thinking about it.")),
    ("Still thinking </thi", {}, ("Still thinking </thi", "Still thinking </thi")),
    ("Still thinking.", {"include_reasoning": False}, (None, "Still thinking.")),
    # (past the tool parser, as vLLM's stream: a forced choice makes no call of it)
    ("Still thinking.", {"tools": TOOL, "tool_choice": NAMED}, ("Still thinking.", "Still thinking.")),
    ("Still thinking.", {"tools": TOOL, "tool_choice": "required"}, ("Still thinking.", "Still thinking.")),
])
@pytest.mark.parametrize("tools", [None, "qwen3_coder"])
def test_nemotron_v3_repeats_a_reasoning_never_closed(qwen3, text, extra, want, tools):
    """(README, "vLLM 0.33 bugs we do not follow") force_nonempty_content and a reasoning never
    closed: vLLM's stream sends it, then all of it again as content; ours, per token, whole, with
    the finish alone in an empty last chunk, and the non-streaming answer, are that."""
    kwargs = {"force_nonempty_content": True}
    request = {**extra, "chat_template_kwargs": kwargs}
    ids = qwen3.tokenizer.encode(text)
    reasoning, content, calls = make_parser(qwen3, "nemotron_v3", tools, request, kwargs).parse_complete(text, ids, None)
    assert (reasoning, content, calls) == (*want, [])
    for cuts in (list(range(1, len(ids))), []):
        for last in ([], [("", [])]):
            chunks = chunk_texts(qwen3, ids, cuts) + last
            agg = stream(make_parser(qwen3, "nemotron_v3", tools, request, kwargs), chunks, None)
            assert (agg["reasoning"] or None, agg["content"], agg["tool_calls"]) == (*want, [])


def test_nemotron_v3_keeps_the_reasoning_sent_only_while_it_may_be_repeated(qwen3):
    """The state holds the reasoning sent (what the end would repeat) only with force_nonempty_content
    and only until the reasoning closes; the per-token cost stays flat meanwhile (the front door
    keeps the state in memory: one string extended in place)."""
    text = "thinking about it " * 600 + "</think>\n\n" + "answer " * 200
    tok = qwen3.tokenizer
    pieces = [(tok.decode([i], skip_special_tokens=False), [i]) for i in tok.encode(text)]
    for kwargs, grows in (({"force_nonempty_content": True}, True), ({}, False)):
        parser = make_parser(qwen3, "nemotron_v3", None, {"chat_template_kwargs": kwargs}, kwargs)
        state = parser.start(None)
        costs, sizes = [], []
        for piece, ids in pieces:
            t0 = time.perf_counter()
            parser.feed(state, piece, ids)
            costs.append(time.perf_counter() - t0)
            sizes.append(len(orjson.dumps(state)))
        closed = next(i for i, (piece, _) in enumerate(pieces) if piece == "</think>")
        # (this mode only: the state is the reasoning so far, then small again once it closed)
        assert (sizes[closed - 1] > len("thinking about it ") * 590) is grows
        assert max(sizes[closed:]) < 600
        assert flat(costs[:closed])
