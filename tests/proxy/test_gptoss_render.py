"""gpt-oss chat render (Harmony) over HTTP, field for field against vLLM 0.33's render server.

Fixture: tests/fixtures/oracle/render_gptoss.json (tests/oracle/record_harmony.py; the oracle pins
the Harmony system message's date with VLLM_SYSTEM_START_DATE=2025-06-28, and so do we here).
Our model directory is built at test time from PyPI packages (tests/frontier_models.py).
"""

from __future__ import annotations

import json
import re

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.frontier_models import gptoss_model
from tests.oracle_fixtures import load_fixture

SERVERS = {
    "gptoss-parsers": {"tool_call_parser": "openai", "reasoning_parser": "openai_gptoss",
                       "enable_auto_tool_choice": True},
    # no parser flags: vLLM (and `derender-proxy serve`, proxy.model_loader.apply_model_parser_defaults) default
    # a gpt_oss model's reasoning parser to openai_gptoss
    "gptoss-plain": {"reasoning_parser": "openai_gptoss"},
}
CASES = load_fixture("render_gptoss")
DATE = "2025-06-28"


@pytest.fixture(autouse=True)
def pinned_date(monkeypatch):
    monkeypatch.setenv("VLLM_SYSTEM_START_DATE", DATE)


def _scrub_id(body):
    if isinstance(body, dict) and isinstance(body.get("request_id"), str):
        body["request_id"] = re.sub(r"-[0-9a-f]{16}$", "-<random>", body["request_id"])
    return body


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_render_matches_vllm(case, aiohttp_client):
    client = await aiohttp_client(create_app(ServerConfig(**SERVERS[case["server"]]), gptoss_model()))
    resp = await client.post(case["path"], data=json.dumps(case["request"]),
                             headers={"Content-Type": "application/json"})
    body = await resp.json()
    assert resp.status == case["status"], body
    assert _scrub_id(body) == _scrub_id(case["response"])


async def test_the_date_comes_from_vllm_system_start_date(aiohttp_client, monkeypatch):
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    client = await aiohttp_client(create_app(ServerConfig(), gptoss_model()))
    request = {"messages": [{"role": "user", "content": "hi"}]}
    monkeypatch.setenv("VLLM_SYSTEM_START_DATE", "2031-01-02")
    body = await (await client.post("/v1/chat/completions/render", json=request)).json()
    assert "Current date: 2031-01-02" in enc.decode(body["token_ids"])
    monkeypatch.delenv("VLLM_SYSTEM_START_DATE")
    body = await (await client.post("/v1/chat/completions/render", json=request)).json()
    import datetime

    assert f"Current date: {datetime.date.today().isoformat()}" in enc.decode(body["token_ids"])


def test_serve_defaults_the_reasoning_parser_and_checks_the_flags():
    from proxy.model_loader import apply_model_parser_defaults
    from proxy.model_loader import ModelLoadError

    config = ServerConfig()
    apply_model_parser_defaults(config, gptoss_model())
    assert config.reasoning_parser == "openai_gptoss"
    with pytest.raises(ModelLoadError, match="--tool-call-parser hermes cannot be used with a gpt-oss model"):
        apply_model_parser_defaults(ServerConfig(tool_call_parser="hermes", enable_auto_tool_choice=True),
                                    gptoss_model())


async def test_tokenize_renders_a_chat_with_harmony_as_the_chat_route(aiohttp_client):
    """vLLM's /tokenize renders a gpt-oss chat with Harmony, not a template: the ids of the render."""
    config = ServerConfig(**SERVERS["gptoss-parsers"])
    client = await aiohttp_client(create_app(config, gptoss_model()))
    for name in ("system_tools", "history_tool_call", "unicode"):
        case = next(c for c in CASES if c["name"] == name)
        body = {k: v for k, v in case["request"].items() if k in ("model", "messages", "tools")}
        resp = await client.post("/tokenize", json=body)
        got = await resp.json()
        assert resp.status == 200, got
        assert got["tokens"] == case["response"]["token_ids"]
