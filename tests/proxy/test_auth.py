"""--api-key over real HTTP: every route but /health and /metrics needs the Bearer key."""

from __future__ import annotations

import re

import openai
import pytest

from proxy.app import create_app
from proxy.auth import bearer_token
from proxy.config import ServerConfig
from proxy.probes import LIVE_PATH, READY_PATH
from tests.proxy.loopback import LoopbackServer

KEY = "sk-test-0123456789"
OPEN = {"/health", "/metrics", READY_PATH, LIVE_PATH}  # (the Kubernetes probes: a kubelet has no key)


def protected_routes(app) -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, with dynamic segments filled in."""
    out = set()
    for route in app.router.routes():
        resource = route.resource
        if resource is None or route.method == "HEAD":
            continue
        path = re.sub(r"\{[^}]+\}", "x", resource.canonical)
        if path in OPEN:
            continue
        method = "POST" if route.method == "*" else route.method
        out.add((method, path))
    return sorted(out)


@pytest.fixture
async def app(qwen3):
    return create_app(ServerConfig(api_key=KEY), qwen3)


@pytest.fixture
async def client(aiohttp_client, app):
    return await aiohttp_client(app)


def assert_401(resp_status: int, body: dict, path: str = "") -> None:
    assert resp_status == 401
    if path in ("/v1/messages", "/v1/messages/count_tokens"):  # the Anthropic routes answer in their shape
        assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
        assert "API key" in body["error"]["message"]
        return
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == 401
    assert "API key" in body["error"]["message"]


async def test_every_protected_route_refuses_missing_wrong_and_malformed_keys(client, app):
    routes = protected_routes(app)
    assert ("GET", "/v1/models") in routes and ("GET", "/version") in routes
    bad_headers = [
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": f"Bearer {KEY}x"},
        {"Authorization": f"Bearer {KEY[:-1]}"},
        {"Authorization": f"Basic {KEY}"},
        {"Authorization": KEY},
        {"Authorization": "Bearer "},
        {"x-api-key": "wrong-key"},
        {"x-api-key": ""},
        {"x-api-key": f"Bearer {KEY}"},
    ]
    for method, path in routes:
        for headers in bad_headers:
            resp = await client.request(method, path, headers=headers, json={})
            assert_401(resp.status, await resp.json(), path)
            assert resp.headers["WWW-Authenticate"] == "Bearer"
            assert resp.headers["Content-Type"].startswith("application/json")


async def test_the_right_key_passes_on_every_route(client, app):
    for method, path in protected_routes(app):
        resp = await client.request(method, path, headers={"Authorization": f"Bearer {KEY}"}, json={})
        assert resp.status != 401, (method, path)
        resp = await client.request(method, path, headers={"x-api-key": KEY}, json={})  # the anthropic SDK's header
        assert resp.status != 401, (method, path)
    resp = await client.get("/v1/models", headers={"Authorization": f"bearer   {KEY}  "})
    assert resp.status == 200  # scheme is case-insensitive, surrounding spaces ignored


async def test_unknown_paths_are_401_before_404(client):
    # without the key nobody learns which paths exist
    resp = await client.post("/v1/not-a-route", json={})
    assert_401(resp.status, await resp.json())
    resp = await client.post("/v1/not-a-route", json={}, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status == 404


async def test_health_and_metrics_stay_open(client):
    assert (await client.get("/health")).status == 200
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert "derender_proxy_requests_total" in await resp.text()


async def test_401s_are_counted_in_metrics(client):
    for _ in range(3):
        await client.get("/v1/models")
    text = await (await client.get("/metrics")).text()
    assert 'derender_proxy_requests_total{method="GET",route="/v1/models",status="401"} 3.0' in text


async def test_no_key_configured_means_open(aiohttp_client, qwen3):
    client = await aiohttp_client(create_app(ServerConfig(), qwen3))
    assert (await client.get("/v1/models")).status == 200


def test_official_client_gets_authentication_error(qwen3):
    server = LoopbackServer(lambda: create_app(ServerConfig(api_key=KEY), qwen3)).start()
    try:
        with pytest.raises(openai.AuthenticationError) as err:
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="nope", max_retries=0).models.list()
        assert err.value.status_code == 401
        models = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0).models.list()
        assert [m.id for m in models.data] == ["tiny-qwen3"]
    finally:
        server.stop()


@pytest.mark.parametrize("header,token", [
    (None, None), ("", None), ("Bearer", None), ("Bearer ", None), ("Bearer abc", "abc"),
    ("bearer abc", "abc"), ("BEARER  abc ", "abc"), ("Basic abc", None), ("abc", None),
])
def test_bearer_token_parsing(header, token):
    assert bearer_token(header) == token


async def test_max_request_bytes_is_a_413_error_body_and_auth_comes_first(aiohttp_client, qwen3):
    client = await aiohttp_client(create_app(ServerConfig(api_key=KEY, max_request_bytes=1024), qwen3))
    body = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "x" * 4096}]}
    resp = await client.post("/v1/chat/completions", json=body)
    assert_401(resp.status, await resp.json())  # no key: refused before the body is read
    resp = await client.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status == 413
    error = (await resp.json())["error"]
    assert error["code"] == 413 and "1024" in error["message"]
    text = await (await client.get("/metrics")).text()
    assert 'derender_proxy_requests_total{method="POST",route="/v1/chat/completions",status="413"} 1.0' in text


# -- /metrics: open by default; --metrics-api-key, --metrics-require-api-key ------------------------

METRICS_KEY = "scrape-only-key"


async def _status(client, path: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    resp = await client.get(path, headers=headers)
    if resp.status == 401:
        assert_401(resp.status, await resp.json())
        assert resp.headers["WWW-Authenticate"] == "Bearer"
    return resp.status


@pytest.mark.parametrize("config,expected", [
    # (flags) -> {presented key: /metrics status}
    ({}, {None: 200, "wrong": 200, KEY: 200, METRICS_KEY: 200}),
    ({"api_key": KEY}, {None: 200, "wrong": 200, KEY: 200, METRICS_KEY: 200}),
    ({"metrics_api_key": METRICS_KEY}, {None: 401, "wrong": 401, KEY: 401, METRICS_KEY: 200}),
    ({"api_key": KEY, "metrics_api_key": METRICS_KEY}, {None: 401, "wrong": 401, KEY: 401, METRICS_KEY: 200}),
    ({"api_key": KEY, "metrics_require_api_key": True}, {None: 401, "wrong": 401, KEY: 200, METRICS_KEY: 401}),
    ({"api_key": KEY, "metrics_api_key": METRICS_KEY, "metrics_require_api_key": True},
     {None: 401, "wrong": 401, KEY: 200, METRICS_KEY: 200}),
], ids=["open", "api-key-only", "metrics-key", "both-keys", "require-api-key", "either-key"])
async def test_metrics_key_flags(aiohttp_client, qwen3, config, expected):
    client = await aiohttp_client(create_app(ServerConfig(**config), qwen3))
    for key, status in expected.items():
        assert await _status(client, "/metrics", key) == status, key
        assert await _status(client, "/health", key) == 200  # load balancers never need a key
    # the metrics key is for /metrics only: it never opens the API
    api = await _status(client, "/v1/models", METRICS_KEY)
    assert api == (401 if config.get("api_key") else 200)
    if config.get("api_key"):
        assert await _status(client, "/v1/models", KEY) == 200


def test_metrics_require_api_key_without_an_api_key_is_a_start_up_error(qwen3):
    with pytest.raises(ValueError, match="--metrics-require-api-key needs --api-key"):
        create_app(ServerConfig(metrics_require_api_key=True), qwen3)
