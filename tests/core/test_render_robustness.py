"""Whatever a client sends, render answers or raises a RequestError (a 4xx), never anything else."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.errors import RequestError
from core.protocol.chat import ChatCompletionRequest
from core.protocol.completion import CompletionRequest
from core.render import RenderOptions, render_chat, render_completion

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
CHAT_FIELDS = sorted(set(ChatCompletionRequest.model_fields) - {"messages"})
COMPLETION_FIELDS = sorted(CompletionRequest.model_fields)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", "developer", "x"])},
                                optional={"content": JSON, "tool_calls": JSON, "name": JSON, "reasoning": JSON,
                                          "tool_call_id": JSON})
OPTIONS = [RenderOptions.build(), RenderOptions.build(tool_call_parser="hermes", reasoning_parser="qwen3",
                                                      enable_auto_tool_choice=True)]


def attempt(build, model, options, body):
    try:
        request = model.model_validate(body)
    except (ValidationError, RequestError):
        return
    try:
        build(request, options)
    except RequestError as exc:
        assert 400 <= exc.status < 500


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(MESSAGE, max_size=3), overrides=st.dictionaries(st.sampled_from(CHAT_FIELDS), JSON, max_size=3),
       parsers=st.sampled_from(OPTIONS))
def test_chat_render_never_fails_unexpectedly(qwen3, messages, overrides, parsers):
    body = {"messages": messages, **overrides}
    attempt(lambda r, o: render_chat(qwen3, o, r), ChatCompletionRequest, parsers, body)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overrides=st.dictionaries(st.sampled_from(COMPLETION_FIELDS), JSON, max_size=4))
def test_completion_render_never_fails_unexpectedly(llama3, overrides):
    body = {"prompt": "hello", **overrides}
    attempt(lambda r, o: render_completion(llama3, o, r), CompletionRequest, OPTIONS[0], body)


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e308, -0.0, 2**63, -(2**63) - 1])
def test_extreme_numbers(qwen3, value):
    for field in ("temperature", "top_p", "top_k", "max_tokens", "n", "seed", "presence_penalty", "min_p",
                  "repetition_penalty", "logprobs", "top_logprobs", "priority", "truncate_prompt_tokens"):
        attempt(lambda r, o: render_chat(qwen3, o, r), ChatCompletionRequest, OPTIONS[1],
                {"messages": [{"role": "user", "content": "hi"}], field: value, "logprobs": True})
