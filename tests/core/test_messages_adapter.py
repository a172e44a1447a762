"""The Messages adapter on the one machine: any engine chunking of any output streams to events
that the anthropic SDK's own accumulator (`accumulate_event`, what `messages.stream(...)` and
`get_final_message()` run) folds into exactly the non-streamed message.

Real Qwen3 tokenizer, requests rendered by `core.render_messages` (hermes + qwen3 parsers, and
none); outputs with reasoning, unicode text, hermes tool calls (complete, cut by the length limit
anywhere, malformed), ended by EOS, the length limit or a stop sequence; chunkings: one chunk, one
token per chunk, random, with the finish on the last token or on an empty chunk of its own.
"""

from __future__ import annotations

import anthropic
import orjson
import pytest
from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.derender import DerenderSettings
from core.derender.adapters.messages import (
    PING_INTERVAL,
    MessageCollector,
    MessagesStream,
    anthropic_stop_reason,
    tool_input,
)
from core.derender.session import DerenderSession
from core.derender.spec import OutputSpec
from core.engine_request import max_tokens
from core.errors import RequestError
from core.protocol.messages import AnthropicMessagesRequest
from core.render_messages import MessagesRenderer

HYP = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
QWEN_EOS = 151645
WEATHER = {"name": "get_weather", "description": "Weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
USER = [{"role": "user", "content": "Weather in Paris?"}]
WORDS = st.sampled_from(["Hi", " there", "!", " 👋", " 東京", " é", "\n", "\n\n", " ok", ",", " 12", "  ", " STOP"])
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "CITY"}}\n</tool_call>'
MALFORMED = ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "x"}, }\n</tool_call>',
             '<tool_call>\n{"name": "get_weather"}\n</tool_call>', '<tool_call>\nnot json\n</tool_call>',
             '<tool_call>\n{"name": "nope", "arguments": [1, 2]}\n</tool_call>']
SETUPS = {
    # name: (parsers, request fields)
    "parsers": (True, {"tools": [WEATHER]}),
    "parsers thinking off": (True, {"tools": [WEATHER], "thinking": {"type": "disabled"}}),
    "parsers stop sequences": (True, {"tools": [WEATHER], "stop_sequences": [" STOP", "東京", "Par"]}),
    "no parser": (False, {}),
    "no parser stop sequences": (False, {"stop_sequences": ["\n\n", " ok"]}),
}


@pytest.fixture(scope="module")
def setups(qwen3):
    out = {}
    for name, (parsers, fields) in SETUPS.items():
        flags = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
        derender = DerenderSettings.build(qwen3, **flags) if parsers else DerenderSettings(model=qwen3)
        request = AnthropicMessagesRequest.model_validate({"model": "tiny-qwen3", "max_tokens": 4000,
                                                           "messages": USER, **fields})
        rendered = MessagesRenderer(qwen3, derender.render).render(request)
        out[name] = (derender, rendered)
    return out


def new_session(derender, rendered) -> DerenderSession:
    gen, chat = rendered.generate_request, rendered.chat_request
    spec = OutputSpec.for_chat(derender, chat, gen["sampling_params"], derender.parser_for(chat), max_tokens(gen))
    return DerenderSession(spec, [gen["token_ids"]], 1)


@st.composite
def model_output(draw) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append("<think>\n" + "".join(draw(st.lists(WORDS, max_size=6))) + "\n</think>\n\n")
    parts.append("".join(draw(st.lists(WORDS, max_size=10))))
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.integers(0, 4)) == 0:
            parts.append(draw(st.sampled_from(MALFORMED)))
        else:
            parts.append(CALL.replace("CITY", draw(st.sampled_from(["Paris", "東京", 'a \\"q\\" b']))))
        if draw(st.booleans()):
            parts.append("".join(draw(st.lists(WORDS, max_size=3))))
    return "".join(parts)


@st.composite
def engine_output(draw, tokenizer) -> tuple[list[dict], list[int], str, int | None]:
    """Engine events for one output: (events, ids, finish_reason, stop_reason)."""
    ids = tokenizer.encode(draw(model_output()), add_special_tokens=False)
    if draw(st.booleans()) or not ids:
        ids = ids + [QWEN_EOS]
        finish, stop_reason = "stop", QWEN_EOS
    else:  # the length limit, anywhere (inside a tool call too)
        ids = ids[:draw(st.integers(1, len(ids)))]
        finish, stop_reason = "length", None
    how = draw(st.sampled_from(["one", "per_token", "random"]))
    n = len(ids)
    cuts = ([] if how == "one" else list(range(1, n)) if how == "per_token"
            else sorted({c for c in draw(st.lists(st.integers(1, max(1, n - 1)), max_size=6)) if 0 < c < n}))
    bounds = [0, *cuts, n]
    events = [{"choices": [{"index": 0, "token_ids": ids[a:b], "finish_reason": None, "stop_reason": None}]}
              for a, b in zip(bounds, bounds[1:])]
    if draw(st.booleans()):
        events.append({"choices": [{"index": 0, "token_ids": [], "finish_reason": None, "stop_reason": None}]})
    events[-1]["choices"][0].update(finish_reason=finish, stop_reason=stop_reason)
    return events, ids, finish, stop_reason


def sse_events(frames: list[bytes]) -> list[tuple[str, dict]]:
    out = []
    for frame in b"".join(frames).split(b"\n\n"):
        if not frame:
            continue
        name, data = frame.split(b"\n")
        assert name.startswith(b"event: ") and data.startswith(b"data: ")
        payload = orjson.loads(data[6:])
        assert payload["type"] == name[7:].decode()
        out.append((payload["type"], payload))
    return out


def check_grammar(events: list[tuple[str, dict]]) -> None:
    """Anthropic's event order: message_start, then per block start / deltas / stop with indexes
    counting from 0 (a thinking block's last delta is its signature), message_delta, message_stop."""
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    index, open_block, last_delta = -1, None, None
    for name, payload in events[1:-2]:
        if name == "content_block_start":
            assert open_block is None and payload["index"] == index + 1
            index, open_block, last_delta = payload["index"], payload["content_block"]["type"], None
        elif name == "content_block_delta":
            assert open_block is not None and payload["index"] == index
            kind = payload["delta"]["type"]
            assert kind == {"thinking": "thinking_delta", "text": "text_delta", "tool_use": "input_json_delta"}[
                open_block] or (kind == "signature_delta" and open_block == "thinking")
            assert last_delta != "signature_delta"
            assert payload["delta"].get("text", payload["delta"].get("thinking", "x")) != ""
            last_delta = kind
        else:
            assert name == "content_block_stop" and payload["index"] == index
            assert (last_delta == "signature_delta") == (open_block == "thinking")
            open_block = None
    assert open_block is None and index >= 0  # every message has a block


def sdk_final_message(events: list[tuple[str, dict]]) -> anthropic.types.Message:
    """What `messages.stream(...).get_final_message()` returns for these events (the SDK's code)."""
    snapshot, json_bufs = None, {}
    for _, payload in events:
        snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs=json_bufs)
    return snapshot


def sdk_message(body: dict) -> anthropic.types.Message:
    """What `messages.create(...)` returns for this body (the SDK's own, lenient, construction)."""
    return construct_type(type_=anthropic.types.Message, value=body)


def normalized(message: dict) -> dict:
    """Random parts out: ids (per request, as vLLM makes them) and thinking signatures (uuid4)."""
    out = dict(message, id="msg")
    out["content"] = [dict(b, **({"signature": "sig"} if b["type"] == "thinking" else {}),
                           **({"id": "toolu"} if b["type"] == "tool_use" else {})) for b in message["content"]]
    return out


def stream(derender, rendered, events) -> list[bytes]:
    writer = MessagesStream(new_session(derender, rendered), message_id="chatcmpl-1", model="tiny-qwen3")
    return writer.head() + [f for e in events for f in writer.feed(0, [e])] + writer.close(None)


def non_streamed(derender, rendered, ids, events, finish, stop_reason) -> dict:
    """As the route collects: one engine answer, or (stop sequences) the engine's stream."""
    collector = MessageCollector(new_session(derender, rendered), message_id="chatcmpl-2", model="tiny-qwen3")
    if rendered.stop_sequences:
        collector.collect(0, events)
    else:
        collector.collect(0, [{"choices": [{"index": 0, "token_ids": ids, "finish_reason": finish,
                                            "stop_reason": stop_reason}]}])
    return collector.message()


@pytest.mark.parametrize("setup", list(SETUPS))
@HYP
@given(data=st.data())
def test_the_sdk_folds_any_chunking_into_the_non_streamed_message(setups, setup, data, qwen3):
    derender, rendered = setups[setup]
    events, ids, finish, stop_reason = data.draw(engine_output(qwen3.tokenizer))
    streamed = sse_events(stream(derender, rendered, events))
    check_grammar(streamed)
    whole = non_streamed(derender, rendered, ids, events, finish, stop_reason)
    final = sdk_final_message(streamed).model_dump(exclude_none=True, warnings=False)
    assert normalized(final) == normalized(sdk_message(whole).model_dump(exclude_none=True, warnings=False))
    # the SDK's text_stream: the text deltas, in order
    text = "".join(p["delta"]["text"] for name, p in streamed if p.get("delta", {}).get("type") == "text_delta")
    assert text == "".join(b["text"] for b in whole["content"] if b["type"] == "text")
    # what the message says follows from the output
    usage = whole["usage"]
    assert usage == {"input_tokens": len(rendered.prompt_token_ids), "output_tokens": usage["output_tokens"]}
    assert usage["output_tokens"] <= len(ids)
    # the length limit is max_tokens unless a stop sequence ended the output first (the proxy's
    # match wins, as vLLM's; then a complete tool call is tool_use with no stop_sequence, as vLLM's)
    matched = any(s in qwen3.tokenizer.decode(ids) for s in rendered.stop_sequences)
    if finish == "length" and not matched:
        assert whole["stop_reason"] == "max_tokens"
    elif matched:
        assert whole["stop_reason"] in ("stop_sequence", "tool_use")
        assert (whole["stop_reason"] == "stop_sequence") == (whole.get("stop_sequence") in rendered.stop_sequences)
    assert "<|im_end|>" not in text


def test_message_blocks_follow_vllm(setups, qwen3):
    """thinking (with a signature), text, tool_use with the call's id and its input as an object."""
    derender, rendered = setups["parsers"]
    text = "<think>\nLet me see.\n</think>\n\nChecking." + CALL.replace("CITY", "Paris")
    ids = qwen3.tokenizer.encode(text, add_special_tokens=False) + [QWEN_EOS]
    events = [{"choices": [{"index": 0, "token_ids": [t], "finish_reason": None}]} for t in ids]
    events[-1]["choices"][0].update(finish_reason="stop", stop_reason=QWEN_EOS)
    message = non_streamed(derender, rendered, ids, events, "stop", QWEN_EOS)
    thinking, text_block, tool = message["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "\nLet me see.\n"
    assert len(thinking["signature"]) == 32 and int(thinking["signature"], 16) >= 0  # uuid4 hex, as vLLM
    assert text_block == {"type": "text", "text": "\n\nChecking."}
    assert tool["id"].startswith("chatcmpl-tool-") and tool["name"] == "get_weather"
    assert tool["input"] == {"city": "Paris"}
    assert message["stop_reason"] == "tool_use" and "stop_sequence" not in message
    assert list(message) == ["id", "type", "role", "content", "model", "stop_reason", "usage"]
    assert message["usage"] == {"input_tokens": len(rendered.prompt_token_ids), "output_tokens": len(ids)}
    streamed = sse_events(stream(derender, rendered, events))
    starts = [p["content_block"] for name, p in streamed if name == "content_block_start"]
    assert starts[0] == {"type": "thinking", "thinking": ""} and starts[1] == {"type": "text", "text": ""}
    assert list(starts[2]) == ["type", "id", "name", "input"] and starts[2]["input"] == {}
    assert streamed[0][1]["message"] == {"id": "chatcmpl-1", "type": "message", "role": "assistant", "content": [],
                                         "model": "tiny-qwen3", "stop_reason": None, "stop_sequence": None,
                                         "usage": {"input_tokens": len(rendered.prompt_token_ids),
                                                   "output_tokens": 0}}
    assert streamed[-2][1] == {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                               "usage": {"input_tokens": len(rendered.prompt_token_ids),
                                         "output_tokens": len(ids)}}
    assert streamed[-1][1] == {"type": "message_stop"}


def test_a_stop_sequence_is_named_and_its_prompt_aborted(setups, qwen3):
    derender, rendered = setups["parsers stop sequences"]
    ids = qwen3.tokenizer.encode("<think>\nhm\n</think>\n\nIt is sunny in 東京 today.", add_special_tokens=False)
    collector = MessageCollector(new_session(derender, rendered), message_id="m", model="tiny-qwen3")
    collector.collect(0, [{"choices": [{"index": 0, "token_ids": [t], "finish_reason": None}]} for t in ids])
    assert collector.to_abort() == [0]  # the engine still generates: the route aborts it
    message = collector.message()
    assert message["content"][1] == {"type": "text", "text": "\n\nIt is sunny in "}
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "東京")
    assert list(message) == ["id", "type", "role", "content", "model", "stop_reason", "stop_sequence", "usage"]


def test_an_empty_output_is_one_empty_text_block_streamed_or_not(setups):
    derender, rendered = setups["parsers thinking off"]
    events = [{"choices": [{"index": 0, "token_ids": [QWEN_EOS], "finish_reason": "stop", "stop_reason": QWEN_EOS}]}]
    message = non_streamed(derender, rendered, [QWEN_EOS], events, "stop", QWEN_EOS)
    assert message["content"] == [{"type": "text", "text": ""}] and message["stop_reason"] == "end_turn"
    names = [name for name, _ in sse_events(stream(derender, rendered, events))]
    assert names == ["message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"]


def test_a_tool_call_cut_by_max_tokens_is_a_tool_use_block_both_ways(setups, qwen3):
    """vLLM streams it as a tool_use block but answers the markup as text when not streaming; here
    both are the tool_use block with the input parsed so far (as the SDK parses a stream)."""
    derender, rendered = setups["parsers thinking off"]
    ids = qwen3.tokenizer.encode('Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par", "x": [1, 2',
                                 add_special_tokens=False)
    events = [{"choices": [{"index": 0, "token_ids": ids, "finish_reason": "length", "stop_reason": None}]}]
    message = non_streamed(derender, rendered, ids, events, "length", None)
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"] == {"city": "Par", "x": [1, 2]} and message["stop_reason"] == "max_tokens"


def test_content_while_a_tool_use_block_is_open_follows_it_as_its_own_text_block(setups, qwen3):
    """vLLM's hold rule, driven with events whose order a parser may produce."""
    from core.derender.choice import ChoiceEvent

    derender, rendered = setups["parsers"]
    writer = MessagesStream(new_session(derender, rendered), message_id="m", model="tiny-qwen3")
    call = {"index": 0, "id": "chatcmpl-tool-1", "type": "function", "function": {"name": "f", "arguments": ""}}

    def event(content=None, calls=(), finish=None):
        return ChoiceEvent(0, False, "", None, content, list(calls), True, [], None, finish, None, False, 1)

    out: list[bytes] = []
    for e in [event("a"), event(calls=[call]), event("held"),
              event(calls=[{"index": 0, "function": {"arguments": "{}"}}], finish="tool_calls")]:
        writer.add(e, out)
    out += writer.close(None)
    blocks = [(p["index"], p["content_block"]["type"]) for n, p in sse_events(out) if n == "content_block_start"]
    assert blocks == [(0, "text"), (1, "tool_use"), (2, "text")]
    final = sdk_final_message(sse_events(writer.head() + out))
    assert [b.type for b in final.content] == ["text", "tool_use", "text"] and final.content[2].text == "held"
    assert final.stop_reason == "tool_use"


def test_an_error_after_the_start_closes_the_open_block_and_ends_with_an_error_event(setups, qwen3):
    derender, rendered = setups["parsers"]
    writer = MessagesStream(new_session(derender, rendered), message_id="m", model="tiny-qwen3")
    ids = qwen3.tokenizer.encode("<think>\nhm", add_special_tokens=False)
    frames = writer.feed(0, [{"choices": [{"index": 0, "token_ids": ids, "finish_reason": None}]}])
    frames += writer.close(RequestError("The engine stream broke.", 502, "BadGatewayError"))
    names = [(n, p.get("delta", {}).get("type")) for n, p in sse_events(frames)]
    assert names[-3:] == [("content_block_delta", "signature_delta"), ("content_block_stop", None), ("error", None)]
    assert sse_events(frames)[-1][1] == {"type": "error", "error": {"type": "api_error",
                                                                    "message": "The engine stream broke."}}
    overloaded = MessagesStream(new_session(derender, rendered), message_id="m", model="m").close(
        RequestError("Server shutting down.", 503, "ServiceUnavailableError"))
    assert sse_events(overloaded) == [("error", {"type": "error", "error": {
        "type": "overloaded_error", "message": "Server shutting down."}})]


def test_the_writer_asks_the_sse_loop_for_pings(setups):
    derender, rendered = setups["parsers"]
    writer = MessagesStream(new_session(derender, rendered), message_id="m", model="tiny-qwen3")
    assert writer.ping_interval == PING_INTERVAL > 0
    assert writer.ping() == b'event: ping\ndata: {"type":"ping"}\n\n'


@pytest.mark.parametrize("finish,stop,used,complete,expected", [
    ("length", None, True, False, ("max_tokens", None)),
    ("length", "x", False, False, ("max_tokens", None)),
    ("stop", "END", False, False, ("stop_sequence", "END")),
    ("stop", "END", True, True, ("tool_use", None)),
    ("stop", "END", True, False, ("stop_sequence", "END")),
    ("stop", 151645, False, False, ("end_turn", None)),
    ("stop", None, True, False, ("tool_use", None)),
    ("tool_calls", None, True, True, ("tool_use", None)),
    ("abort", None, False, False, (None, None)),
])
def test_stop_reason_is_vllms_mapping(finish, stop, used, complete, expected):
    assert anthropic_stop_reason(finish, stop, used, complete) == expected


@pytest.mark.parametrize("arguments,expected", [
    ("", {}), ('{"a": 1}', {"a": 1}), ('{"a": "b', {}), ('{"a": [1, 2', {"a": [1, 2]}), ("not json", {}),
])
def test_tool_input_is_what_the_sdk_makes_of_the_streamed_json(arguments, expected):
    assert tool_input(arguments) == expected
