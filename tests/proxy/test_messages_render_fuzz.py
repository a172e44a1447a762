"""Hostile-client fuzzing of /v1/messages/render and /v1/messages/count_tokens over real HTTP.

The same mutations as tests/proxy/test_fuzz_endpoints.py (wrong types, huge ints, NaN, lone
surrogates, deep nesting, deletions) applied to a rich Messages request. Never a 5xx; render
errors are vLLM's OpenAI error body, count_tokens errors Anthropic's `{"type": "error", ...}`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.proxy.test_fuzz_endpoints import Http, Response, check_answer, encode, mutated, stack  # noqa: F401

BODY = {
    "model": "tiny-qwen3", "max_tokens": 2048, "stop_sequences": ["END"], "temperature": 0.5,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Use the tool.", "signature": "s"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "Thanks"}]}],
}
COUNT_BODY = {k: v for k, v in BODY.items() if k not in ("max_tokens", "stop_sequences", "temperature")}
HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def http(stack):  # noqa: F811
    client = Http(stack.url)
    yield client
    client.close()


def check_anthropic_answer(resp: Response) -> None:
    assert resp.status_code < 500, (resp.status_code, resp.text[:600])
    data = resp.json()
    if resp.status_code >= 300:
        assert list(data) == ["type", "error"] and data["type"] == "error", data
        assert list(data["error"]) == ["type", "message"] and data["error"]["message"], data
    else:
        assert isinstance(data["input_tokens"], int) and data["input_tokens"] > 0


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=mutated(BODY))
def test_render_never_fails_badly(http, body):
    check_answer(http.post("/v1/messages/render", encode(body), HEADERS))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=mutated(COUNT_BODY))
def test_count_tokens_never_fails_badly(http, body):
    check_anthropic_answer(http.post("/v1/messages/count_tokens", encode(body), HEADERS))
