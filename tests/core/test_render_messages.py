"""core.render_messages: the Messages -> chat conversion, the per-model probes, and robustness.

The wire answers themselves are checked against vLLM 0.33 recordings in
tests/proxy/test_messages_render_oracle.py; here: vLLM's conversion rules on structured inputs,
the probes on templates built to take each branch, and property tests (any valid request renders
or is a 4xx RequestError; its text reaches the prompt; count_tokens is the prompt's length).
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.errors import RequestError
from core.model import ModelInfo
from core.protocol.messages import (
    AnthropicCountTokensRequest,
    AnthropicMessagesRequest,
    anthropic_error_body,
    anthropic_error_type,
)
from core.protocol.chat import ChatCompletionRequest
from core.render import RenderOptions
from core.render_messages import (
    MessagesRenderer,
    chat_fields,
    chat_messages,
    chat_request_of,
    probe_disabled_thinking_effort,
    template_requires_leading_system,
    to_chat_request,
)

PARSERS = RenderOptions.build(tool_call_parser="hermes", reasoning_parser="qwen3", enable_auto_tool_choice=True)
WEATHER = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
# a template that, like some real ones, refuses a system message after the first turn
LEADING_SYSTEM_ONLY = (
    "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
    "{{ raise_exception('System message must be at the beginning.') }}{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def messages_request(**fields) -> AnthropicMessagesRequest:
    return AnthropicMessagesRequest.model_validate({"model": "tiny-qwen3", "max_tokens": 64, **fields})


def with_template(model: ModelInfo, template: str | None) -> ModelInfo:
    tokenizer = copy.copy(model.tokenizer)
    tokenizer.chat_template = template
    return dataclasses.replace(model, tokenizer=tokenizer)


# -- conversion rules (vLLM's to_chat_completion_request) ------------------------------------------

def test_user_tool_results_become_tool_messages_before_the_users_text():
    request = messages_request(messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "東京"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Here you go"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_2",
             "content": [{"type": "text", "text": "a"}, {"kind": "untyped"}, {"type": "text", "text": "b"}]},
        ]}])
    out = chat_messages(request)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert [m["tool_call_id"] for m in out[2:4]] == ["toolu_1", "toolu_2"]
    assert [m["content"] for m in out[2:4]] == ["sunny", "a\nb"]
    assert out[4]["content"] == "Here you go"
    calls = out[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["toolu_1", "toolu_2"]
    # Python's json.dumps: ASCII escapes and ", " / ": " separators, an absent input is {}
    assert calls[0]["function"]["arguments"] == json.dumps({"city": "東京"})
    assert calls[1]["function"]["arguments"] == "{}"
    assert "content" not in out[1]


def test_system_forms_and_billing_header():
    blocks = [{"type": "text", "text": "x-anthropic-billing-header: cch=1"}, {"type": "text", "text": "A"},
              {"type": "text", "text": ""}, {"type": "text", "text": "B"}]
    request = messages_request(system=blocks, messages=[
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [{"type": "text", "text": "inline"}]},
        {"role": "system", "content": "x-anthropic-billing-header: only"}])
    assert chat_messages(request) == [{"role": "system", "content": "AB"}, {"role": "user", "content": "hi"},
                                      {"role": "system", "content": "inline"}]
    merged = chat_messages(request, merge_inline_system=True)
    assert merged == [{"role": "system", "content": "ABinline"}, {"role": "user", "content": "hi"}]


def test_thinking_blocks_are_reasoning_and_one_text_block_is_a_string():
    request = messages_request(messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "a", "signature": "s"}, {"type": "redacted_thinking", "data": "x"},
        {"type": "thinking", "thinking": "b"}, {"type": "text", "text": "answer"}]}])
    assert chat_messages(request)[1] == {"role": "assistant", "reasoning": "ab", "content": "answer"}


def test_tool_choice_and_tools_mapping():
    def chat(**fields):
        return to_chat_request(messages_request(messages=[{"role": "user", "content": "q"}], **fields))

    assert chat().tool_choice is None and chat().tools is None
    assert chat(tools=[WEATHER]).tool_choice == "auto"
    assert chat(tools=[WEATHER], tool_choice={"type": "any"}).tool_choice == "required"
    named = chat(tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather",
                                               "disable_parallel_tool_use": True})
    assert named.tool_choice.function.name == "get_weather" and named.parallel_tool_calls is False
    tool = chat(tools=[{**WEATHER, "cache_control": {"type": "ephemeral"}, "strict": True}]).tools[0]
    assert tool.to_template() == {"type": "function", "function": {
        "name": "get_weather", "description": None, "parameters": WEATHER["input_schema"], "strict": True}}


def test_a_forced_choice_without_tools_is_a_400_after_vllms_own_checks(qwen3):
    """Our stricter rule (vLLM renders it, dropping the choice) is checked once the request has
    rendered: an error vLLM gives for the same request comes first."""
    renderer = MessagesRenderer(qwen3, PARSERS)
    for kind, extra in (("any", {}), ("tool", {"name": "x"})):
        request = messages_request(messages=[{"role": "user", "content": "q"}], tool_choice={"type": kind, **extra})
        for call in (renderer.render, renderer.count_tokens):
            with pytest.raises(RequestError) as err:
                call(request)
            assert (err.value.status, err.value.param) == (400, "tool_choice")
        with pytest.raises(RequestError) as err:
            renderer.render(messages_request(messages=[{"role": "user", "content": "q"}],
                                             tool_choice={"type": kind, **extra}, stop_sequences=[""]))
        assert err.value.message == "stop cannot contain an empty string."


def test_sampling_and_thinking_fields():
    chat = to_chat_request(messages_request(
        messages=[{"role": "user", "content": "q"}], max_tokens=3000, stop_sequences=["X"], temperature=0.5,
        top_k=3, stream=True, thinking={"type": "enabled", "budget_tokens": 1024}, metadata={"user_id": "u"}))
    assert (chat.max_tokens, chat.max_completion_tokens, chat.stop, chat.top_k) == (3000, 3000, ["X"], 3)
    assert chat.thinking_token_budget == 1024 and chat.reasoning_effort is None
    assert chat.stream_options.include_usage and chat.stream_options.continuous_usage_stats
    disabled = to_chat_request(messages_request(messages=[{"role": "user", "content": "q"}],
                                                thinking={"type": "disabled"}, output_config={"effort": "max"}),
                               disabled_thinking_effort="low")
    assert disabled.reasoning_effort == "low"


# -- probes -----------------------------------------------------------------------------------------

def test_inline_system_probe(qwen3, llama3):
    assert template_requires_leading_system(qwen3) is False
    assert template_requires_leading_system(llama3) is False
    assert template_requires_leading_system(with_template(qwen3, LEADING_SYSTEM_ONLY)) is True
    assert template_requires_leading_system(with_template(qwen3, None)) is True


def test_inline_system_merged_for_a_template_that_needs_it(qwen3):
    model = with_template(qwen3, LEADING_SYSTEM_ONLY)
    request = messages_request(system="S1", messages=[{"role": "user", "content": "u1"},
                                                      {"role": "system", "content": "S2"},
                                                      {"role": "user", "content": "u2"}])
    ids = MessagesRenderer(model, RenderOptions.build()).render(request).prompt_token_ids
    text = model.tokenizer.decode(ids, skip_special_tokens=False)
    assert text.count("<|im_start|>system") == 1 and "S1S2" in text


@pytest.mark.slow
def test_disabled_thinking_effort_probe(qwen3, llama3):
    # Qwen3's template honours enable_thinking: "none" renders differently from every effort
    assert probe_disabled_thinking_effort(qwen3, PARSERS) == "none"
    # Llama 3.2's ignores it: "none" renders like "low", so thinking cannot be disabled by "none"
    assert probe_disabled_thinking_effort(llama3, RenderOptions.build()) == "low"


def test_configured_disabled_effort_reaches_the_template_kwargs(qwen3):
    renderer = MessagesRenderer(qwen3, PARSERS, disabled_thinking_effort="medium")
    rendered = renderer.render(messages_request(messages=[{"role": "user", "content": "q"}],
                                                thinking={"type": "disabled"}))
    kwargs = rendered.generate_request["parse_context"]["chat_template_kwargs"]
    assert kwargs["reasoning_effort"] == "medium" and kwargs["enable_thinking"] is True


def test_rendered_messages_for_the_front_door(qwen3):
    rendered = MessagesRenderer(qwen3, PARSERS).render(messages_request(
        messages=[{"role": "user", "content": "q"}], tools=[WEATHER], tool_choice={"type": "any"},
        stop_sequences=["END"]), request_id="abc")
    gen, chat = rendered.generate_request, rendered.chat_request
    assert gen["request_id"] == "chatcmpl-abc" and rendered.stop_sequences == ["END"]
    assert gen["sampling_params"]["stop"] == ["END"]
    # the parser's adjustments are on the chat request the derender will read
    assert chat.tool_choice == "required" and chat.structured_outputs.structural_tag is not None
    assert gen["parse_context"]["tool_choice"] == "required"


def test_error_bodies():
    assert [anthropic_error_type(s) for s in (400, 401, 403, 404, 413, 422, 429, 500, 501, 503)] == [
        "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
        "request_too_large", "invalid_request_error", "rate_limit_error", "api_error", "api_error",
        "overloaded_error"]
    body = anthropic_error_body("cannot read /usr/lib/python3/x.py", 500)
    assert body == {"type": "error", "error": {"type": "api_error", "message": "cannot read <path>"}}


# -- properties ---------------------------------------------------------------------------------------

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8)
TEXT = st.lists(WORD, min_size=1, max_size=4).map(" ".join)
JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner,
                                                                                   max_size=2), max_leaves=5)
TEXT_BLOCK = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
BLOCK = st.one_of(
    TEXT_BLOCK,
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, TEXT),
    st.just({"type": "redacted_thinking", "data": "AAAA"}),
    st.builds(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a},
              st.sampled_from(["t1", "t2"]), st.sampled_from(["get_weather", "other"]),
              st.dictionaries(st.sampled_from(["city", "n"]), JSONISH, max_size=2)),
    st.builds(lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e},
              st.sampled_from(["t1", "t2"]), TEXT | st.lists(TEXT_BLOCK, max_size=2) | st.none(), st.booleans()),
)
MESSAGE = st.builds(lambda role, content: {"role": role, "content": content},
                    st.sampled_from(["user", "assistant", "system"]), TEXT | st.lists(BLOCK, max_size=3))
CHOICE = st.none() | st.sampled_from([{"type": "auto"}, {"type": "any"}, {"type": "none"},
                                      {"type": "tool", "name": "get_weather"}, {"type": "tool", "name": "nope"},
                                      {"type": "auto", "disable_parallel_tool_use": True}])
THINKING = st.none() | st.sampled_from([{"type": "disabled"}, {"type": "adaptive"},
                                        {"type": "enabled", "budget_tokens": 1024}])


def _user_texts(body: dict) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block["type"] == "text":
                texts.append(block["text"])
            elif block["type"] == "tool_result" and isinstance(block["content"], str):
                texts.append(block["content"])
    return texts


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(MESSAGE, min_size=1, max_size=4), system=st.none() | TEXT | st.lists(TEXT_BLOCK, max_size=2),
       tools=st.none() | st.just([WEATHER]), tool_choice=CHOICE, thinking=THINKING,
       options=st.sampled_from([PARSERS, RenderOptions.build()]))
def test_any_valid_request_renders_or_is_a_4xx(qwen3, messages, system, tools, tool_choice, thinking, options):
    body = {"model": "tiny-qwen3", "max_tokens": 2048, "messages": messages}
    for key, value in (("system", system), ("tools", tools), ("tool_choice", tool_choice), ("thinking", thinking)):
        if value is not None:
            body[key] = value
    try:
        request = AnthropicMessagesRequest.model_validate(copy.deepcopy(body))
    except ValidationError:
        return
    renderer = MessagesRenderer(qwen3, options)
    try:
        rendered = renderer.render(request)
    except RequestError as exc:
        assert 400 <= exc.status < 500
        return
    ids = rendered.prompt_token_ids
    prompt = qwen3.tokenizer.decode(ids, skip_special_tokens=False)
    for text in _user_texts(body):
        assert text in prompt
    count_body = {k: v for k, v in body.items() if k in AnthropicCountTokensRequest.model_fields}
    assert renderer.count_tokens(AnthropicCountTokensRequest.model_validate(count_body)) == len(ids)
    json.dumps(rendered.generate_request)  # plain JSON all the way down


IMAGE_BLOCK = st.builds(lambda d: {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}},
                        st.sampled_from(["AAAA", ""]))
FIELDS = {
    # each optional field: what a client may send, valid or not for the chat request's own rules
    "temperature": st.none() | st.floats(-1, 3) | st.integers(0, 2),
    "top_p": st.none() | st.floats(0, 1),
    "top_k": st.none() | st.integers(-1, 50),
    "stop_sequences": st.none() | st.lists(TEXT, max_size=3),
    "stream": st.booleans(),
    "watermarking": st.none() | st.booleans(),
    "mm_payload": st.sampled_from(["tensors", "none"]),
    "cache_salt": st.none() | st.sampled_from(["salt", "a/b", "x" * 200]),
    "kv_transfer_params": st.none() | st.just({"prompt_token_ids": [1, 2]}) | st.just({"do_remote_decode": True}),
    "ec_transfer_params": st.none() | st.just({"k": 1}),
    "vllm_xargs": st.none() | st.just({"a": 1}),
    "chat_template_kwargs": st.none() | st.just({"enable_thinking": False}),
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(MESSAGE | st.builds(lambda b: {"role": "user", "content": [b]}, IMAGE_BLOCK),
                         min_size=1, max_size=4),
       system=st.none() | TEXT | st.lists(TEXT_BLOCK, max_size=2), merge=st.booleans(), data=st.data())
def test_the_chat_request_is_built_as_validating_it_would(messages, system, merge, data):
    """`chat_request_of` skips the chat request's validation only where it changes nothing: the
    same request (fields, fields set, values) or, where the chat rules refuse it, the same error."""
    body = {"model": "tiny-qwen3", "max_tokens": data.draw(st.integers(1, 4096)), "messages": messages}
    if system is not None:
        body["system"] = system
    for name, values in FIELDS.items():
        if data.draw(st.booleans()):
            body[name] = data.draw(values)
    try:
        request = AnthropicMessagesRequest.model_validate(copy.deepcopy(body))
        fields = chat_fields(request, merge)
    except (ValidationError, RequestError):
        return
    try:
        expected = ChatCompletionRequest.model_validate(copy.deepcopy(fields))
    except Exception as exc:  # the chat rules' own errors (cache_salt's, ...) must stay
        with pytest.raises(type(exc)):
            chat_request_of(copy.deepcopy(fields))
        return
    built = chat_request_of(copy.deepcopy(fields))
    assert len(built.request_id) == len(expected.request_id) == 16  # random, made per request by both
    built.__dict__["request_id"] = expected.request_id
    assert built.__dict__ == expected.__dict__
    assert list(built.__dict__) == list(expected.__dict__)
    assert built.model_fields_set == expected.model_fields_set
    assert built.model_dump() == expected.model_dump()
