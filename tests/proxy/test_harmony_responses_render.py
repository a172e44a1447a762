"""gpt-oss `POST /v1/responses/render` (Harmony) over HTTP, field for field against vLLM 0.33.

Fixture: tests/fixtures/oracle/render_responses_gptoss.json (tests/oracle/record_harmony_responses.py,
recorded with VLLM_SYSTEM_START_DATE=2025-06-28, pinned here too). A case marked `deviation` is one
where we answer differently on purpose: our answer must equal its `expected` part.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.frontier_models import gptoss_model
from tests.oracle_fixtures import load_fixture
from tests.proxy.test_responses_render_fuzz import BODY as GENERIC_FUZZ_BODY
from tests.proxy.test_responses_render_oracle import expected_answer, normalize_id, post_case

CONFIG = {"tool_call_parser": "openai", "reasoning_parser": "openai_gptoss", "enable_auto_tool_choice": True}
CASES = load_fixture("render_responses_gptoss")


@pytest.fixture(autouse=True)
def pinned_date(monkeypatch):
    monkeypatch.setenv("VLLM_SYSTEM_START_DATE", "2025-06-28")


@pytest.fixture(scope="module")
def app_model():
    return gptoss_model()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_responses_render_matches_vllm(case, app_model, aiohttp_client):
    client = await aiohttp_client(create_app(ServerConfig(**CONFIG), app_model))
    status, body = await post_case(client, case)
    want_status, want_body = expected_answer(case)
    assert status == want_status, body
    assert normalize_id(body, case["request"]) == normalize_id(want_body, case["request"])


def test_deviations_are_documented():
    deviations = [c for c in CASES if "deviation" in c]
    assert deviations
    for case in deviations:
        assert case["deviation"].strip()
        assert (case["status"], case["response"]) != (case["expected"]["status"], case["expected"]["response"])


@pytest.mark.parametrize("history", [
    [{"author": {"role": "robot"}, "content": "x"}],
    [{"role": "robot", "content": "x"}],
    [{"role": "assistant", "tool_calls": ["not a call"]}],
    [{"author": {"role": "user"}, "content": [1, 2]}],
    [{"content": "no role"}],
])
async def test_odd_previous_input_messages_are_400s(history, app_model, aiohttp_client):
    """vLLM answers most of these with a 500; ours are API-shaped 400s."""
    client = await aiohttp_client(create_app(ServerConfig(**CONFIG), app_model))
    resp = await client.post("/v1/responses/render", json={"model": "tiny-gptoss", "input": "hi",
                                                           "previous_input_messages": history})
    body = await resp.json()
    assert resp.status == 400, body
    assert body["error"]["param"] in ("previous_input_messages", "input")


# -- hostile clients: never a 5xx (tests/proxy/test_responses_render_fuzz.py's property, gpt-oss) --------

FUZZ_BODY = {
    "model": "tiny-gptoss", "instructions": "Be brief.", "tools": [{
        "type": "function", "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    # the generic fuzz body's user, reasoning, call, call output and assistant items (no custom tools here)
    "input": [*GENERIC_FUZZ_BODY["input"][:5], {"role": "system", "content": "Later rule."},
              {"role": "user", "content": "Thanks"}],
    "previous_input_messages": [{"role": "user", "content": "Earlier"},
                                {"author": {"role": "assistant"}, "channel": "final", "content": "Hi"}],
    "tool_choice": "auto", "parallel_tool_calls": False, "text": {"format": {"type": "json_object"}},
    "reasoning": {"effort": "low"}, "max_output_tokens": 64, "temperature": 0.5,
}


@pytest.fixture(scope="module")
def fuzz_http():
    from tests.proxy.frontdoor_stack import Stack
    from tests.proxy.test_fuzz_endpoints import Http

    stack = Stack(gptoss_model(), **CONFIG)
    client = Http(stack.url)
    yield client
    client.close()
    stack.close()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_bodies_never_5xx(fuzz_http, data):
    from tests.proxy.test_fuzz_endpoints import check_answer, encode, mutated, post

    body = data.draw(mutated(FUZZ_BODY))
    resp = post(fuzz_http, "/v1/responses/render", encode(body))
    check_answer(resp)


def test_the_fuzz_base_body_renders(fuzz_http):
    from tests.proxy.test_fuzz_endpoints import encode, post

    resp = post(fuzz_http, "/v1/responses/render", encode(FUZZ_BODY))
    assert resp.status_code == 200, resp.text[:500]
