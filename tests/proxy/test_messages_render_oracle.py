"""Replay vLLM 0.33's recorded /v1/messages/render answers (render_messages.json) through our HTTP app.

Every case goes through the official `anthropic` SDK (its generic `post`, which sends the SDK's
own headers: x-api-key, anthropic-version, ...) unless its body is not a JSON object, then through
a plain HTTP client. Status and body must equal vLLM's; request ids that vLLM made up (no
X-Request-Id) are compared by shape. The cases vLLM accepts but we reject on purpose are in
DEVIATIONS, with the reason and our answer.

count_tokens: for every case vLLM rendered, `messages.count_tokens` of the same conversation
(through the SDK) is the rendered prompt's length.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anthropic
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.model_loader import load_model
from tests.oracle_fixtures import load_fixture
from tests.proxy.test_render_oracle import expand, normalize_ids

FIXTURE = "render_messages"
SERVERS: dict[str, dict[str, Any]] = {
    "q3-parsers": {"family": "qwen3", "config": {"tool_call_parser": "hermes", "reasoning_parser": "qwen3",
                                                 "enable_auto_tool_choice": True}},
    "l3-parsers": {"family": "llama3", "config": {"tool_call_parser": "llama3_json",
                                                  "enable_auto_tool_choice": True}},
}


def _missing_tools(kind: str) -> dict[str, Any]:
    return {"error": {"message": f"tool_choice {kind!r} requires tools: no tools were given.",
                      "type": "BadRequestError", "param": "tool_choice", "code": 400}}


# cases where vLLM 0.33 accepts the request or fails with a 500, and we answer a 400
# (core/render_messages.py, module docstring)
DEVIATIONS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "dev_tool_choice_any_without_tools": (
        "vLLM turns it into tool_choice 'required' with no tools and renders no constraint", 400,
        _missing_tools("any")),
    "dev_tool_choice_tool_without_tools": (
        "vLLM renders no constraint for a named tool that is not there", 400, _missing_tools("tool")),
    "dev_tool_result_image_source_not_object": (
        "vLLM fails with a 500 (AttributeError)", 400, {"error": {
            "message": "The `source` of an image in a tool_result must be an object.", "type": "BadRequestError",
            "param": None, "code": 400}}),
}
# request fields of a Messages request that a count_tokens request also has
COUNT_FIELDS = ("model", "messages", "system", "tools", "tool_choice", "thinking", "output_config",
                "chat_template_kwargs")


def cases(status: int | None = None) -> list[Any]:
    return [pytest.param(c, id=c["name"]) for c in load_fixture(FIXTURE)
            if status is None or (c["status"] == status and c["name"] not in DEVIATIONS)]


@pytest.fixture(scope="module")
def models(model_dirs):
    cache: dict[str, Any] = {}

    def get(server: str):
        family = SERVERS[server]["family"]
        if family not in cache:
            cache[family] = load_model(str(model_dirs[family]), served_model_names=[f"tiny-{family}"])
        return cache[family]
    return get


@pytest.fixture
async def serve(models):
    """serve(server key, **config) -> (our app configured like that vLLM server, on a loopback port,
    and an AsyncAnthropic client pointed at it); `serve(app=...)` serves any aiohttp app."""
    started: list[tuple[TestServer, anthropic.AsyncAnthropic]] = []

    async def start(server: str = "", app: web.Application | None = None, **config: Any
                    ) -> tuple[TestServer, anthropic.AsyncAnthropic]:
        if app is None:
            app = create_app(ServerConfig(**SERVERS[server]["config"], **config), models(server))
        test_server = TestServer(app, host="127.0.0.1")
        await test_server.start_server()
        client = anthropic.AsyncAnthropic(base_url=str(test_server.make_url("")), api_key="test-key",
                                          max_retries=0)
        started.append((test_server, client))
        return test_server, client

    yield start
    for test_server, client in started:
        await client.close()
        await test_server.close()


async def send(server: TestServer, client: anthropic.AsyncAnthropic, case: dict[str, Any]) -> tuple[int, Any]:
    """One recorded request to our app: through the SDK when it can send it, else raw HTTP."""
    headers = dict(case.get("request_headers") or {})
    request = case.get("request")
    if isinstance(request, dict) and case.get("request_raw") is None and set(headers) <= {"X-Request-Id"}:
        try:  # the SDK returns only 2xx answers (our render answers 200) and raises on the others
            return 200, await client.post(case["path"], cast_to=object, body=expand(request),
                                          options={"headers": headers})
        except anthropic.APIStatusError as exc:
            return exc.status_code, exc.body
    data = case["request_raw"].encode() if case.get("request_raw") is not None else json.dumps(request).encode()
    headers.setdefault("Content-Type", "application/json")
    async with aiohttp.ClientSession() as http:
        async with http.post(server.make_url(case["path"]), data=data, headers=headers) as resp:
            return resp.status, await resp.json()


@pytest.mark.parametrize("case", cases())
async def test_render_matches_vllm(case, serve):
    server, client = await serve(case["server"])
    status, body = await send(server, client, case)
    if case["name"] in DEVIATIONS:
        reason, our_status, our_body = DEVIATIONS[case["name"]]
        assert case["status"] in (200, 500), f"vLLM now answers {case['status']} ({reason}): drop the deviation"
        assert (status, body) == (our_status, our_body)
        return
    ours, theirs = normalize_ids(body, case["response"], case)
    assert status == case["status"], body
    assert ours == theirs


@pytest.mark.parametrize("case", cases(status=200))
async def test_count_tokens_is_the_rendered_length(case, serve):
    _, client = await serve(case["server"])
    request = expand(case["request"])
    fields = {k: request[k] for k in COUNT_FIELDS if k in request}
    extra = {"chat_template_kwargs": fields.pop("chat_template_kwargs")} if "chat_template_kwargs" in fields else None
    counted = await client.messages.count_tokens(**fields, extra_body=extra)
    assert counted.input_tokens == len(case["response"]["token_ids"])
    assert counted.model_dump()["context_management"] == {"original_input_tokens": counted.input_tokens}
