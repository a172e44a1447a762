"""The Responses output of gpt-oss (Harmony) against vLLM 0.33, on the one derender machine.

Golden file: tests/core/parsers/golden_frontier/harmony_responses.json, recorded in-process from vLLM's own
`HarmonyContext`, `harmony_to_response_output` and streaming event builders
(tests/oracle/record_harmony_responses_output.py) for every output of harmony_cases.py. Our
non-streamed items, status and reasoning-token count must equal vLLM's (random ids compared by
shape); our events (sequence numbers and ids aside) must equal vLLM's stream except where we
deviate on purpose (DEVIATIONS); and for any engine chunking the stream ends with the
non-streamed answer's items.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.derender import DerenderSettings
from core.derender.adapters.harmony_responses import HarmonyResponsesStream, function_names, harmony_non_streamed
from core.protocol.responses import ResponsesRequest
from tests.core.parsers.harmony_cases import OUTPUTS
from tests.core.test_derender_session import chunking, engine_events
from tests.core.test_responses_adapter import call, check_stream, parse_events
from tests.frontier_models import gptoss_model

GOLDEN = json.loads((Path(__file__).parent / "parsers" / "golden_frontier" / "harmony_responses.json").read_text(
    encoding="utf-8"))
RECORDS = {r["name"]: r for r in GOLDEN["records"]}
STOP_IDS = (200002, 200012)
HYP = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
# where our stream differs from vLLM's on purpose (the final items are vLLM's non-streamed ones)
DEVIATIONS = {
    "empty_final": "an empty message: vLLM sends no event for it (no delta) yet its final response has the item; "
                   "we announce it (added, done) when it ends",
    "empty_output": "the same for the empty final message vLLM recovers from an empty output",
    "call_empty_args": "the same for a call with empty arguments",
    "call_builtin_recipient": "a message to `python`: vLLM streams code_interpreter_call events but answers a "
                              "reasoning item; we stream the reasoning item",
    "tool_author_message": "a tool's message in the output: vLLM streams it as an mcp_call but leaves it out of "
                           "the response; we leave it out of both",
}
# outputs vLLM answers with a 500 (VLLMValidationError "Unknown channel"); we skip the message
VLLM_FAILS = {"no_channel_header", "unknown_channel"}


@pytest.fixture(scope="module", params=["chat parsers in the session", "no parser (as the front door runs it)"])
def harmony_settings(request):
    """The items are read from the token ids whatever parser the session runs."""
    if request.param.startswith("no parser"):
        return DerenderSettings.build(gptoss_model())
    return DerenderSettings.build(gptoss_model(), reasoning_parser="openai_gptoss", tool_call_parser="openai",
                                  enable_auto_tool_choice=True)


def fresh_call(settings_):
    body = {"model": "tiny-gptoss", "input": "hi", "tools": GOLDEN["tools"], "max_output_tokens": 4096}
    fresh = call(settings_, body)
    return (lambda: fresh()[:2]), function_names(ResponsesRequest.model_validate(body))


def golden_events(ids: list[int], cuts: list[int], empty_finish: bool) -> list[dict]:
    finish = "stop" if ids and ids[-1] in STOP_IDS else "length"
    if not ids:
        return [{"choices": [{"index": 0, "token_ids": [], "finish_reason": "length", "stop_reason": None}]}]
    return engine_events(ids, cuts, empty_finish, finish, ids[-1] if finish == "stop" else None)


def run_both(settings_, events):
    fresh, names = fresh_call(settings_)
    session, frame = fresh()
    writer = HarmonyResponsesStream(session, frame, names)
    frames = writer.head() + [f for e in events for f in writer.feed(0, [e])] + writer.close(None)
    streamed = parse_events(frames)
    session, frame = fresh()
    session.collect(0, events)
    whole, messages = harmony_non_streamed(frame, session, names)
    return streamed, whole, writer, messages


def check_harmony_stream(events: list[dict]) -> dict:
    """The generic stream rules (tests/core/test_responses_adapter.py), but for the one field where
    vLLM's Harmony stream and final response differ: a done item's status ("completed"; the final
    response's reasoning items have none, and a cut last item is "incomplete" there)."""
    final = events[-1]["response"]
    events = json.loads(json.dumps(events))
    for event in events:
        if event["type"] == "response.output_item.done":
            assert event["item"]["status"] == "completed"
            event["item"]["status"] = final["output"][event["output_index"]]["status"]
    return check_stream(events)


ID_SHAPES = {"reasoning": r"rs_[0-9a-f]{16}", "message": r"msg_[0-9a-f]{16}", "function_call": r"fc_[0-9a-f]{16}",
             "mcp_call": r"mcp_[0-9a-f]{16}"}


def scrub(items: list[dict]) -> list[dict]:
    out = []
    for item in items:
        assert re.fullmatch(ID_SHAPES[item["type"]], item["id"]), item
        if item["type"] == "function_call":
            assert item["call_id"] == "call_" + item["id"][3:]
        out.append({k: v for k, v in item.items() if k not in ("id", "call_id")})
    return out


def scrub_event(event: dict) -> dict:
    event = {k: v for k, v in event.items() if k not in ("sequence_number", "item_id")}
    if "item" in event:  # vLLM's done function_call item also carries output_index / sequence_number
        event["item"] = {k: v for k, v in event["item"].items()
                         if k not in ("id", "call_id", "output_index", "sequence_number")}
    return event


@pytest.mark.parametrize("name", [n for n in RECORDS if n not in VLLM_FAILS])
def test_items_and_events_match_vllm(name, harmony_settings):
    record = RECORDS[name]
    ids = record["token_ids"]
    streamed, whole, _, _ = run_both(harmony_settings, golden_events(ids, list(range(1, len(ids))), False))
    want = record["non_streamed"]
    assert scrub(whole["output"]) == scrub(want["output"])
    assert whole["status"] == want["status"]
    assert whole["usage"]["output_tokens_details"]["reasoning_tokens"] == want["reasoning_tokens"]
    assert whole["usage"]["output_tokens"] == len(ids)
    final = check_harmony_stream(streamed)
    assert scrub(final["output"]) == scrub(whole["output"]) and final["usage"] == whole["usage"]
    ours = [scrub_event(e) for e in streamed[2:-1]]
    theirs = [scrub_event(e) for e in record["streamed"]["events"]]
    if name in DEVIATIONS:
        assert ours != theirs, f"{name} is no deviation any more"
    else:
        assert ours == theirs


@pytest.mark.parametrize("name", sorted(VLLM_FAILS))
def test_outputs_vllm_fails_on_are_answered(name, harmony_settings):
    """vLLM answers 500 for a message without a known channel; we leave that message out."""
    assert "error" in RECORDS[name]["non_streamed"]
    ids = RECORDS[name]["token_ids"]
    streamed, whole, _, _ = run_both(harmony_settings, golden_events(ids, [], False))
    assert all(item["type"] == "message" for item in whole["output"])
    assert scrub(check_harmony_stream(streamed)["output"]) == scrub(whole["output"])


def test_the_output_messages_are_kept_for_the_next_turn(harmony_settings):
    ids = RECORDS["preamble_then_call"]["token_ids"]
    _, _, writer, messages = run_both(harmony_settings, golden_events(ids, [3, 9], True))
    writer_messages = writer.output_messages
    assert [m.to_dict() for m in messages] == [m.to_dict() for m in writer_messages]
    assert [(m.channel, m.recipient) for m in messages] == [
        ("analysis", None), ("commentary", None), ("commentary", "functions.get_weather")]
    assert messages[-1].content_type == "<|constrain|>json"


@given(data=st.data())
@HYP
def test_any_chunking_streams_the_non_streamed_answer(harmony_settings, data):
    name = data.draw(st.sampled_from(sorted(OUTPUTS)))
    ids = RECORDS[name]["token_ids"]
    if not ids:
        return
    cut = data.draw(st.integers(1, len(ids)))  # a length cut anywhere, or the whole output
    ids = ids[:cut]
    cuts, empty_finish = data.draw(chunking(len(ids)))
    streamed, whole, _, _ = run_both(harmony_settings, golden_events(ids, cuts, empty_finish))
    final = check_harmony_stream(streamed)
    assert scrub(final["output"]) == scrub(whole["output"])
    assert final["status"] == whole["status"] and final["usage"] == whole["usage"]
