"""The Responses adapter on the one machine: for any output and any engine chunking, the event
stream is well formed (sequence numbers 0.., items opened before their deltas and closed once),
its deltas concatenate to the final response's items, and those equal the non-streamed answer."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.derender import DerenderSettings
from core.derender.adapters.responses import ReasoningCounter, ResponsesFrame, ResponsesStream, non_streamed
from core.derender.session import DerenderSession
from core.derender.spec import OutputSpec
from core.engine_request import max_tokens
from core.protocol.responses import ResponsesRequest
from core.render_responses import render_responses
from tests.core.test_derender_session import QWEN_EOS, chunking, engine_events, model_output

HYP = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.fixture(scope="module", params=["plain", "hermes+qwen3"])
def setup(request, qwen3):
    flags = {} if request.param == "plain" else {"reasoning_parser": "qwen3", "tool_call_parser": "hermes",
                                                 "enable_auto_tool_choice": True}
    return DerenderSettings.build(qwen3, **flags), request.param != "plain"


def call(settings_, body):
    req = ResponsesRequest.model_validate(body, from_attributes=True)
    rendered = render_responses(settings_.model, settings_.render, req)
    gen = rendered.generate_request
    parser = settings_.parser_for(rendered.chat)

    def fresh():
        spec = OutputSpec.for_chat(settings_, rendered.chat, gen["sampling_params"], parser, max_tokens(gen))
        return (DerenderSession(spec, [gen["token_ids"]], 1),
                ResponsesFrame(req, gen["sampling_params"], model="m", created_at=1, tool_names=rendered.tool_names),
                ReasoningCounter(parser))
    return fresh


def parse_events(frames: list[bytes]) -> list[dict]:
    events = []
    for frame in b"".join(frames).split(b"\n\n"):
        if frame:
            name, data = frame.split(b"\n", 1)
            event = orjson.loads(data[len(b"data: "):])
            assert name == b"event: " + event["type"].encode()
            events.append(event)
    return events


def summary(items: list[dict]) -> list[tuple]:
    out = []
    for item in items:
        if item["type"] == "reasoning":
            out.append(("reasoning", "".join(c["text"] for c in item["content"] or [])))
        elif item["type"] == "message":
            out.append(("message", "".join(c["text"] for c in item["content"]), item["status"]))
        else:
            out.append((item["type"], item["name"], item["arguments"], item["status"]))
    return out


def check_stream(events: list[dict]) -> dict:
    """vLLM's stream rules; returns the final response."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] in ("response.completed", "response.incomplete")
    final = events[-1]["response"]
    open_items: dict[int, dict] = {}
    texts: dict[int, str] = {}
    done: list[dict] = []
    for event in events[2:-1]:
        kind = event["type"]
        index = event.get("output_index")
        if kind == "response.output_item.added":
            assert index == len(done) and not open_items
            open_items[index] = event["item"]
            texts[index] = ""
        elif kind.endswith(".delta"):
            assert index in open_items and event["item_id"] == open_items[index]["id"]
            texts[index] += event["delta"]
        elif kind == "response.output_item.done":
            item = open_items.pop(index)
            assert event["item"]["id"] == item["id"]
            done.append(event["item"])
            got = summary([event["item"]])[0]
            assert texts[index] in got  # the deltas concatenate to the item's text / arguments
    assert not open_items and done == final["output"]
    return final


@given(data=st.data())
@HYP
def test_any_chunking_streams_the_non_streamed_answer(setup, data):
    settings_, markup = setup
    body = {"input": "Weather in Paris?", "tools": TOOLS, "max_output_tokens": 4096}
    fresh = call(settings_, body)
    tokenizer = settings_.model.tokenizer
    ids = tokenizer.encode(data.draw(model_output(markup)))
    length_cut = data.draw(st.booleans())
    ids = ids if length_cut else ids + [QWEN_EOS]
    if not ids:
        ids = [tokenizer.encode("x")[0]]
    cuts, empty_finish = data.draw(chunking(len(ids)))
    events = engine_events(ids, cuts, empty_finish, "length" if length_cut else "stop",
                           None if length_cut else QWEN_EOS)

    session, frame, counter = fresh()
    writer = ResponsesStream(session, frame, counter)
    frames = writer.head() + [f for e in events for f in writer.feed(0, [e])] + writer.close(None)
    final = check_stream(parse_events(frames))

    session, frame, counter = fresh()
    session.collect(0, events)
    whole = non_streamed(frame, session, counter)
    assert summary(final["output"]) == summary(whole["output"])
    assert final["status"] == whole["status"] == ("incomplete" if length_cut else "completed")
    assert final["usage"] == whole["usage"]
    if length_cut:
        assert whole["incomplete_details"] == {"reason": "max_output_tokens"}


def test_echoed_fields_and_usage(qwen3):
    settings_ = DerenderSettings.build(qwen3, reasoning_parser="qwen3")
    fresh = call(settings_, {"input": "hi", "instructions": "Be brief.", "metadata": {"k": "v"}, "user": "u",
                             "temperature": 0.2, "max_output_tokens": 7, "tools": TOOLS, "tool_choice": "none"})
    session, frame, counter = fresh()
    ids = qwen3.tokenizer.encode("<think>\nhm hm\n</think>\n\nHello")
    session.collect(0, engine_events(ids, [], False, "length", None))
    response = non_streamed(frame, session, counter)
    assert response["instructions"] == "Be brief." and response["metadata"] == {"k": "v"} and response["user"] == "u"
    assert response["temperature"] == 0.2 and response["max_output_tokens"] == 7 and response["tool_choice"] == "none"
    assert response["tools"][0]["name"] == "get_weather"
    assert [i["type"] for i in response["output"]] == ["reasoning", "message"]
    assert response["output"][1]["status"] == "incomplete" and response["status"] == "incomplete"
    reasoning_tokens = len(qwen3.tokenizer.encode("\nhm hm\n"))
    assert response["usage"]["output_tokens_details"]["reasoning_tokens"] == reasoning_tokens
    assert response["usage"]["output_tokens"] == len(ids)
    assert response["usage"]["input_tokens"] == len(session.prompts[0])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["reasoning", "content", "tool_call"]), st.text(), st.text(min_size=1),
       st.integers(0, 10**6), st.integers(0, 10**9))
def test_framed_delta_events_are_named_events(state, delta, item_id, output_index, sequence):
    """A delta event framed once per item is byte for byte the event `named_event` writes."""
    from core.derender.adapters.responses import _DELTA_KINDS, delta_framing
    from core.derender.adapters.sse import named_event

    head, middle, tail = delta_framing(state, item_id, output_index)
    kind = _DELTA_KINDS[state]
    # the payloads the stream wrote before (their keys in that order)
    payload = ({} if state == "tool_call" else {"content_index": 0}) | {"delta": delta, "item_id": item_id}
    payload |= ({"logprobs": []} if state == "content" else {}) | {"output_index": output_index,
                                                                   "sequence_number": sequence, "type": kind}
    framed = head + orjson.dumps(delta) + middle + str(sequence).encode() + tail
    assert framed == named_event(kind, payload)
