"""The Messages adapter against `vllm serve`'s recorded /v1/messages answers (vLLM 0.32, coupled,
tiny-qwen3 with hermes + qwen3: serve_messages_stream.json / serve_messages_nonstream.json).

The recordings hold text, not token ids; the engine's tokens are rebuilt from them: a streamed
text or thinking delta is one generated token (vLLM streamed them one per token), a stop-sequence
case generated what the same request without the stop sequence did, and a forced call cut by
max_tokens is its non-streamed text re-encoded (different token boundaries: its `input_json_delta`
pieces are compared joined, and its output token count is ours). Each case's request is rendered
by `core.render_messages` and its tokens fed one per engine event, as vLLM's engine sends them.

Differences that are by design: ids and signatures are random per call; the 0.32 recordings name
error types as the OpenAI classes, which vLLM 0.33 translates (checked over HTTP elsewhere); and a
call cut by max_tokens is a tool_use block in our non-streamed answer as in vLLM's stream (vLLM's
non-streamed answer has its raw markup as text), so there our non-streamed answer is compared with
what the anthropic SDK makes of vLLM's recorded stream.
"""

from __future__ import annotations

import pytest
from anthropic._models import construct_type
from anthropic.types import Message

from core.derender import DerenderSettings
from core.derender.adapters.messages import MessageCollector, MessagesStream
from core.derender.session import DerenderSession
from core.derender.spec import OutputSpec
from core.engine_request import max_tokens
from core.protocol.messages import AnthropicMessagesRequest
from core.render_messages import MessagesRenderer
from tests.core.test_messages_adapter import sdk_final_message, sse_events
from tests.oracle_fixtures import case_by_name, load_fixture

STREAM, NONSTREAM = "serve_messages_stream", "serve_messages_nonstream"
# the same request without its stop sequence generated the tokens the stop sequence cut
SAME_GENERATION = {"stop_sequence": "text_thinking_disabled"}
CUT_CALLS = ("tool_choice_any_cut", "tool_choice_tool_cut")


@pytest.fixture(scope="module")
def derender(qwen3):
    return DerenderSettings.build(qwen3, reasoning_parser="qwen3", tool_call_parser="hermes",
                                  enable_auto_tool_choice=True)


def streamed_tokens(tokenizer, name: str) -> list[int]:
    case = case_by_name(STREAM, SAME_GENERATION.get(name, name))
    ids: list[int] = []
    for event in case["events"]:
        delta = event["data"].get("delta") or {}
        piece = delta.get("text") if delta.get("type") == "text_delta" else delta.get("thinking")
        if piece:
            encoded = tokenizer.encode(piece, add_special_tokens=False)
            assert len(encoded) == 1, piece
            ids += encoded
    return ids


def engine_tokens(tokenizer, name: str) -> tuple[list[int], str]:
    """The generated ids of a case and the engine's finish ("length": every case hit max_tokens
    or, for the stop sequence, would have)."""
    if name in CUT_CALLS:
        text = case_by_name(NONSTREAM, name)["response"]["content"][0]["text"]
        return tokenizer.encode(text, add_special_tokens=False), "length"
    return streamed_tokens(tokenizer, name), "length"


def session_for(derender, request: dict):
    rendered = MessagesRenderer(derender.model, derender.render).render(AnthropicMessagesRequest.model_validate(
        request))
    gen, chat = rendered.generate_request, rendered.chat_request
    spec = OutputSpec.for_chat(derender, chat, gen["sampling_params"], derender.parser_for(chat), max_tokens(gen))
    return DerenderSession(spec, [gen["token_ids"]], 1)


def one_per_event(ids: list[int], finish: str) -> list[dict]:
    events = [{"choices": [{"index": 0, "token_ids": [t], "finish_reason": None, "stop_reason": None}]} for t in ids]
    events[-1]["choices"][0]["finish_reason"] = finish
    return events


DELTA_TEXT = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def comparable(events: list[tuple[str, dict]], join: bool) -> list[tuple[str, dict]]:
    """Random ids and signatures out; with `join`, consecutive deltas of one kind joined."""
    out: list[tuple[str, dict]] = []
    for name, payload in events:
        payload = dict(payload)
        if name == "message_start":
            payload["message"] = dict(payload["message"], id="msg")
        if name == "content_block_start" and payload["content_block"]["type"] == "tool_use":
            assert payload["content_block"]["id"].startswith("chatcmpl-tool-")
            payload["content_block"] = dict(payload["content_block"], id="toolu")
        delta = payload.get("delta") or {}
        if delta.get("type") == "signature_delta":
            assert len(delta["signature"]) == 32
            payload["delta"] = dict(delta, signature="sig")
        kind = delta.get("type")
        if join and kind in DELTA_TEXT and out and out[-1][1].get("delta", {}).get("type") == kind:
            key, previous = DELTA_TEXT[kind], out[-1][1]
            out[-1] = (name, dict(previous, delta={"type": kind, key: previous["delta"][key] + delta[key]}))
            continue
        out.append((name, payload))
    return out


STREAM_CASES = [c["name"] for c in load_fixture(STREAM) if c["status"] == 200]


@pytest.mark.parametrize("name", STREAM_CASES)
def test_streams_are_vllms(derender, qwen3, name):
    case = case_by_name(STREAM, name)
    ids, finish = engine_tokens(qwen3.tokenizer, name)
    writer = MessagesStream(session_for(derender, case["request"]), message_id="chatcmpl-x", model="tiny-qwen3")
    frames = writer.head()
    for event in one_per_event(ids, finish):
        frames += writer.feed(0, [event])
    frames += writer.close(None)
    # a stop sequence: vLLM holds back as many characters as the longest stop string but one, we
    # hold only a tail that could start one (the same text, in other pieces)
    join = name in CUT_CALLS or bool(case["request"].get("stop_sequences"))
    ours = comparable(sse_events(frames), join)
    recorded = comparable([(e["event"], e["data"]) for e in case["events"]], join)
    if name in CUT_CALLS:  # our re-encoding has fewer tokens than the model generated
        recorded[-2][1]["usage"]["output_tokens"] = len(ids)
    assert ours == recorded
    # and the bytes: vLLM's framing and key order
    assert frames[0].startswith(b'event: message_start\ndata: {"type":"message_start","message":{"id":"chatcmpl-x",')


NONSTREAM_CASES = [name for name in ("thinking_default", "text_thinking_disabled", "stop_sequence", "max_tokens_1")]


@pytest.mark.parametrize("name", NONSTREAM_CASES)
def test_non_streamed_messages_are_vllms(derender, qwen3, name):
    case = case_by_name(NONSTREAM, name)
    ids, finish = engine_tokens(qwen3.tokenizer, name)
    collector = MessageCollector(session_for(derender, case["request"]), message_id="chatcmpl-x", model="tiny-qwen3")
    if case["request"].get("stop_sequences"):  # the route streams from the engine to cut it short
        collector.collect(0, one_per_event(ids, finish))
    else:  # one non-streamed engine answer
        collector.collect(0, [{"choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}]}])
    ours = collector.message()
    recorded = case["response"]
    assert list(ours) == list(recorded)
    for block in ours["content"]:
        if block["type"] == "thinking":
            block["signature"] = next(b["signature"] for b in recorded["content"] if b["type"] == "thinking")
    assert ours == dict(recorded, id="chatcmpl-x")


@pytest.mark.parametrize("name", CUT_CALLS)
def test_a_cut_call_is_answered_as_vllm_streams_it(derender, qwen3, name):
    """vLLM's non-streamed answer: the markup as text; its stream: a tool_use block with the JSON so
    far. Our non-streamed answer is what the SDK makes of vLLM's recorded stream."""
    case = case_by_name(NONSTREAM, name)
    ids, finish = engine_tokens(qwen3.tokenizer, name)
    assert case["response"]["content"][0]["type"] == "text"  # vLLM's
    collector = MessageCollector(session_for(derender, case["request"]), message_id="chatcmpl-x", model="tiny-qwen3")
    collector.collect(0, [{"choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}]}])
    ours = construct_type(type_=Message, value=collector.message()).model_dump(exclude_none=True)
    recorded_stream = case_by_name(STREAM, "tool_choice_any_cut")["events"]
    vllm_streamed = sdk_final_message([(e["event"], e["data"]) for e in recorded_stream]).model_dump(exclude_none=True)
    for message in (ours, vllm_streamed):
        message["id"] = "msg"
        message["content"][0]["id"] = "toolu"
        message["usage"]["output_tokens"] = 0  # re-encoded: fewer tokens than generated
    assert ours == vllm_streamed
    assert ours["content"][0]["name"] == "set_unit" and ours["stop_reason"] == "max_tokens"
