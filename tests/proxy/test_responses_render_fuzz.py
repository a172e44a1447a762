"""Hostile-client fuzzing of POST /v1/responses/render over real HTTP.

The same property as tests/proxy/test_fuzz_endpoints.py for the other routes: whatever the body
(valid Responses requests with random mutations at random places, random JSON, random items), the
answer is never a 5xx and every error is an OpenAI error body with `code == status`. It covers
the two shapes where vLLM 0.33 itself answers 500 (a refusal or an empty assistant message).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.proxy.frontdoor_stack import PARSERS, Stack
from tests.proxy.test_fuzz_endpoints import JSON_VALUES, Http, check_answer, encode, mutated, post

PATH = "/v1/responses/render"
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
BODY = {
    "model": "tiny-qwen3", "instructions": "Be brief.", "tools": [WEATHER, {
        "type": "namespace", "name": "crm", "description": "CRM", "tools": [
            {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]},
        {"type": "custom", "name": "note"}],
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "tool"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "18C"},
        {"type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "18C."}]},
        {"type": "custom_tool_call", "call_id": "c2", "name": "note", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
        {"role": "user", "content": "Thanks"}],
    "tool_choice": "auto", "parallel_tool_calls": False, "text": {"format": {"type": "json_object"}},
    "reasoning": {"effort": "low"}, "include": ["message.output_text.logprobs"], "top_logprobs": 2,
    "max_output_tokens": 64, "temperature": 0.5, "metadata": {"k": "v"}, "user": "u", "stop": ["xyz"],
}
ITEM_TEMPLATES = BODY["input"] + [
    {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    {"type": "message", "role": "assistant", "content": []},
    {"type": "message", "role": "assistant", "status": "incomplete", "content": [{"type": "output_text",
                                                                                   "text": "Once"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "e"},
    {"type": "item_reference", "id": "msg_1"},
    {"type": "function_call", "call_id": "c3", "namespace": "crm", "name": "lookup", "arguments": "{}"},
]


@pytest.fixture(scope="module")
def http(qwen3):
    stack = Stack(qwen3, **PARSERS)
    client = Http(stack.url)
    yield client
    client.close()
    stack.close()


def test_base_body_is_accepted(http):
    resp = post(http, PATH, encode(BODY))
    assert resp.status_code == 200, resp.text[:500]
    check_answer(resp)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_bodies_never_5xx(http, data):
    check_answer(post(http, PATH, encode(data.draw(mutated(BODY)))))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(items=st.lists(st.sampled_from(ITEM_TEMPLATES), min_size=1, max_size=6),
       extra=st.dictionaries(st.sampled_from(["tool_choice", "tools", "truncation", "previous_response_id"]),
                             JSON_VALUES, max_size=1))
def test_random_item_sequences_never_5xx(http, items, extra):
    check_answer(post(http, PATH, encode({**BODY, "input": items, **extra})))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=JSON_VALUES)
def test_random_json_never_5xx(http, body):
    check_answer(post(http, PATH, encode(body)))
