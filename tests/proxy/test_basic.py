"""The always-on routes and the error envelope, over real HTTP."""

from __future__ import annotations

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig


@pytest.fixture
async def client(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(), qwen3))


async def test_health_and_models(client):
    assert (await client.get("/health")).status == 200
    body = await (await client.get("/v1/models")).json()
    assert [m["id"] for m in body["data"]] == ["tiny-qwen3"]
    assert body["data"][0]["max_model_len"] == 40960


async def test_unknown_route_is_openai_error(client):
    resp = await client.post("/v1/nothing-here", json={})
    assert resp.status == 404
    body = await resp.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == 404
