"""--allowed-origins over real HTTP: vLLM's (Starlette's) CORS semantics."""

from __future__ import annotations

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig


async def make(aiohttp_client, qwen3, **kw):
    return await aiohttp_client(create_app(ServerConfig(**kw), qwen3))


async def test_no_origins_configured_means_no_cors_headers(aiohttp_client, qwen3):
    client = await make(aiohttp_client, qwen3)
    resp = await client.get("/v1/models", headers={"Origin": "https://app.example"})
    assert resp.status == 200
    assert "Access-Control-Allow-Origin" not in resp.headers
    pre = await client.options("/v1/models", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "GET"})
    assert "Access-Control-Allow-Origin" not in pre.headers


async def test_wildcard_preflight_and_simple_request(aiohttp_client, qwen3):
    client = await make(aiohttp_client, qwen3, allowed_origins=["*"])
    pre = await client.options("/v1/chat/completions", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, x-request-id"})
    assert pre.status == 200
    assert await pre.text() == "OK"
    assert pre.headers["Access-Control-Allow-Origin"] == "*"
    assert pre.headers["Access-Control-Allow-Methods"] == "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
    assert pre.headers["Access-Control-Allow-Headers"] == "authorization, content-type, x-request-id"
    assert pre.headers["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in pre.headers

    resp = await client.get("/v1/models", headers={"Origin": "https://app.example"})
    assert resp.status == 200
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert resp.headers["Access-Control-Expose-Headers"] == "X-Request-Id"
    # error bodies carry CORS headers too, so browser code can read the message
    resp = await client.post("/v1/nothing", json={}, headers={"Origin": "https://app.example"})
    assert resp.status == 404
    assert resp.headers["Access-Control-Allow-Origin"] == "*"


async def test_vllm_json_list_form_of_allowed_origins(aiohttp_client, qwen3):
    client = await make(aiohttp_client, qwen3, allowed_origins=['["https://a.example"]'])
    resp = await client.get("/v1/models", headers={"Origin": "https://a.example"})
    assert resp.headers["Access-Control-Allow-Origin"] == "https://a.example"


async def test_explicit_origins_with_credentials(aiohttp_client, qwen3):
    client = await make(aiohttp_client, qwen3, allowed_origins=["https://a.example", "https://b.example"],
                        allow_credentials=True, allowed_methods=["GET", "POST"],
                        allowed_headers=["Authorization"])
    pre = await client.options("/v1/models", headers={
        "Origin": "https://b.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Authorization, Content-Type"})
    assert pre.status == 200
    assert pre.headers["Access-Control-Allow-Origin"] == "https://b.example"
    assert pre.headers["Vary"] == "Origin"
    assert pre.headers["Access-Control-Allow-Credentials"] == "true"
    assert pre.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert pre.headers["Access-Control-Allow-Headers"] == (
        "accept, accept-language, authorization, content-language, content-type")

    resp = await client.get("/v1/models", headers={"Origin": "https://a.example"})
    assert resp.headers["Access-Control-Allow-Origin"] == "https://a.example"
    assert resp.headers["Access-Control-Allow-Credentials"] == "true"
    assert "Origin" in resp.headers["Vary"]

    resp = await client.get("/v1/models", headers={"Origin": "https://evil.example"})
    assert resp.status == 200
    assert "Access-Control-Allow-Origin" not in resp.headers


@pytest.mark.parametrize("headers,failure", [
    ({"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}, "origin"),
    ({"Origin": "https://a.example", "Access-Control-Request-Method": "DELETE"}, "method"),
    ({"Origin": "https://a.example", "Access-Control-Request-Method": "GET",
      "Access-Control-Request-Headers": "x-secret"}, "headers"),
    ({"Origin": "https://evil.example", "Access-Control-Request-Method": "DELETE"}, "origin, method"),
])
async def test_disallowed_preflights(aiohttp_client, qwen3, headers, failure):
    client = await make(aiohttp_client, qwen3, allowed_origins=["https://a.example"],
                        allowed_methods=["GET", "POST"], allowed_headers=["Authorization"])
    pre = await client.options("/v1/models", headers=headers)
    assert pre.status == 400
    assert await pre.text() == f"Disallowed CORS {failure}"


async def test_preflight_needs_no_api_key_but_requests_do(aiohttp_client, qwen3):
    client = await make(aiohttp_client, qwen3, allowed_origins=["*"], api_key="k")
    pre = await client.options("/v1/models", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization"})
    assert pre.status == 200
    resp = await client.get("/v1/models", headers={"Origin": "https://app.example"})
    assert resp.status == 401
    assert resp.headers["Access-Control-Allow-Origin"] == "*"  # the browser can read why
