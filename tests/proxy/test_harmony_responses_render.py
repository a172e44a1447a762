"""gpt-oss `POST /v1/responses/render` (Harmony) over HTTP, field for field against vLLM 0.33.

Fixture: tests/fixtures/oracle/render_responses_gptoss.json (tests/oracle/record_harmony_responses.py,
recorded with VLLM_SYSTEM_START_DATE=2025-06-28, pinned here too). A case marked `deviation` is one
where we answer differently on purpose: our answer must equal its `expected` part.
"""

from __future__ import annotations

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.frontier_models import gptoss_model
from tests.oracle_fixtures import load_fixture
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
