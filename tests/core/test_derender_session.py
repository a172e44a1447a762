"""The one derender machine: any chunking of any output aggregates to the non-streamed answer.

For the front door (a `DerenderSession` driven by the real chat stream writer, vs. the session's
non-streamed `chat_response`) and for the raw derender endpoints (`derender_chat_stream` calls with
`stream_state` JSON round trips, vs. `derender_chat`), with real Qwen3 / Llama 3 tokenizers: any
token sequence a model may write (reasoning, content with unicode, hermes tool calls), ended by
EOS or by the length limit, any chunking (one chunk, one token per chunk, random), with the finish
on the last token or on an empty last chunk.

Then the session's own duties: choices built lazily, stop strings and the max_tokens cap ending
choices and naming the engine requests to abort, and engine output that breaks the protocol.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.derender import DerenderSettings, derender_chat, derender_chat_stream
from core.derender.adapters.chat import ChatStream, chat_response
from core.derender.session import DerenderSession, EngineOutputError
from core.derender.spec import OutputSpec
from core.engine_request import max_tokens
from core.protocol.chat import ChatCompletionRequest
from core.protocol.derender import validate_derender_body
from core.render import render_chat

HYP = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
QWEN_EOS = 151645
LLAMA_EOT = 128009
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
WORDS = st.sampled_from(["Hi", " there", "!", " 👋", " 東京", " é", "\n", "\n\n", " ok", ",", " 12", "  "])


@st.composite
def model_output(draw, with_markup: bool) -> str:
    parts = []
    if with_markup and draw(st.booleans()):
        parts.append("<think>\n" + "".join(draw(st.lists(WORDS, max_size=6))) + "\n</think>\n\n")
    parts.append("".join(draw(st.lists(WORDS, max_size=10))))
    if with_markup:
        for _ in range(draw(st.integers(0, 2))):
            city = draw(st.sampled_from(["Paris", "東京", "a \\\"q\\\" b", "\\ud83d\\uddfc"]))
            parts.append('<tool_call>\n{"name": "get_weather", "arguments": {"city": "' + city + '"}}\n</tool_call>')
    return "".join(parts)


@st.composite
def chunking(draw, n: int) -> tuple[list[int], bool]:
    """Cut points into n ids, and whether the finish comes on an empty chunk of its own."""
    how = draw(st.sampled_from(["one", "per_token", "random"]))
    if how == "one":
        cuts = []
    elif how == "per_token":
        cuts = list(range(1, n))
    else:
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=6))))
    return [c for c in cuts if 0 < c < n], draw(st.booleans())


def engine_events(ids: list[int], cuts: list[int], empty_finish: bool, finish: str, stop_reason):
    bounds = [0, *cuts, len(ids)]
    events = [{"choices": [{"index": 0, "token_ids": ids[a:b], "finish_reason": None, "stop_reason": None}]}
              for a, b in zip(bounds, bounds[1:])]
    if empty_finish:
        events.append({"choices": [{"index": 0, "token_ids": [], "finish_reason": None, "stop_reason": None}]})
    events[-1]["choices"][0].update(finish_reason=finish, stop_reason=stop_reason)
    return events


def aggregate(frames: list[bytes]) -> dict:
    """A chat SSE stream, summed up the way a client does."""
    out = {"content": "", "reasoning": "", "calls": {}, "finish": None, "stop_reason": None}
    for frame in b"".join(frames).split(b"\n\n"):
        if not frame.startswith(b"data: {"):
            continue
        for choice in orjson.loads(frame[6:])["choices"]:
            delta = choice.get("delta") or {}
            out["content"] += delta.get("content") or ""
            out["reasoning"] += delta.get("reasoning") or ""
            for call in delta.get("tool_calls") or ():
                slot = out["calls"].setdefault(call["index"], ["", ""])
                slot[0] += call.get("function", {}).get("name") or ""
                slot[1] += call.get("function", {}).get("arguments") or ""
            if choice.get("finish_reason"):
                out["finish"], out["stop_reason"] = choice["finish_reason"], choice.get("stop_reason")
    out["calls"] = [tuple(out["calls"][i]) for i in sorted(out["calls"])]
    return out


def summary(message: dict, finish: str, stop_reason) -> dict:
    return {"content": message["content"] or "", "reasoning": message.get("reasoning") or "",
            "calls": [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()],
            "finish": finish, "stop_reason": stop_reason}


CASES = {
    "qwen3 plain": ("qwen3", {}, False, QWEN_EOS),
    "qwen3 hermes+qwen3": ("qwen3", {"reasoning_parser": "qwen3", "tool_call_parser": "hermes",
                                     "enable_auto_tool_choice": True}, True, QWEN_EOS),
    "llama3 plain": ("llama3", {}, False, LLAMA_EOT),
}


@pytest.fixture(scope="module")
def setups(qwen3, llama3):
    out = {}
    for name, (family, flags, markup, eos) in CASES.items():
        model = qwen3 if family == "qwen3" else llama3
        settings_ = DerenderSettings.build(model, **flags)
        body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 4096,
                "chat_template_kwargs": {"date_string": "26 Jul 2024"}}
        if markup:
            body["tools"] = TOOLS
        out[name] = (settings_, body, markup, eos)
    return out


def front_door(settings_, body, events, prompt_ids=None):
    req = ChatCompletionRequest.model_validate(dict(body, stream=True))
    gen = render_chat(settings_.model, settings_.render, req)
    ids = gen["token_ids"] if prompt_ids is None else prompt_ids

    def session():
        spec = OutputSpec.for_chat(settings_, req, gen["sampling_params"], settings_.parser_for(req), max_tokens(gen))
        return DerenderSession(spec, [ids], 1)

    writer = ChatStream(session(), req, request_id="r", created=1, model="m", prompt_token_ids=ids,
                        reasoning_field="reasoning")
    frames = writer.head() + [f for e in events for f in writer.feed(0, [e])] + writer.close(None)
    whole = session()
    whole.collect(0, events)
    response = chat_response(whole, req, request_id="r", created=1, model="m", prompt_token_ids=ids,
                             reasoning_field="reasoning")
    choice = response["choices"][0]
    return aggregate(frames), summary(choice["message"], choice["finish_reason"], choice["stop_reason"])


def raw(settings_, body, events, prompt_ids):
    chat_request = dict(body)
    state, frames = None, []
    for n, event in enumerate(events):
        call = {"stream": True, "model": None, "chat_request": chat_request, "stream_state": state,
                "prompt_token_ids": prompt_ids if n == 0 else None,
                "generate_chunk": {"request_id": "generate-tokens-r", "choices": event["choices"]}}
        got = derender_chat_stream(settings_, validate_derender_body(json.loads(json.dumps(call)), chat=True))
        frames.append(b"data: " + orjson.dumps(got["chunk"]) + b"\n\n")
        state = got["stream_state"]
    last = events[-1]["choices"][0]
    ids = [t for e in events for t in e["choices"][0]["token_ids"]]
    whole = derender_chat(settings_, validate_derender_body({
        "chat_request": chat_request, "prompt_token_ids": prompt_ids,
        "generate_response": {"request_id": "generate-tokens-r", "choices": [
            {"index": 0, "token_ids": ids, "finish_reason": last["finish_reason"],
             "stop_reason": last["stop_reason"]}]}}, chat=True))
    choice = whole["choices"][0]
    return aggregate(frames), summary(choice["message"], choice["finish_reason"], choice["stop_reason"])


@pytest.mark.parametrize("case", list(CASES))
@HYP
@given(data=st.data())
def test_any_chunking_aggregates_to_the_non_streamed_answer(setups, case, data):
    settings_, body, markup, eos = setups[case]
    if markup and data.draw(st.booleans()):  # thinking off: special-token text is no longer dropped
        body = dict(body, chat_template_kwargs={"enable_thinking": False})
    tokenizer = settings_.model.tokenizer
    ids = tokenizer.encode(data.draw(model_output(markup)), add_special_tokens=False)
    ends_on_eos = data.draw(st.booleans())
    if ends_on_eos:
        ids = ids + [eos]
    if not ids:
        ids = [tokenizer.encode("x", add_special_tokens=False)[0]]
    cuts, empty_finish = data.draw(chunking(len(ids)))
    finish, stop_reason = ("stop", eos) if ends_on_eos else ("length", None)
    events = engine_events(ids, cuts, empty_finish, finish, stop_reason)
    prompt = tokenizer.encode("<|im_start|>assistant\n" if case.startswith("qwen3") else "assistant\n\n",
                              add_special_tokens=False)

    streamed, whole = front_door(settings_, body, events)
    assert streamed == whole
    assert "<|im_end|>" not in streamed["content"] and "<|eot_id|>" not in streamed["content"]

    streamed, whole = raw(settings_, body, events, prompt)
    assert (streamed["content"], streamed["reasoning"], streamed["calls"]) == \
           (whole["content"], whole["reasoning"], whole["calls"])
    assert streamed["finish"] == whole["finish"]


@pytest.mark.parametrize("empty_finish", [False, True])
def test_end_of_turn_never_reaches_content_when_special_tokens_are_kept(setups, empty_finish):
    """The chunking vLLM's own streams were replayed with: hermes keeps special tokens, and the
    finish arrives on an empty chunk after the end-of-turn token."""
    settings_, body, _, _ = setups["qwen3 hermes+qwen3"]
    body = dict(body, chat_template_kwargs={"enable_thinking": False})
    ids = [13048, 1052, 0, 61804, 233, QWEN_EOS]
    events = engine_events(ids, [], empty_finish, "stop", QWEN_EOS)
    streamed, whole = front_door(settings_, body, events)
    assert streamed["content"] == whole["content"] == "Hi there! 👋"
    assert streamed["finish"] == whole["finish"] == "stop" and streamed["stop_reason"] is None  # vllm serve's EOS


def plain_session(qwen3, n=1, prompts=1, **spec_fields):
    spec = OutputSpec(settings=DerenderSettings(model=qwen3), text=OutputSpec.for_raw_chat(
        DerenderSettings(model=qwen3), None, None).text, **spec_fields)
    return DerenderSession(spec, [[1, 2]] * prompts, n)


def test_choices_are_built_when_their_first_chunk_arrives(qwen3):
    session = plain_session(qwen3, n=16384, prompts=64)
    assert session.choices == {}
    session.feed(3, {"choices": [{"index": 7, "token_ids": [13048], "finish_reason": None}]})
    assert list(session.choices) == [3 * 16384 + 7]


def test_a_stop_string_ends_the_choice_and_names_its_prompt_for_an_abort(qwen3):
    from core.derender.text import TextOptions

    spec = OutputSpec(settings=DerenderSettings(model=qwen3), text=TextOptions(stop=("there",)))
    session = DerenderSession(spec, [[1], [2]], 1)
    ids = qwen3.tokenizer.encode("Hi there friend")
    events = session.feed(1, {"choices": [{"index": 0, "token_ids": ids, "finish_reason": None}]})
    assert "".join(e.text for e in events) == "Hi " and events[-1].finish_reason == "stop"
    assert events[-1].stop_reason == "there"
    assert session.to_abort() == [1] and session.to_abort() == []  # once
    assert session.feed(1, {"choices": [{"index": 0, "token_ids": [13], "finish_reason": None}]}) == []
    assert not session.done and session.prompt_done(1)


def test_an_engine_past_max_tokens_is_cut_at_the_cap_with_length(qwen3):
    session = plain_session(qwen3, max_tokens=3)
    ids = qwen3.tokenizer.encode("one two three four five six")
    events = session.feed(0, {"choices": [{"index": 0, "token_ids": ids[:2], "finish_reason": None}]})
    events += session.feed(0, {"choices": [{"index": 0, "token_ids": ids[2:], "finish_reason": None}]})
    assert "".join(e.text for e in events) == qwen3.tokenizer.decode(ids[:3])
    assert events[-1].finish_reason == "length" and session.completion_tokens == 3
    assert session.to_abort() == [0]


def test_an_engine_that_honours_max_tokens_is_not_aborted(qwen3):
    session = plain_session(qwen3, max_tokens=3)
    ids = qwen3.tokenizer.encode("one two three")
    session.feed(0, {"choices": [{"index": 0, "token_ids": ids, "finish_reason": None}]})
    session.feed(0, {"choices": [{"index": 0, "token_ids": [], "finish_reason": "length"}]})
    assert session.done and session.to_abort() == []


@pytest.mark.parametrize("choice,why", [
    ({"index": 1, "token_ids": [1]}, "out of range"),
    ({"index": -1, "token_ids": [1]}, "out of range"),
    ({"index": 0, "token_ids": [10**9]}, "out of the vocabulary"),
    ({"index": 0, "token_ids": [-1]}, "out of the vocabulary"),
    ({"index": 0, "token_ids": [1.5]}, "not a list of integers"),
    ({"index": 0, "token_ids": "12"}, "not a list of integers"),
    ({"index": 0, "token_ids": [1], "logprobs": {"content": [{"logprob": -1}]}}, "malformed"),
    ("nope", "not an object"),
])
def test_engine_output_that_breaks_the_protocol_is_an_engine_error(qwen3, choice, why):
    session = plain_session(qwen3, logprobs=True)
    with pytest.raises(EngineOutputError, match=why):
        session.feed(0, {"choices": [choice]})


def test_finish_reason_error_is_a_generation_failure(qwen3):
    with pytest.raises(EngineOutputError) as info:
        plain_session(qwen3).feed(0, {"choices": [{"index": 0, "token_ids": [1], "finish_reason": "error"}]})
    assert info.value.generation_failed
