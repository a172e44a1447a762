"""Replay every recorded vLLM 0.33 `POST /v1/responses/render` answer through our HTTP app.

Each case of tests/fixtures/oracle/render_responses.json is sent to an app configured like the
vLLM server it was recorded on; status and body must be identical. Request ids vLLM made up
(`resp_<16 hex>`, when the body sets no `request_id`) are compared by shape. A case marked
`deviation` is one where we answer differently on purpose (vLLM accepts silently or fails with a
500): our answer must equal its `expected` part instead, and vLLM's own answer must still be
what the fixture says it is (so the deviation stays documented).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.model_loader import load_model
from tests.oracle_fixtures import load_fixture
from tests.proxy.test_render_oracle import expand  # {"$repeat": [text, n]}: how recorders store long prompts

FIXTURE = "render_responses"
RANDOM_ID = re.compile(r"^resp_[0-9a-f]{16}$")

SERVERS: dict[str, dict[str, Any]] = {
    "q3-parsers": {"family": "qwen3", "config": {"tool_call_parser": "hermes", "reasoning_parser": "qwen3",
                                                 "enable_auto_tool_choice": True}},
    "l3-parsers": {"family": "llama3", "config": {"tool_call_parser": "llama3_json",
                                                  "enable_auto_tool_choice": True}},
    "l3-256": {"family": "llama3", "config": {}, "max_model_len": 256},
}


def cases() -> list[Any]:
    return [pytest.param(case, id=case["name"]) for case in load_fixture(FIXTURE)]


def expected_answer(case: dict[str, Any]) -> tuple[int, Any]:
    if "deviation" in case:
        return case["expected"]["status"], case["expected"]["response"]
    return case["status"], case["response"]


def normalize_id(body: Any, request: Any) -> Any:
    """A made-up `resp_<16 hex>` request id -> a placeholder (only when the body chose none)."""
    if not isinstance(body, dict) or not isinstance(body.get("request_id"), str):
        return body
    if isinstance(request, dict) and "request_id" in request:
        return body
    assert RANDOM_ID.match(body["request_id"]), body["request_id"]
    return {**body, "request_id": "resp_<random>"}


@pytest.fixture(scope="module")
def models(model_dirs):
    cache: dict[str, Any] = {}

    def get(server: str):
        if server not in cache:
            family = SERVERS[server]["family"]
            cache[server] = load_model(str(model_dirs[family]), served_model_names=[f"tiny-{family}"],
                                       max_model_len=SERVERS[server].get("max_model_len"))
        return cache[server]
    return get


async def post_case(client: Any, case: dict[str, Any]) -> tuple[int, Any]:
    headers = dict(case.get("request_headers") or {})
    if case.get("request_raw") is not None:
        data = case["request_raw"].encode()
    else:
        data = json.dumps(expand(copy.deepcopy(case["request"]))).encode()
    headers.setdefault("Content-Type", "application/json")
    resp = await client.post(case["path"], data=data, headers=headers)
    return resp.status, await resp.json()


@pytest.mark.parametrize("case", cases())
async def test_responses_render_matches_vllm(case, models, aiohttp_client):
    config = ServerConfig(**SERVERS[case["server"]]["config"])
    client = await aiohttp_client(create_app(config, models(case["server"])))
    status, body = await post_case(client, case)
    want_status, want_body = expected_answer(case)
    request = case.get("expected_request") or case["request"]
    assert status == want_status, body
    assert normalize_id(body, request) == normalize_id(want_body, request)


def test_deviations_are_documented():
    """Every deviation says why, and vLLM's own answer differs from ours (else it is no deviation)."""
    deviations = [c for c in load_fixture(FIXTURE) if "deviation" in c]
    assert deviations
    for case in deviations:
        assert case["deviation"].strip()
        assert (case["status"], case["response"]) != (case["expected"]["status"], case["expected"]["response"])
        assert case["status"] == 500 or case["status"] == 200
