"""Request ids and the JSON access log, over real HTTP."""

from __future__ import annotations

import io
import json
import logging

import pytest

from proxy.access_log import JsonFormatter
from proxy.app import create_app
from proxy.config import ServerConfig


@pytest.fixture
async def client(aiohttp_client, qwen3):
    return await aiohttp_client(create_app(ServerConfig(), qwen3))


def access_lines(caplog) -> list[dict]:
    fmt = JsonFormatter()
    return [json.loads(fmt.format(r)) for r in caplog.records if r.name == "derender_proxy.access"]


async def test_request_id_is_echoed_or_generated(client):
    resp = await client.get("/v1/models", headers={"X-Request-Id": "my-id-42"})
    assert resp.headers["X-Request-Id"] == "my-id-42"
    a = (await client.get("/v1/models")).headers["X-Request-Id"]
    b = (await client.get("/v1/models")).headers["X-Request-Id"]
    assert len(a) == 32 and int(a, 16) >= 0 and a != b
    # errors carry it as well
    resp = await client.post("/v1/nothing", json={}, headers={"X-Request-Id": "err-1"})
    assert resp.status == 404 and resp.headers["X-Request-Id"] == "err-1"


async def test_one_json_line_per_request(client, caplog):
    caplog.set_level(logging.INFO, logger="derender_proxy.access")
    await client.get("/v1/models", headers={"X-Request-Id": "r1"})
    await client.post("/v1/nothing", json={}, headers={"X-Request-Id": "r2"})
    await client.get("/health")  # probes: debug level, not in the info log
    lines = access_lines(caplog)
    assert [(line["request_id"], line["method"], line["route"], line["status"]) for line in lines] == [
        ("r1", "GET", "/v1/models", 200), ("r2", "POST", "unmatched", 404)]
    for line in lines:
        assert line["logger"] == "derender_proxy.access" and line["level"] == "info"
        assert isinstance(line["latency_ms"], float) and 0 <= line["latency_ms"] < 5000
        assert "prompt_tokens" not in line  # no engine work: no token fields


async def test_log_lines_written_inside_a_request_carry_its_id(client):
    """Any logger, formatted as it is emitted (as in production), gets the current request id."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        await client.get("/v1/models", headers={"X-Request-Id": "inner-1"})
        await client.get("/v1/models", headers={"X-Request-Id": "inner-2"})
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    access = [line for line in lines if line["logger"] == "derender_proxy.access"]
    assert [line["request_id"] for line in access] == ["inner-1", "inner-2"]
    assert all(set(line) >= {"ts", "level", "logger", "message"} for line in lines)


async def test_disabled_access_log(aiohttp_client, qwen3, caplog):
    client = await aiohttp_client(create_app(ServerConfig(access_log=False), qwen3))
    caplog.set_level(logging.DEBUG, logger="derender_proxy.access")
    await client.get("/v1/models")
    assert access_lines(caplog) == []
