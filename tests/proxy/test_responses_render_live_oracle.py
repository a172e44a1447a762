"""Live comparison with vLLM 0.33's `POST /v1/responses/render`, skipped when the servers are absent.

Servers as tests/oracle/record_responses_render.py starts them (8111: Qwen3 with hermes + qwen3;
8113: Llama-3 with llama3_json, or the plain one at max_model_len 256). A server is used only
when it is configured like the recorded one (same model, max_model_len and parsers, probed).

* every recorded case is sent again to vLLM and to us: our answer equals vLLM's live answer (or,
  for a documented deviation, vLLM still answers what the fixture recorded and we answer
  `expected`);
* random Responses requests built from realistic pieces (items of every kind in random order,
  tools, tool choices, formats, effort, sampling knobs) must render identically.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import urllib.error
import urllib.request
from typing import Any

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.oracle_fixtures import load_document, load_fixture
from tests.proxy.test_responses_render_oracle import (  # noqa: F401 (models: a fixture)
    SERVERS, expand, expected_answer, models, normalize_id, post_case)

pytestmark = pytest.mark.oracle

# random requests per server: one seed in a normal run; DERENDER_ORACLE_SEEDS=N compares N times
# as many (a longer differential hunt against the live server)
LIVE_SEEDS = int(os.environ.get("DERENDER_ORACLE_SEEDS", "1"))
PATH = "/v1/responses/render"
PROBE = {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
         "tool_choice": "required"}


def vllm_post(port: int, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
              ) -> tuple[int, Any]:
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{PATH}", data=data,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def live_signature(port: int) -> tuple | None:
    """(model, max_model_len, has tool parser, has reasoning parser) of the server on `port`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as resp:
            model = json.loads(resp.read())["data"][0]
        status, probe = vllm_post(port, PROBE)
    except (OSError, ValueError, KeyError, IndexError):
        return None
    if status != 200:
        return None
    return (model["id"], model.get("max_model_len"), "structured_outputs" in probe["sampling_params"],
            probe["reasoning_parser_kwargs"] is not None)


def recorded_signature(server: str) -> tuple:
    spec = SERVERS[server]
    config = spec["config"]
    max_len = spec.get("max_model_len") or {"qwen3": 40960, "llama3": 131072}[spec["family"]]
    return (f"tiny-{spec['family']}", max_len, bool(config.get("tool_call_parser")),
            bool(config.get("reasoning_parser")))


_SIGNATURES: dict[int, tuple | None] = {}


def live_port(server: str) -> int:
    port = load_document("render_responses")["servers"][server]["port_when_recorded"]
    if port not in _SIGNATURES:
        _SIGNATURES[port] = live_signature(port)
    if _SIGNATURES[port] != recorded_signature(server):
        pytest.skip(f"no vLLM server configured as {server} on port {port}")
    return port


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in load_fixture("render_responses")])
async def test_recorded_case_live(case, models, aiohttp_client):
    port = live_port(case["server"])
    raw = case["request_raw"].encode() if case.get("request_raw") is not None else None
    live_status, live_body = await asyncio.to_thread(
        vllm_post, port, expand(copy.deepcopy(case["request"])), case.get("request_headers"), raw)
    client = await aiohttp_client(create_app(ServerConfig(**SERVERS[case["server"]]["config"]),
                                             models(case["server"])))
    status, body = await post_case(client, case)
    request = case["request"]
    if "deviation" in case:
        assert (live_status, normalize_id(live_body, request)) == (case["status"],
                                                                  normalize_id(case["response"], request))
        want_status, want_body = expected_answer(case)
        request = case.get("expected_request") or request
        assert (status, normalize_id(body, request)) == (want_status, normalize_id(want_body, request))
        return
    assert status == live_status, (body, live_body)
    assert normalize_id(body, request) == normalize_id(live_body, request)


# -- random requests from realistic pieces -------------------------------------------------

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SEARCH = {"type": "function", "name": "search", "strict": True,
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
CRM = {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
    {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}]}
NOTE = {"type": "custom", "name": "note", "description": "Free text"}
TEXTS = ["Hi", "Weather in Paris?", "Ünïcödé ✓ 你好 🎉", "", "multi\nline\ttext", "<tool_call>not a call</tool_call>"]


def random_item(rng: random.Random, n: int) -> list[dict[str, Any]]:
    text = rng.choice(TEXTS)
    kind = rng.randrange(10)
    if kind == 0:
        return [{"role": rng.choice(["system", "developer"]), "content": text or "rule"}]
    if kind == 1:
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}
                                                                for t in rng.sample(TEXTS, rng.randint(1, 2))]}]
    if kind == 2:
        return [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]
    if kind == 3:
        return [{"role": "assistant", "content": text}]
    if kind == 4:
        return [{"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": text}]}]
    if kind == 5:
        call = {"type": "function_call", "call_id": f"call_{n}", "name": "get_weather",
                "arguments": json.dumps({"city": text}, ensure_ascii=False)}
        if rng.random() < 0.3:
            call.update(namespace="crm", name="lookup", arguments="{\"id\": 7}")
        out = {"type": "function_call_output", "call_id": f"call_{n}", "output": text or "ok"}
        return [call, out] if rng.random() < 0.7 else [call]
    if kind == 6:
        return [{"type": "custom_tool_call", "call_id": f"call_{n}", "name": "note", "input": text},
                {"type": "custom_tool_call_output", "call_id": f"call_{n}", "output": "saved"}]
    return [{"role": "user", "content": text}]


def random_request(rng: random.Random) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for n in range(rng.randint(1, 6)):
        items += random_item(rng, n)
    body: dict[str, Any] = {"input": items if rng.random() < 0.85 else rng.choice(TEXTS)}
    tools = rng.sample([WEATHER, SEARCH, CRM, NOTE], rng.randint(0, 4))
    if tools:
        body["tools"] = tools
        names = [t["name"] for t in tools if t["type"] != "namespace"]
        choices = ["auto", "none", "required"] + [{"type": "function", "name": n} for n in names if n != "note"]
        choices += [{"type": "custom", "name": "note"}] if "note" in names else []
        if rng.random() < 0.7:
            body["tool_choice"] = rng.choice(choices)
        if rng.random() < 0.3:
            body["parallel_tool_calls"] = False
    optional = {
        "instructions": lambda: rng.choice(TEXTS),
        "text": lambda: {"format": rng.choice([{"type": "text"}, {"type": "json_object"}, {
            "type": "json_schema", "name": "s", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}])},
        "reasoning": lambda: {"effort": rng.choice(["none", "minimal", "low", "medium", "high"])},
        "temperature": lambda: rng.choice([0, 0.3, 1.0, 2.0]),
        "top_p": lambda: rng.choice([0.1, 0.9, 1.0]),
        "top_k": lambda: rng.choice([-1, 0, 5]),
        "max_output_tokens": lambda: rng.choice([1, 50, 1000]),
        "include": lambda: ["message.output_text.logprobs"],
        "top_logprobs": lambda: rng.choice([0, 1, 5, 20]),
        "stop": lambda: rng.choice(["x", ["a", "b"]]),
        "seed": lambda: rng.randint(-5, 10**6),
        "stream": lambda: rng.random() < 0.5,
        "include_reasoning": lambda: rng.random() < 0.5,
        "truncation": lambda: rng.choice(["auto", "disabled"]),
        "chat_template_kwargs": lambda: rng.choice([{"enable_thinking": False}, {"enable_thinking": True}, {}]),
    }
    for key in rng.sample(sorted(optional), rng.randint(0, 5)):
        body[key] = optional[key]()
    return body


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(LIVE_SEEDS))
@pytest.mark.parametrize("server", ["q3-parsers", "l3-parsers"])
async def test_random_requests_live(server, seed, models, aiohttp_client):
    port = live_port(server)
    client = await aiohttp_client(create_app(ServerConfig(**SERVERS[server]["config"]), models(server)))
    rng = random.Random(f"responses-{server}" + (f"-{seed}" if seed else ""))
    checked = 0
    for _ in range(80):
        body = random_request(rng)
        if server == "l3-parsers":
            body.setdefault("chat_template_kwargs", {})["date_string"] = "26 Jul 2024"
        live_status, live_body = await asyncio.to_thread(vllm_post, port, body)
        resp = await client.post(PATH, json=body)
        ours = await resp.json()
        if live_status == 500:  # one of vLLM's failures we answer (documented deviations)
            assert resp.status < 500, (body, ours)
            continue
        assert resp.status == live_status, (body, ours, live_body)
        assert normalize_id(ours, body) == normalize_id(live_body, body), body
        checked += 1
    assert checked > 40  # most random requests are valid, so rendering really was compared
