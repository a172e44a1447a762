"""MiniMax M2 (`minimax_m2` tools and reasoning, `minimax_m2_append_think`) against vLLM 0.33.

* goldens (tests/core/parsers/golden_frontier/minimax.json, recorded in-process from vLLM 0.33 by
  tests/oracle/record_minimax.py on the `minimax` fixture's tokenizer): our non-streaming answer
  through the chat pipeline equals vLLM's message and finish_reason, but for the leading
  whitespace of the content with calls (a vLLM bug we do not follow, `LEADING_WS`);
* any chunking aggregates to that answer (state JSON round-tripped between feeds), except where a
  call streamed before it turned malformed (core/parsers/README.md);
* adversarial text never raises and is chunking-invariant; the state stays bounded by the current
  call, the per-token cost flat.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.golden_checks import leading_whitespace_kept
from tests.core.parsers.helpers import chunk_texts, id_shape, make_parser, stream
from tests.core.parsers.minimax_cases import END, START, TOOLS, R, W, block, invoke, param

# a parameter name written twice: vLLM's answer keeps the last value in the first one's place, its
# stream sent the first and then stops (`{"city": "A", "days": `); ours keeps both as written,
# streaming and not, which a JSON reader reads as vLLM's answer (core/parsers/README.md, "vLLM 0.33 bugs")
WRITTEN_TWICE = "duplicate_param"
GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "minimax.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# (core/parsers/README.md, "vLLM 0.33 bugs we do not follow") vLLM strips the content's leading
# whitespace when calls are found; ours keeps it, as both streams send it
LEADING_WS = {"content_call", "text_around", "unknown_tool", "unicode", "special_tokens"}


def _parser(model, case):
    return make_parser(model, case["reasoning_parser"], case["tool_parser"], case["request"],
                       case["chat_template_kwargs"])


def _text_ids(record):
    ids = record["token_ids"]
    return ids[:-1] if record["engine_finish_reason"] == "stop" else ids


def _message(parser, model, record):
    reasoning, content, calls = parser.parse_complete(model.tokenizer.decode(_text_ids(record)),
                                                      record["token_ids"], None)
    return {"reasoning": reasoning, "content": content,
            "tool_calls": [{"id": id_shape(c["id"]), "name": c["function"]["name"],
                            "arguments": c["function"]["arguments"]} for c in calls]}


def _calls(agg):
    return [{"id": id_shape(c["id"]), "name": c["name"], "arguments": c["arguments"]} for c in agg["tool_calls"]]


def explained(expected: dict, got: dict) -> str | None:
    """The documented reason a stream may differ from the non-streaming answer
    (core/parsers/README.md, "Where streaming cannot equal the non-streaming answer"), or None."""
    if got["reasoning"] != expected["reasoning"]:
        return None
    if got["content"] != expected["content"]:
        return None
    want = [(c["id"], c["name"]) for c in expected["tool_calls"]]
    if [(c["id"], c["name"]) for c in got["tool_calls"]][:len(want)] != want:
        return None
    # each call's arguments: the stream sent part of a value never ended (not JSON then, or JSON
    # with that value)
    for a, b in zip(expected["tool_calls"], got["tool_calls"]):
        if a["arguments"] == b["arguments"]:
            continue
        try:
            theirs = json.loads(b["arguments"])
        except ValueError:
            continue
        ours = json.loads(a["arguments"])
        if not isinstance(theirs, dict) or not set(ours) <= set(theirs):
            return None
    return "a call streamed before it turned malformed"


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(minimax, record):
    parser = _parser(minimax, record["case"])
    got = _message(parser, minimax, record)
    if record["case"]["name"].split("__")[0] in LEADING_WS and got != record["message"]:
        assert leading_whitespace_kept(got, record["message"])
        got = record["message"]
    if record["case"]["name"].startswith(WRITTEN_TWICE):
        theirs = record["message"]
        assert got != theirs and (got["reasoning"], got["content"]) == (theirs["reasoning"], theirs["content"])
        assert [json.loads(c["arguments"]) for c in got["tool_calls"]] == \
            [json.loads(c["arguments"]) for c in theirs["tool_calls"]]
        assert all(c["arguments"] == '{"city": "A", "days": 1, "city": "B"}' for c in got["tool_calls"])
        return
    assert got == record["message"]
    assert parser.resolve_finish_reason(record["engine_finish_reason"], bool(got["tool_calls"])) == \
        record["finish_reason"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(minimax, record):
    case = record["case"]
    expected = _message(_parser(minimax, case), minimax, record)
    ids = _text_ids(record)
    rng = random.Random(case["name"])
    for cuts in (list(range(1, len(ids))), [], rng.sample(range(1, max(2, len(ids))), min(4, max(0, len(ids) - 1)))):
        parser = _parser(minimax, case)
        agg = stream(parser, chunk_texts(minimax, ids, cuts), None)
        got = {"reasoning": agg["reasoning"] or None, "content": agg["content"] or None, "tool_calls": _calls(agg)}
        if parser.forced and got["content"] is None:
            got["content"] = ""
        if not parser.keeps_calls:
            got["tool_calls"] = []
        if parser.choice != "named" and not parser.parallel:
            got["tool_calls"] = got["tool_calls"][:1]
        if got != expected:
            reason = explained(expected, got)
            assert reason is not None, (cuts, got, expected)
            if reason.startswith("a call streamed"):
                assert case["name"].split("__")[0] in MALFORMED, (cuts, got, expected)
        assert parser.finish_reason({"ts": bool(got["tool_calls"])}, record["engine_finish_reason"]) == \
            record["finish_reason"]


# outputs whose stream sent part of a call that then turned malformed (the README's first case)
MALFORMED = {"unclosed_last_param", "truncated_value", "truncated_invoke"}


def test_append_think_honours_a_prompt_that_closed_reasoning(minimax):
    """vLLM's stream never asks the parser when the prompt closed reasoning: no `<think>` then;
    our non-streaming answer reads the prompt the same way (vLLM's does not: README)."""
    tok = minimax.tokenizer
    closed, opened = tok.encode("<think>\nx</think>\n\n"), tok.encode("<think>\n")
    ids = tok.encode("Answer. <minimax:tool_call>")
    for prompt, content in ((closed, "Answer. <minimax:tool_call>"), (opened, "<think>Answer. <minimax:tool_call>"),
                            (None, "<think>Answer. <minimax:tool_call>")):
        parser = make_parser(minimax, "minimax_m2_append_think", None, {})
        assert parser.parse_complete(tok.decode(ids), ids, prompt)[:2] == (None, content)
        for cuts in ([], list(range(1, len(ids)))):
            parser = make_parser(minimax, "minimax_m2_append_think", None, {})
            agg = stream(parser, chunk_texts(minimax, ids, cuts), prompt)
            assert (agg["reasoning"], agg["content"]) == ("", content)
    parser = make_parser(minimax, "minimax_m2_append_think", None, {})
    assert parser.is_reasoning_end(closed) and not parser.is_reasoning_end(opened)


def test_reasoning_ends_at_think_end_or_block(minimax):
    tok = minimax.tokenizer
    parser = make_parser(minimax, "minimax_m2", "minimax_m2", {"tools": TOOLS})
    assert parser.is_reasoning_end(tok.encode("x</think>"))
    assert parser.is_reasoning_end(tok.encode("x" + START))
    assert not parser.is_reasoning_end(tok.encode("x</think>y<think>z"))
    assert not parser.is_reasoning_end([])


@pytest.mark.parametrize("name", sorted(GOLDEN["render"]))
def test_adjust_request_equals_vllm(minimax, name):
    """The structural tag (vLLM's own "minimax" model), JSON constraint and skip_special_tokens
    vLLM 0.33's adjust_request sets, for strict tools and forced choices."""
    from core.protocol.chat import ChatCompletionRequest

    rec = GOLDEN["render"][name]
    parser = make_parser(minimax, rec["reasoning_parser"], rec["tool_parser"], rec["request"])
    req = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **rec["request"])
    for family in (parser.reasoning, parser.tools):
        if family is not None:
            req = family.adjust_request(req)
    so = req.structured_outputs
    assert (so.structural_tag if so else None) == rec["structural_tag"]
    assert (so.model_dump(by_alias=True).get("json") if so else None) == rec["json"]
    assert req.skip_special_tokens == rec["skip_special_tokens"]


_PIECES = [START, END, "<invoke name=", '<invoke name="', "<invoke name='", '">', "'>", ">", "</invoke>",
           "<parameter name=", '<parameter name="', "</parameter>", "< parameter name = ", "</ parameter >",
           "<think>", "</think>", "get_weather", "set_config", "city", "days", "i", "o", "42", "Oslo", "東京",
           "[1, 2]", '{"k": ', "\n", " ", "x<y", '"', "'", "<", "/", "<|im_end|>"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_adversarial_text_never_raises_and_chunking_is_invariant(minimax, data):
    good = [block(W), invoke("set_config", {"i": "1", "o": '{"k": [1]}'}), param("city", "A")]
    text = "".join(data.draw(st.lists(st.sampled_from(_PIECES + good), max_size=30)))
    tok = minimax.tokenizer
    ids = tok.encode(text)
    flags = data.draw(st.sampled_from([("minimax_m2", "minimax_m2"), (None, "minimax_m2"),
                                       ("minimax_m2_append_think", "minimax_m2")]))
    request = data.draw(st.sampled_from([{"tools": TOOLS}, {"tools": TOOLS, "tool_choice": "none"}]))

    def run(cuts):
        return stream(make_parser(minimax, *flags, request), chunk_texts(minimax, ids, cuts), None)

    whole = run([])
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=max(1, len(ids))), max_size=6))
    split = run(cuts)
    for key in ("reasoning", "content", "finish_reason"):
        assert split[key] == whole[key], key
    assert [(c["name"], c["arguments"]) for c in split["tool_calls"]] == \
        [(c["name"], c["arguments"]) for c in whole["tool_calls"]]
    # and the non-streaming answer, or a documented difference
    parser = make_parser(minimax, *flags, request)
    reasoning, content, calls = parser.parse_complete(tok.decode(ids), ids, None)
    expected = {"reasoning": reasoning, "content": content,
                "tool_calls": [{"id": None, "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                               for c in calls]}
    got = {"reasoning": split["reasoning"] or None, "content": split["content"] or None,
           "tool_calls": [{"id": None, "name": c["name"], "arguments": c["arguments"]} for c in split["tool_calls"]]}
    if got != expected:
        assert explained(expected, got) is not None, (text, got, expected)


def test_state_is_bounded_and_feed_cost_flat(minimax):
    params = {f"p{i}": "v" * 40 for i in range(60)}
    text = "Reasoning about it. " * 300 + "</think>" + "Answer text. " * 300 + block(invoke("ping", params))
    parser = make_parser(minimax, "minimax_m2", "minimax_m2", {"tools": TOOLS})
    state = parser.start(None)
    tok = minimax.tokenizer
    costs, sizes = [], []
    for i, tid in enumerate(tok.encode(text)):
        piece = tok.decode([tid], skip_special_tokens=False)
        t0 = time.perf_counter()
        parser.feed(state, piece, [tid])
        costs.append(time.perf_counter() - t0)
        if i % 25 == 0:
            sizes.append(len(orjson.dumps(state)))
    parser.finish(state)
    # the engine families keep the current call's raw text (here ~4 KB), nothing of the text before
    assert max(sizes) < 6000, max(sizes)
    n = len(costs) // 10
    assert sorted(costs[-n:])[n // 2] < sorted(costs[:n])[n // 2] * 5 + 20e-6


@pytest.mark.parametrize("args", [({"days": "3", "city": "A"}, '{"days": 3, "city": "A", "days": 4}'),
                                  ({"s": "x"}, '{"s": "x", "s": "4"}')])
def test_a_parameter_name_written_twice_streams_the_non_streaming_answer(minimax, args):
    """Both values kept as written (the second typed by the schema too), one token per chunk or one chunk."""
    first, want = args
    tool = "get_weather" if "days" in first else "set_config"
    again = param(next(iter(first)), "4")
    text = R + block(invoke(tool, first).replace("\n</invoke>", "\n" + again + "\n</invoke>"))
    ids = minimax.tokenizer.encode(text)
    parser = make_parser(minimax, "minimax_m2", "minimax_m2", {"tools": TOOLS})
    _, content, calls = parser.parse_complete(text, ids, None)
    assert [c["function"]["arguments"] for c in calls] == [want]
    for cuts in (list(range(1, len(ids))), []):
        parser = make_parser(minimax, "minimax_m2", "minimax_m2", {"tools": TOOLS})
        agg = stream(parser, chunk_texts(minimax, ids, cuts), None)
        assert (agg["content"] or None, _calls(agg)[0]["arguments"]) == (content, want)
