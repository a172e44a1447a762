"""Live comparison with vLLM 0.33's POST /v1/messages/render, skipped when the servers are absent.

Servers as tests/oracle/record_messages_render.py starts them: 8112 tiny-qwen3 with hermes + qwen3
(+ auto tool choice), 8114 tiny-llama3 with llama3_json. Each is identified first (served model,
context length and whether a forced tool choice gets a structural tag), so another server on
those ports is skipped rather than compared. Every recorded request is sent again to vLLM and to
our app, then 80 random Messages requests per server (a fixed seed): status and body must be equal
(render request ids by shape, the documented deviations excepted).
"""

from __future__ import annotations

import json
import os
import random
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.oracle_fixtures import load_fixture
from tests.proxy.test_messages_render_oracle import DEVIATIONS, FIXTURE, models, send, serve  # noqa: F401
from tests.proxy.test_render_oracle import expand, normalize_ids

pytestmark = pytest.mark.oracle

# random requests per server: one seed in a normal run; DERENDER_ORACLE_SEEDS=N compares N times
# as many (a longer differential hunt against the live server)
LIVE_SEEDS = int(os.environ.get("DERENDER_ORACLE_SEEDS", "1"))
PORTS = {"q3-parsers": 8112, "l3-parsers": 8114}
MODEL = {"q3-parsers": "tiny-qwen3", "l3-parsers": "tiny-llama3"}
PROBE_TOOL = {"name": "f", "input_schema": {"type": "object"}}


def vllm(port: int, path: str, body: Any = None, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def identify(server: str) -> str | None:
    """Why the server on its port is not the one the fixtures were recorded on (None: it is)."""
    port, model = PORTS[server], MODEL[server]
    try:
        status, models_answer = vllm(port, "/v1/models")
    except OSError:
        return f"no server on {port}"
    served = {m.get("id"): m.get("max_model_len") for m in models_answer.get("data", [])} if status == 200 else {}
    if model not in served or served[model] != (40960 if server == "q3-parsers" else 131072):
        return f"{port} does not serve {model} at its full context length"
    status, gen = vllm(port, "/v1/messages/render", {
        "model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "tools": [PROBE_TOOL],
        "tool_choice": {"type": "any"}, "chat_template_kwargs": {"date_string": "26 Jul 2024"}})
    if status != 200 or not (gen["sampling_params"].get("structured_outputs") or {}).get("structural_tag"):
        return f"{port} has no tool parser (no structural tag for tool_choice any)"
    return None


@pytest.fixture(scope="module")
def live() -> dict[str, str | None]:
    """Per server: why it cannot be compared, or None."""
    return {server: identify(server) for server in PORTS}


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in load_fixture(FIXTURE)])
async def test_recorded_requests_still_match(case, live, serve):
    reason = live[case["server"]]
    if reason:
        pytest.skip(reason)
    raw = case["request_raw"].encode() if case.get("request_raw") is not None else None
    status, theirs = vllm(PORTS[case["server"]], case["path"], expand(case["request"]), case.get("request_headers"),
                          raw)
    server, client = await serve(case["server"])
    our_status, ours = await send(server, client, case)
    if case["name"] in DEVIATIONS:
        assert status in (200, 500) and (our_status, ours) == DEVIATIONS[case["name"]][1:]
        return
    ours, theirs = normalize_ids(ours, theirs, case)
    assert (our_status, ours) == (status, theirs)


WORDS = ["alpha", "ça", "東京", "🙂", "x" * 30, "", " spaced ", "\n", "{json}", "<tool_call>"]


def random_block(rng: random.Random, role: str) -> dict[str, Any]:
    kind = rng.choice(["text", "text", "thinking", "tool_use", "tool_result", "redacted_thinking"])
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
    if kind == "text":
        return {"type": "text", "text": text}
    if kind == "thinking":
        return {"type": "thinking", "thinking": text, "signature": "sig"}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": "AAAA"}
    if kind == "tool_use":
        return {"type": "tool_use", "id": f"toolu_{rng.randint(0, 3)}", "name": rng.choice(["get_weather", "f"]),
                "input": rng.choice([{}, {"city": text}, {"n": rng.randint(-3, 3), "l": [1, "é"]}])}
    content = rng.choice([text, [], [{"type": "text", "text": text}, {"type": "text", "text": "more"}], None])
    block = {"type": "tool_result", "tool_use_id": f"toolu_{rng.randint(0, 3)}", "is_error": rng.random() < 0.3}
    if content is not None:
        block["content"] = content
    return block


def random_request(rng: random.Random, server: str) -> dict[str, Any]:
    messages = []
    for i in range(rng.randint(1, 5)):
        role = rng.choice(["user", "assistant", "system"]) if i else "user"
        if rng.random() < 0.3:
            content: Any = rng.choice(WORDS)
        else:
            content = [random_block(rng, role) for _ in range(rng.randint(0, 3))]
        messages.append({"role": role, "content": content})
    body: dict[str, Any] = {"model": MODEL[server], "max_tokens": rng.choice([16, 100, 3000]), "messages": messages,
                            "chat_template_kwargs": {"date_string": "26 Jul 2024"}}
    if rng.random() < 0.5:
        body["system"] = rng.choice(["sys", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], ""])
    if rng.random() < 0.5:
        body["tools"] = [PROBE_TOOL, {"name": "get_weather", "input_schema": {
            "type": "object", "properties": {"city": {"type": "string"}}}}][:rng.randint(1, 2)]
    if rng.random() < 0.5:
        body["tool_choice"] = rng.choice([{"type": "auto"}, {"type": "any"}, {"type": "none"},
                                          {"type": "tool", "name": "f"},
                                          {"type": "auto", "disable_parallel_tool_use": True}])
    if rng.random() < 0.4:
        body["thinking"] = rng.choice([{"type": "disabled"}, {"type": "adaptive"},
                                       {"type": "enabled", "budget_tokens": 1024}])
    if rng.random() < 0.3:
        body["stop_sequences"] = rng.sample(WORDS, 2)
    if rng.random() < 0.3:
        body.update(temperature=rng.choice([0, 0.5, 2]), top_k=rng.choice([0, 1, 50]))
    return body


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(LIVE_SEEDS))
@pytest.mark.parametrize("server", list(PORTS))
async def test_random_requests_match(server, seed, live, serve):
    if live[server]:
        pytest.skip(live[server])
    rng = random.Random(20261201 + seed)
    test_server, client = await serve(server)
    compared = 0
    for _ in range(80):
        body = random_request(rng, server)
        status, theirs = vllm(PORTS[server], "/v1/messages/render", body)
        case = {"path": "/v1/messages/render", "request": body}
        our_status, ours = await send(test_server, client, case)
        choice = body.get("tool_choice", {}).get("type")
        if status == 200 and choice in ("any", "tool") and not body.get("tools"):
            assert our_status == 400  # DEVIATIONS: a forced choice needs tools
            continue
        ours, theirs = normalize_ids(ours, theirs, case)
        assert (our_status, ours) == (status, theirs), json.dumps(body, ensure_ascii=False)
        compared += 1
    assert compared > 40
