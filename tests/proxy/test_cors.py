"""CORS over real HTTP, against the reference: Starlette's CORSMiddleware, which `vllm serve` runs
(with vLLM 0.33's flags and defaults), given the same settings and the same requests."""

from __future__ import annotations

import argparse

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route

from proxy.app import create_app
from proxy.cli import build_parser
from proxy.config import ServerConfig, config_from_args
from tests.proxy.frontdoor_stack import PARSERS, Stack

A, B, EVIL = "https://a.example", "https://b.example", "https://evil.example"

# CORS flags as a vllm serve user writes them (JSON lists) or as our space-separated form
SETTINGS = {
    "vllm_default": [],
    "any_origin": ["--allowed-origins", '["*"]'],
    "any_origin_credentials": ["--allowed-origins", "*", "--allow-credentials"],
    "two_origins": ["--allowed-origins", A, B, "--allow-credentials", "--allowed-methods", "GET", "POST",
                    "--allowed-headers", "Authorization"],
    "one_origin_json": ["--allowed-origins", f'["{A}"]', "--allowed-methods", '["GET"]'],
}

PREFLIGHT = {"Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type, x-request-id"}
REQUESTS = {
    "preflight": (("OPTIONS", {"Origin": A, **PREFLIGHT})),
    "preflight_other_origin": ("OPTIONS", {"Origin": EVIL, **PREFLIGHT}),
    "preflight_bad_method": ("OPTIONS", {"Origin": A, "Access-Control-Request-Method": "DELETE"}),
    "preflight_lowercase_method": ("OPTIONS", {"Origin": A, "Access-Control-Request-Method": "get"}),
    "preflight_no_headers": ("OPTIONS", {"Origin": B, "Access-Control-Request-Method": "GET"}),
    "preflight_bad_header": ("OPTIONS", {"Origin": A, "Access-Control-Request-Method": "GET",
                                         "Access-Control-Request-Headers": "x-secret"}),
    "preflight_private_network": ("OPTIONS", {"Origin": A, "Access-Control-Request-Method": "GET",
                                              "Access-Control-Request-Private-Network": "true"}),
    "get": ("GET", {"Origin": A}),
    "get_other_origin": ("GET", {"Origin": EVIL}),
    "get_no_origin": ("GET", {}),
}
CORS_HEADERS = ("access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers",
                "access-control-allow-credentials", "access-control-max-age", "vary")


def parse(flags: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *flags])


def starlette_app(args: argparse.Namespace) -> Starlette:
    """What vLLM 0.33 builds from these flags (entrypoints/serve/middleware/register.py)."""
    async def models(request):
        return JSONResponse({"object": "list", "data": []})

    return Starlette(routes=[Route("/v1/models", models, methods=["GET"])], middleware=[
        Middleware(CORSMiddleware, allow_origins=args.allowed_origins, allow_credentials=args.allow_credentials,
                   allow_methods=args.allowed_methods, allow_headers=args.allowed_headers)])


def cors_part(status: int, headers: dict[str, str], body: str, preflight: bool) -> tuple:
    headers = {k.lower(): v for k, v in headers.items()}
    return (status if preflight else None, body if preflight else None,
            {name: headers.get(name) for name in CORS_HEADERS})


@pytest.mark.parametrize("setting", SETTINGS)
async def test_same_answers_as_vllms_starlette_cors(aiohttp_client, qwen3, setting):
    args = parse(SETTINGS[setting])
    ours = await aiohttp_client(create_app(config_from_args(args), qwen3))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=starlette_app(args)),
                                 base_url="http://vllm") as vllm:
        for name, (method, headers) in REQUESTS.items():
            preflight = method == "OPTIONS"
            theirs = await vllm.request(method, "/v1/models", headers=headers)
            mine = await ours.request(method, "/v1/models", headers=headers)
            expected = cors_part(theirs.status_code, dict(theirs.headers), theirs.text, preflight)
            got = cors_part(mine.status, dict(mine.headers), await mine.text(), preflight)
            assert got == expected, (setting, name)
            if not preflight:
                assert mine.status == 200
                allowed = "access-control-allow-origin" in {k.lower() for k in mine.headers}
                # our one addition: browser code of an allowed origin may read the request id
                assert (mine.headers.get("Access-Control-Expose-Headers") == "X-Request-Id") == allowed


def test_both_list_spellings_give_the_same_config():
    json_form = config_from_args(parse(["--allowed-origins", f'["{A}", "{B}"]', "--allowed-methods", '["GET"]',
                                        "--allowed-headers", '["Authorization", "X-Foo"]']))
    spaced = config_from_args(parse(["--allowed-origins", A, B, "--allowed-methods", "GET",
                                     "--allowed-headers", "Authorization", "X-Foo"]))
    assert json_form.allowed_origins == spaced.allowed_origins == [A, B]
    assert json_form.allowed_methods == spaced.allowed_methods == ["GET"]
    assert json_form.allowed_headers == spaced.allowed_headers == ["Authorization", "X-Foo"]
    defaults = config_from_args(parse([]))  # vLLM 0.33's: no origin, any method and header, no credentials
    assert (defaults.allowed_origins, defaults.allowed_methods, defaults.allowed_headers,
            defaults.allow_credentials) == ([], ["*"], ["*"], False)
    assert ServerConfig().allowed_origins == defaults.allowed_origins


@pytest.mark.parametrize("value", ['["*"', '["a", 2]', '[1, 2]'])
def test_a_broken_json_list_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(["--allowed-origins", value])
    assert exited.value.code == 2
    assert "--allowed-origins" in capsys.readouterr().err


async def test_preflight_needs_no_api_key_but_requests_do(aiohttp_client, qwen3):
    client = await aiohttp_client(create_app(ServerConfig(allowed_origins=["*"], api_key="k"), qwen3))
    pre = await client.options("/v1/models", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization"})
    assert pre.status == 200
    resp = await client.get("/v1/models", headers={"Origin": "https://app.example"})
    assert resp.status == 401
    assert resp.headers["Access-Control-Allow-Origin"] == "*"  # the browser can read why


def test_a_browser_app_streams_a_chat_through_the_front_door(qwen3):
    """What a page on another origin does: a preflight for the POST, then the streamed POST."""
    stack = Stack(qwen3, allowed_origins=['["https://chat.example"]'], **PARSERS)
    try:
        stack.set_replies(["Hello from the engine."])
        with httpx.Client(base_url=stack.url, timeout=10) as http:
            pre = http.options("/v1/chat/completions", headers={
                "Origin": "https://chat.example", "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type"})
            assert pre.status_code == 200
            assert pre.headers["access-control-allow-origin"] == "https://chat.example"
            assert pre.headers["access-control-allow-headers"] == "authorization, content-type"
            with http.stream("POST", "/v1/chat/completions", headers={"Origin": "https://chat.example"}, json={
                    "model": "tiny-qwen3", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as resp:
                assert resp.status_code == 200
                assert resp.headers["access-control-allow-origin"] == "https://chat.example"
                assert resp.headers["access-control-expose-headers"] == "X-Request-Id"
                assert "Origin" in resp.headers["vary"]
                body = "".join(resp.iter_text())
            assert body.rstrip().endswith("data: [DONE]") and "Hello" in body
            # another origin's page is refused at the preflight, as by vllm serve
            refused = http.options("/v1/chat/completions", headers={
                "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
            assert (refused.status_code, refused.text) == (400, "Disallowed CORS origin")
    finally:
        stack.close()
