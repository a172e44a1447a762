"""gpt-oss (Harmony) output parsing: `--reasoning-parser openai_gptoss --tool-call-parser openai`.

* goldens (tests/core/parsers/golden_frontier/harmony.json, recorded in-process from vLLM 0.33's
  `HarmonyParser` by tests/oracle/record_harmony_parser.py): our non-streaming answer through the
  chat pipeline equals vLLM's message and finish_reason;
* any chunking of the token ids aggregates to that answer (state JSON round-tripped between feeds);
* our token machine against openai-harmony's own `StreamableParser` (the library vLLM runs),
  driven the way vLLM drives it, on generated token sequences (hypothesis);
* adversarial ids never raise; the state stays small and each feed costs the same.
"""

from __future__ import annotations

import functools
import json
import random
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.parsers.families import harmony
from tests.core.parsers.helpers import chunk_texts, id_shape, make_parser, stream
from tests.frontier_models import gptoss_model

GOLDEN = json.loads((Path(__file__).parent / "golden_frontier" / "harmony.json").read_text(encoding="utf-8"))
RECORDS = GOLDEN["records"]
# arguments cut off (or broken) after their canonical start went out: the stream cannot take back
# `{"city": "Tok` for vLLM's non-streaming raw `{"city":"Tok`
STREAM_CANNOT_MATCH = {"truncated_in_args__auto"}


@pytest.fixture(scope="module")
def gptoss():
    return gptoss_model()


def _parser(model, record):
    case = record["case"]
    return make_parser(model, case["reasoning_parser"], case["tool_parser"], case["request"])


def _message(parser, ids):
    reasoning, content, calls = parser.parse_complete("", ids, None)
    return {"reasoning": reasoning, "content": content,
            "tool_calls": [{"id": id_shape(c["id"]), "name": c["function"]["name"],
                            "arguments": c["function"]["arguments"]} for c in calls]}


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_nonstream_equals_vllm(gptoss, record):
    parser = _parser(gptoss, record)
    got = _message(parser, record["token_ids"])
    expected = record["message"]
    assert got == expected
    finish = parser.resolve_finish_reason(record["engine_finish_reason"], bool(got["tool_calls"]))
    assert finish == record["finish_reason"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["case"]["name"] for r in RECORDS])
def test_any_chunking_aggregates_to_the_nonstream_answer(gptoss, record):
    ids = record["token_ids"]
    expected = _message(_parser(gptoss, record), ids)
    rng = random.Random(record["case"]["name"])
    chunkings = [list(range(1, len(ids))), [], rng.sample(range(1, max(2, len(ids))), min(5, max(0, len(ids) - 1)))]
    for cuts in chunkings:
        parser = _parser(gptoss, record)
        agg = stream(parser, chunk_texts(gptoss, ids, cuts), None)
        got = {"reasoning": agg["reasoning"] or None, "content": agg["content"] or None,
               "tool_calls": [{"id": id_shape(c["id"]), "name": c["name"], "arguments": c["arguments"]}
                              for c in agg["tool_calls"]]}
        if record["case"]["name"] in STREAM_CANNOT_MATCH:
            assert [c["name"] for c in got["tool_calls"]] == [c["name"] for c in expected["tool_calls"]]
            continue
        if parser.forced and got["content"] is None:
            got["content"] = ""  # a forced choice's null content is "" in the message (as vLLM)
        assert got == expected, cuts
        assert agg["finish_reason"] == parser.resolve_finish_reason("stop", bool(expected["tool_calls"]))


def test_vllm_stream_differs_where_documented():
    """What the recordings show of vLLM's own stream: messages concatenated without "\\n"."""
    by_name = {r["case"]["name"]: r for r in RECORDS}
    record = by_name["multiple_finals__auto"]
    assert record["message"]["content"] == "Part one.\nPart two."
    assert record["vllm_stream"]["content"] == "Part one.Part two."
    call = by_name["reasoning_then_call__auto"]
    assert call["message"]["tool_calls"][0]["arguments"] == '{"city": "Tokyo", "unit": "c"}'
    assert call["vllm_stream"]["tool_calls"][0]["arguments"] == '{"city":"Tokyo","unit":"c"}'


# -- against openai-harmony's StreamableParser ------------------------------------------------


@functools.cache
def _encoding():
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def _reference(tokenizer, ids, *, tools=True, reasoning=True):
    """vLLM 0.33's HarmonyParser.parse, with openai-harmony as the token machine."""
    from openai_harmony import HarmonyError, Role, StreamableParser

    parser = StreamableParser(_encoding(), Role.ASSISTANT)
    pending, seen, messages = [], 0, []
    for tid in ids:
        try:
            parser.process(tid)
        except HarmonyError:
            continue
        done = parser.messages
        if len(done) > seen:
            messages.extend(m.to_dict() for m in done[seen:])
            seen = len(done)
            pending = []
        else:
            pending.append(tid)
    try:
        parser.process_eos()
        messages.extend(m.to_dict() for m in parser.messages[seen:])
    except HarmonyError:
        messages.append({"role": "assistant", "channel": "final",
                         "content": [{"type": "text", "text": tokenizer.decode(pending)}]})
    out = {"r": [], "c": [], "t": []}
    for m in messages:
        text = m["content"][0]["text"] if m.get("content") else ""
        if m["role"] != "assistant":
            continue
        header = {"role": "assistant", "channel": m.get("channel"),
                  "recipient": harmony._normalize_recipient(m.get("recipient")), "content_type": None}
        kind = harmony.message_kind(header)
        if kind == "t" and tools:
            out["t"].append((header["recipient"].removeprefix("functions."), text, m.get("content_type")))
        elif (kind == "r" and reasoning and text) or (kind == "c" and text):
            out[kind].append(text)
    return out


TEXT_PIECES = ["analysis", "final", "commentary", " to=functions.get_weather", " to=python", " to=functions.", " to=assistant", "nobody",
               " json", "json", " code", "assistant", "user", "tool", " ", "\n", "hello", "Hi there.",
               '{"city":', ' "Oslo"', "}", "[1, 2", "é", "東京", "🌞", "x y", "to=get_time", "<", "a<|b"]
SPECIAL_IDS = [200002, 200003, 200005, 200006, 200007, 200008, 200012, 199998, 199999, 200018, 200100, 200007]


@pytest.fixture(scope="module")
def pieces(gptoss):
    tok = gptoss.tokenizer
    out = [[i] for i in SPECIAL_IDS] + [tok.encode(p) for p in TEXT_PIECES]
    # single bytes of multi-byte characters: ids whose text is a partial UTF-8 sequence
    for ch in "é東🌞":
        out += [[tok.token_to_id(harmony_bytes_piece(b))] for b in ch.encode()]
    return out


def harmony_bytes_piece(byte: int) -> str:
    return {v: k for k, v in harmony._BYTE_DECODER.items()}[byte]


def _structured(pieces_idx):
    """Mostly well-formed Harmony, with noise: the machine's paths all get exercised."""
    return st.lists(st.sampled_from(pieces_idx), min_size=0, max_size=40)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_machine_equals_openai_harmony(gptoss, pieces, data):
    shapes = [[200005, *gptoss.tokenizer.encode("analysis"), 200008],
              [200006, *gptoss.tokenizer.encode("assistant"), 200005, *gptoss.tokenizer.encode("final"), 200008],
              [200006, *gptoss.tokenizer.encode("assistant"), 200005,
               *gptoss.tokenizer.encode("commentary to=functions.get_weather"), 200003,
               *gptoss.tokenizer.encode("json"), 200008],
              [200006, *gptoss.tokenizer.encode("functions.get_weather to=assistant"), 200005,
               *gptoss.tokenizer.encode("commentary"), 200008],
              [200006, *gptoss.tokenizer.encode("nobody"), 200005, *gptoss.tokenizer.encode("final"), 200008]]
    choices = pieces + shapes * 4
    parts = data.draw(st.lists(st.sampled_from(choices), max_size=30))
    ids = [i for p in parts for i in p]
    tools, reasoning = data.draw(st.booleans()), True
    ref = _reference(gptoss.tokenizer, ids, tools=tools, reasoning=reasoning)
    machine = harmony.HarmonyMachine(gptoss.tokenizer, harmony.new_machine(), tools=tools, reasoning=reasoning,
                                     exact=True)
    machine.feed(ids)
    machine.finish()
    assert "".join(t for k, t in machine.out if k == "r") == "\n".join(ref["r"])
    assert "".join(t for k, t in machine.out if k == "c") == "\n".join(ref["c"])
    calls = harmony.parse_messages(gptoss.tokenizer, ids, tools=tools, reasoning=reasoning)[2] or []
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (name, harmony.canonical_arguments(text, ct)) for name, text, ct in ref["t"]]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_adversarial_ids_never_raise_and_chunking_is_invariant(gptoss, pieces, data):
    extra = st.lists(st.integers(min_value=0, max_value=201200), max_size=3)
    parts = data.draw(st.lists(st.one_of(st.sampled_from(pieces), extra), max_size=25))
    ids = [i for p in parts for i in p]
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=max(1, len(ids))), max_size=8))
    request = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    whole = stream(make_parser(gptoss, "openai_gptoss", "openai", request), [("", ids)], None)
    pieces_ = [(" ", ids[a:b]) for a, b in zip([0, *sorted(set(cuts))], [*sorted(set(cuts)), len(ids)]) if a < b]
    split = stream(make_parser(gptoss, "openai_gptoss", "openai", request), pieces_, None)
    for key in ("reasoning", "content", "tool_calls", "finish_reason"):
        got, want = split[key], whole[key]
        if key == "tool_calls":
            got = [(c["name"], c["arguments"]) for c in got]
            want = [(c["name"], c["arguments"]) for c in want]
        assert got == want, key
    orjson.dumps(make_parser(gptoss, "openai_gptoss", "openai", request).start(None))
    # and the non-streaming answer: the same reasoning, content and calls; the same arguments
    # whenever both are JSON (broken JSON cannot be taken back once its canonical start went out)
    reasoning, content, calls = make_parser(gptoss, "openai_gptoss", "openai", request).parse_complete("", ids, None)
    assert (whole["reasoning"] or None, whole["content"] or None) == (reasoning, content)
    assert [c["name"] for c in whole["tool_calls"]] == [c["function"]["name"] for c in calls]
    for ours, theirs in zip(whole["tool_calls"], calls, strict=True):
        if _is_json(ours["arguments"]) and _is_json(theirs["function"]["arguments"]):
            assert ours["arguments"] == theirs["function"]["arguments"]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_state_is_small_and_feed_cost_flat(gptoss):
    tok = gptoss.tokenizer
    text = ("<|channel|>analysis<|message|>" + "Thinking about the weather. " * 1500 + "<|end|>"
            + "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            + '{"city": "' + "x" * 3000 + '"}<|call|>')
    ids = tok.encode(text)
    parser = make_parser(gptoss, "openai_gptoss", "openai", {"tools": [{"type": "function",
                                                                       "function": {"name": "get_weather"}}]})
    state = parser.start(None)
    sizes, costs = [], []
    for i, tid in enumerate(ids):
        t0 = time.perf_counter()
        parser.feed(state, "", [tid])
        costs.append(time.perf_counter() - t0)
        if i % 50 == 0:
            sizes.append(len(orjson.dumps(state)))
    parser.finish(state)
    assert max(sizes) < 700, max(sizes)  # no output text is kept: a header, a JSON scanner, flags
    n = len(costs) // 10
    first, last = sorted(costs[:n])[n // 2], sorted(costs[-n:])[n // 2]
    assert last < first * 5 + 20e-6  # medians: flat, not growing with the output


def test_flags_are_checked_at_start_up():
    harmony.check_flags(True, "openai_gptoss", "openai", True)
    harmony.check_flags(True, "openai_gptoss", None, False)
    harmony.check_flags(True, None, None, False)
    harmony.check_flags(False, "qwen3", "hermes", True)
    with pytest.raises(ValueError, match="--tool-call-parser openai without --reasoning-parser openai_gptoss"):
        harmony.check_flags(True, None, "openai", True)
    with pytest.raises(ValueError, match="--reasoning-parser qwen3 cannot be used with a gpt-oss model"):
        harmony.check_flags(True, "qwen3", None, False)
    with pytest.raises(ValueError, match="--tool-call-parser hermes cannot be used with a gpt-oss model"):
        harmony.check_flags(True, "openai_gptoss", "hermes", True)
    with pytest.raises(ValueError, match="--reasoning-parser openai_gptoss parses the Harmony format"):
        harmony.check_flags(False, "openai_gptoss", None, False)


def test_header_grammar():
    h = harmony.parse_header
    assert h("<|channel|>commentary to=functions.f <|constrain|>json", True) == {
        "role": "assistant", "channel": "commentary", "recipient": "functions.f", "content_type": "<|constrain|>json"}
    assert h("assistant to=functions.f<|channel|>commentary json", False)["recipient"] == "functions.f"
    assert h("<|channel|>final json", True)["recipient"] == "json"  # a lone word is a recipient
    assert h("<|channel|>final a b c", True) is None  # unexpected tokens remaining
    assert h("<|channel|>", True) is None  # a channel marker without a channel
    assert h("nobody", False) is None  # unknown role
    assert h("functions.f to=assistant<|channel|>commentary", False)["role"] == "tool"
    assert harmony.is_function_recipient("functions.get") and not harmony.is_function_recipient("functions.")
    assert not harmony.is_function_recipient("python") and not harmony.is_function_recipient("browser.search")
    assert harmony.is_function_recipient("get_weather")
