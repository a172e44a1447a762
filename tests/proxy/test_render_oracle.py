"""Replay every recorded vLLM render answer (tests/fixtures/oracle/render/) through our HTTP app.

Each case is sent to an app configured like the vLLM server it was recorded on (same model,
parser flags, max_model_len); status and body must be identical, with one exception: render
request ids are random in vLLM when neither `X-Request-Id` nor a body `request_id` is given, so
those are compared by shape; the few Llama-3 cases recorded on vLLM 0.32 (the only llama3_json
render server) lack 0.33's `parse_context`, which is dropped from ours for them. Cases whose server needs a parser family that our registry does
not have yet are skipped with that reason (never silently compared with fewer fields).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from core.parsers.registry import REASONING_PARSERS, TOOL_PARSERS
from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.model_loader import load_model
from tests.oracle_fixtures import load_fixture

FILES = ("render/chat", "render/completions", "render/errors", "render/tokenize")
RANDOM_ID = re.compile(r"^(chatcmpl|cmpl)-[0-9a-f]{16}(-\d+)?$")

# how each recorded server maps to our configuration
SERVERS: dict[str, dict[str, Any]] = {
    "q3-parsers": {"family": "qwen3", "config": {"tool_call_parser": "hermes", "reasoning_parser": "qwen3",
                                                 "enable_auto_tool_choice": True}},
    "q3-plain": {"family": "qwen3", "config": {}},
    "l3-256": {"family": "llama3", "config": {}, "max_model_len": 256},
    "l3-parsers-032": {"family": "llama3", "config": {"tool_call_parser": "llama3_json",
                                                      "enable_auto_tool_choice": True}},
}


def expand(value: Any) -> Any:
    """{"$repeat": [text, n]} -> text * n (how the recorder stores long prompts)."""
    if isinstance(value, dict):
        if set(value) == {"$repeat"}:
            text, n = value["$repeat"]
            return text * n
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def all_cases() -> list[Any]:
    params = []
    for name in FILES:
        for case in load_fixture(name):
            params.append(pytest.param(case, id=f"{name.split('/')[1]}:{case['name']}"))
    return params


def missing_parsers(server: str) -> list[str]:
    config = SERVERS[server]["config"]
    missing = []
    if config.get("tool_call_parser") and config["tool_call_parser"] not in TOOL_PARSERS:
        missing.append(f"tool parser {config['tool_call_parser']}")
    if config.get("reasoning_parser") and config["reasoning_parser"] not in REASONING_PARSERS:
        missing.append(f"reasoning parser {config['reasoning_parser']}")
    return missing


@pytest.fixture(scope="module")
def models(model_dirs):
    cache: dict[str, Any] = {}

    def get(server: str):
        if server not in cache:
            spec = SERVERS[server]
            family = spec["family"]
            cache[server] = load_model(str(model_dirs[family]), served_model_names=[f"tiny-{family}"],
                                       max_model_len=spec.get("max_model_len"))
        return cache[server]
    return get


def normalize_ids(ours: Any, theirs: Any, case: dict[str, Any]) -> tuple[Any, Any]:
    """Replace random render request ids (when the client gave none) by a placeholder on both sides."""
    request = case.get("request") or {}
    given = isinstance(request, dict) and ("request_id" in request) or any(
        k.lower() == "x-request-id" for k in (case.get("request_headers") or {}))
    if given:
        return ours, theirs
    ours, theirs = copy.deepcopy(ours), copy.deepcopy(theirs)
    for side in (ours, theirs):
        items = side if isinstance(side, list) else [side]
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("request_id"), str):
                assert RANDOM_ID.match(item["request_id"]), item["request_id"]
                item["request_id"] = re.sub(r"-[0-9a-f]{16}", "-<random>", item["request_id"])
    return ours, theirs


@pytest.mark.parametrize("case", all_cases())
async def test_render_matches_vllm(case, models, aiohttp_client):
    server = case["server"]
    missing = missing_parsers(server)
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (not in core.parsers.registry yet)")
    config = ServerConfig(**SERVERS[server]["config"])
    client = await aiohttp_client(create_app(config, models(server)))
    headers = dict(case.get("request_headers") or {})
    if case.get("request_raw") is not None:
        resp = await client.post(case["path"], data=case["request_raw"].encode(), headers=headers)
    else:
        headers.setdefault("Content-Type", "application/json")
        import json
        resp = await client.post(case["path"], data=json.dumps(expand(case["request"])).encode(), headers=headers)
    body = await resp.json()
    ours, theirs = normalize_ids(body, case["response"], case)
    if case["server_info"].get("vllm_version") == "0.32.0" and isinstance(ours, dict):
        ours.pop("parse_context", None)  # 0.33 added it (tests/oracle/README); all else is equal
    assert resp.status == case["status"], body
    assert ours == theirs
