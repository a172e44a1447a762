"""k2_horizon (reasoning, tools) against vLLM 0.33's K2 Horizon parsers.

Goldens: tests/core/parsers/golden_frontier/k2_horizon.json (tests/oracle/record_k2_horizon.py,
in-process, on Qwen3's tokenizer plus K2 Horizon's tags and turn markers: the `k2_horizon`
fixture). The non-streaming answers and finish_reason equal vLLM's in the three tool-call formats
and the three reasoning efforts; any chunking aggregates to them but for the documented cases
(state through orjson between chunks, bounded by one call); the render-side adjustments (and
refusals) and `is_reasoning_end` equal vLLM's; adversarial text never raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import RequestError
from core.parsers.base import ParserContext
from core.parsers.families.k2_horizon import K2HorizonReasoningParser, K2HorizonToolParser
from core.protocol.chat import ChatCompletionRequest
from core.render import request_chat_kwargs
from tests.core.parsers.golden_checks import flat, nonstream_message, per_token_run, streamed_messages
from tests.core.parsers.helpers import chunk_texts, make_parser, stream
from tests.core.parsers.k2_horizon_cases import (
    CALL_CLOSE,
    CALL_OPEN,
    CALLS_CLOSE,
    CALLS_OPEN,
    EFFORT_OUTPUTS,
    FORMAT_OUTPUTS,
    KEY,
    KEY_END,
    OUTPUTS,
    THINK,
    THINK_END,
    TOOLS,
    TYPE,
    TYPE_END,
    VALUE,
    VALUE_END,
    S,
    W,
    call,
    group,
)

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "k2_horizon.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
EFFORT_TAGS = {"high": (THINK, THINK_END), "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
               "low": ("<ifm|think_faster>", "</ifm|think_faster>")}


def never_closed(text: str, kwargs: dict) -> bool:
    """(core/parsers/README.md, "vLLM 0.33 bugs we do not follow") neither the close tag nor
    `<ifm|tool_calls>`: both streams send reasoning, vLLM's answer is all content; ours reasoning."""
    end = EFFORT_TAGS[kwargs.get("reasoning_effort", "high")][1]
    return end not in text and CALLS_OPEN not in text


def calls_before_end(text: str, kwargs: dict) -> bool:
    """(the same section) a `<ifm|tool_calls>` before a later close tag: both streams switch to
    content there, vLLM's answer's reasoning runs to the close tag; ours is the stream's."""
    end = EFFORT_TAGS[kwargs.get("reasoning_effort", "high")][1]
    return -1 < text.find(CALLS_OPEN) < text.find(end)


# a group that fails after a call went out: vLLM's answer has no calls (the whole output content)
FAILS_AFTER_A_CALL = {"junk_in_group", "bad_call_after_good", "truncated_after_call", "truncated_after_calls"}


def fails_after_a_call(output: str, request: dict) -> bool:
    """(also a named tool_choice whose output calls another tool after it: that call fails the group)"""
    named = isinstance(request.get("tool_choice"), dict)
    return output in FAILS_AFTER_A_CALL or (named and output == "two_calls")


def test_the_tokenizer_is_the_recorded_one(k2_horizon):
    for record in RECORDS:
        assert k2_horizon.tokenizer.encode(record["case"]["text"]) == record["text_ids"]


def test_every_output_is_recorded():
    names = {r["case"]["name"].split("__")[0] for r in RECORDS}
    assert set(OUTPUTS) <= names
    assert all(set(outputs) <= names for outputs in [*FORMAT_OUTPUTS.values(), *EFFORT_OUTPUTS.values()])


def vllm_bug(case: dict) -> bool:
    """Our answer deliberately differs from vLLM's (the two reasoning shapes above)."""
    text, kwargs = case["text"], case["chat_template_kwargs"]
    return bool(case["reasoning_parser"]) and (never_closed(text, kwargs) or calls_before_end(text, kwargs))


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(k2_horizon, record):
    ours = nonstream_message(k2_horizon, record)
    if vllm_bug(record["case"]):  # (the stream test below checks ours is what the stream sends)
        assert ours[0]["reasoning"] != record["message"]["reasoning"]
        return
    assert ours == (record["message"], record["finish_reason"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(k2_horizon, record):
    case = record["case"]
    expected, finish = nonstream_message(k2_horizon, record)
    output = case["name"].split("__")[0]
    calls_kept = case["tool_parser"] and case["request"].get("tools") and case["request"].get("tool_choice") != "none"
    for got, finish_reason in streamed_messages(k2_horizon, record, expected):
        if calls_kept and got["tool_calls"] and fails_after_a_call(output, case["request"]):
            assert got["reasoning"] == expected["reasoning"] and got["tool_calls"] and not expected["tool_calls"]
            continue
        assert got == expected
        # (the helper ends every stream with "stop")
        assert finish_reason == finish or record["engine_finish_reason"] == "length"


def _adjusted(model, recorded: dict) -> dict:
    """Our parsers' adjust_request on the recorded request (the reasoning parser built with the
    request's own template kwargs, as vLLM's renderer builds it), or the refusal."""
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **recorded["request"])
    ctx = ParserContext(tokenizer=model.tokenizer, tools=[t.to_template() for t in request.tools or []] or None,
                        chat_template_kwargs=request_chat_kwargs(request))
    try:
        for name, cls in ((recorded["reasoning_parser"], K2HorizonReasoningParser),
                          (recorded["tool_parser"], K2HorizonToolParser)):
            if name is not None:
                request = cls(ctx).adjust_request(request)
    except RequestError as exc:
        assert exc.status == 400
        return {"error": f"ValueError: {exc.message}"}
    so = request.structured_outputs
    return {"skip_special_tokens": request.skip_special_tokens,
            "structural_tag": so.structural_tag if so is not None else None,
            "json": so.json_ if so is not None else None}


@pytest.mark.parametrize("name", sorted(GOLDEN["render"]))
def test_render_side_adjustments_and_refusals_equal_vllm(k2_horizon, name):
    recorded = GOLDEN["render"][name]
    want = {k: v for k, v in recorded.items() if k not in ("reasoning_parser", "tool_parser", "request")}
    assert _adjusted(k2_horizon, recorded) == want


@pytest.mark.parametrize("name", sorted(GOLDEN["is_reasoning_end"]))
def test_is_reasoning_end_equals_vllm(k2_horizon, name):
    recorded = GOLDEN["is_reasoning_end"][name]
    parser = make_parser(k2_horizon, "k2_horizon", None, {}, recorded["chat_template_kwargs"])
    assert parser.is_reasoning_end(recorded["prompt_token_ids"]) == recorded["is_reasoning_end"]


def test_a_tokenizer_without_the_think_tags_is_refused(qwen3):
    """vLLM looks the chosen effort's tags up in the vocabulary (a start-up error for the default)."""
    with pytest.raises(ValueError, match="k2_horizon reasoning parser could not locate"):
        K2HorizonReasoningParser(ParserContext(tokenizer=qwen3.tokenizer))


def test_the_tags_written_as_text_are_read_too(qwen3):
    """The tool parser reads text and looks nothing up: Qwen3's own tokenizer finds the same calls."""
    parser = make_parser(qwen3, None, "k2_horizon", {"tools": TOOLS})
    _, content, calls = parser.parse_complete("Hi " + group(W), [], None)
    assert content == "Hi "
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [("get_weather", '{"city": "Tokyo", "days": 3}')]


# -- adversarial: any text, any chunking, never raises; state small and JSON --------------------

PIECES = [THINK, THINK_END, "<ifm|think_fast>", "</ifm|think_fast>", CALLS_OPEN, CALLS_CLOSE, CALL_OPEN, CALL_CLOSE,
          KEY, KEY_END, TYPE, TYPE_END, VALUE, VALUE_END, "get_weather", "ping", "city", "days", "3", "string",
          "integer", '{"name": "ping"}', '{"name": "search", "arguments": {"query": 1}}', "Oslo", "东京", "😀",
          "<|ifm|im_end|>", " ", "\n", '"', "<", "</ifm|", "x", W, S, group(W), call("ping", {})]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), seed=st.integers(0, 2**16),
       choice=st.sampled_from([None, "none", "required"]),
       kwargs=st.sampled_from([{}, {"tool_call_format": "json"}, {"tool_call_format": "xml_typed"},
                               {"reasoning_effort": "medium"}]),
       parsers=st.sampled_from([("k2_horizon", "k2_horizon"), (None, "k2_horizon"), ("k2_horizon", None)]))
def test_adversarial_text_streams_to_the_nonstream_answer(k2_horizon, pieces, seed, choice, kwargs, parsers):
    text = "".join(pieces)
    tok = k2_horizon.tokenizer
    ids = tok.encode(text)
    request = {"tools": TOOLS, "chat_template_kwargs": kwargs, **({"tool_choice": choice} if choice else {})}
    reasoning, content, calls = make_parser(k2_horizon, *parsers, request, kwargs).parse_complete(
        tok.decode(ids), ids, None)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 8))) if len(ids) > 1 else []
    agg = stream(make_parser(k2_horizon, *parsers, request, kwargs), chunk_texts(k2_horizon, ids, cuts), None)
    whole = stream(make_parser(k2_horizon, *parsers, request, kwargs), chunk_texts(k2_horizon, ids, []), None)
    assert agg["max_state"] < 2048 + 4 * len(text)
    got_calls = [(c["name"], c["arguments"]) for c in agg["tool_calls"]]
    assert (agg["reasoning"], agg["content"], got_calls) == (
        whole["reasoning"], whole["content"], [(c["name"], c["arguments"]) for c in whole["tool_calls"]])
    assert agg["reasoning"] == (reasoning or "")
    if not calls and agg["tool_calls"]:
        return  # a group that failed after a call went out (documented)
    assert agg["content"] == (content or "")
    assert got_calls == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_state_is_bounded_and_feed_cost_flat(k2_horizon):
    big = call("ping", {f"p{i}": "v" * 40 for i in range(60)})
    text = ("Reasoning about it. " * 300 + THINK_END + "Answer text. " * 300 + group(big, W, S) + " after" * 300)
    parser = make_parser(k2_horizon, "k2_horizon", "k2_horizon", {"tools": TOOLS})
    costs, sizes = per_token_run(parser, k2_horizon, text)
    # the current call's text (here ~6 KB) at most, nothing of the text before it
    assert max(sizes) < len(big) + 600, max(sizes)
    assert sizes[-1] < 600 and sizes[len(sizes) // 4] < 600
    assert flat(costs)


@pytest.mark.parametrize(("text", "want"), [
    ("<ifm|think>Still thinking", ("Still thinking", None, [])),  # neither tag (vLLM: all content)
    # calls before the close tag (vLLM: all reasoning up to it); the text after the group is content
    ("r" + group(W) + "more" + THINK_END + "c", ("r", "more" + THINK_END + "c", ["get_weather"])),
])
def test_the_non_streaming_answer_is_what_the_stream_sends(k2_horizon, text, want):
    """(README, "vLLM 0.33 bugs we do not follow") vLLM's answer reads these otherwise than its own
    stream sends them; ours is the stream's, per token and whole."""
    ids = k2_horizon.tokenizer.encode(text)
    request = {"tools": TOOLS}
    reasoning, content, calls = make_parser(k2_horizon, "k2_horizon", "k2_horizon", request).parse_complete(
        text, ids, None)
    assert (reasoning, content, [c["function"]["name"] for c in calls]) == want
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(k2_horizon, "k2_horizon", "k2_horizon", request), chunk_texts(k2_horizon, ids, cuts),
                     None)
        assert (agg["reasoning"] or None, agg["content"] or None, [c["name"] for c in agg["tool_calls"]]) == want
