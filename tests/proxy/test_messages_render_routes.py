"""The Messages routes over real HTTP, beyond the recorded render answers: count_tokens' errors in
Anthropic's shape (vLLM's render error translated as vLLM's /v1/messages router translates it),
the `anthropic_errors` wrapper the front door shares, and large prompts."""

from __future__ import annotations

import json

import aiohttp
import anthropic
import pytest
from aiohttp import web

from core.errors import RequestError
from proxy.routes.messages import anthropic_errors
from tests.oracle_fixtures import case_by_name
from tests.proxy.test_messages_render_oracle import COUNT_FIELDS, FIXTURE, models, serve  # noqa: F401 (fixtures)
from tests.proxy.test_render_oracle import expand

# recorded render errors whose cause is in a field count_tokens also has: count_tokens answers the
# same status and message, in Anthropic's shape
SHARED_ERRORS = [
    "err_unknown_model", "err_empty_model", "err_messages_not_list", "err_empty_messages",
    "err_only_empty_user_content", "err_bad_role", "err_missing_content", "err_bad_block_type",
    "err_block_not_object", "err_text_not_string", "err_tool_use_input_list", "err_image_block",
    "err_image_in_tool_result", "err_tool_choice_unknown_tool", "err_tool_choice_tool_without_name",
    "err_tool_without_schema", "err_server_tool", "err_tool_addition_in_user", "err_tool_addition_unknown_reference",
    "err_thinking_budget_too_small", "err_thinking_unknown_type", "err_output_effort_bad", "err_prompt_too_long",
    "err_untrusted_chat_template", "err_not_json", "err_wrong_content_type", "err_body_list",
    "l3_err_tool_choice_unknown_tool",
]
SDK_ERRORS = {400: anthropic.BadRequestError, 404: anthropic.NotFoundError}


@pytest.mark.parametrize("name", SHARED_ERRORS)
async def test_count_tokens_errors_are_vllms_in_anthropic_shape(name, serve):
    case = case_by_name(FIXTURE, name)
    server, client = await serve(case["server"])
    request = case["request"]
    if case.get("request_raw") is not None or not isinstance(request, dict):
        raw = case["request_raw"].encode() if case.get("request_raw") is not None else json.dumps(request).encode()
        headers = {"Content-Type": "application/json", **(case.get("request_headers") or {})}
        async with aiohttp.ClientSession() as http, http.post(server.make_url("/v1/messages/count_tokens"),
                                                              data=raw, headers=headers) as resp:
            status, body = resp.status, await resp.json()
    else:
        fields = {k: v for k, v in expand(request).items() if k in COUNT_FIELDS}
        with pytest.raises(anthropic.APIStatusError) as err:
            await client.post("/v1/messages/count_tokens", cast_to=object, body=fields)
        assert isinstance(err.value, SDK_ERRORS[case["status"]])
        status, body = err.value.status_code, err.value.body
    kind = {400: "invalid_request_error", 404: "not_found_error"}[case["status"]]
    assert status == case["status"]
    assert body == {"type": "error", "error": {"type": kind, "message": case["response"]["error"]["message"]}}


async def test_count_tokens_through_the_sdk_on_a_long_prompt(serve):
    """A prompt long enough for the thread pool counts as many tokens as it renders to."""
    _, client = await serve("q3-parsers")
    text = " ".join(f"word{i % 97} 数据" for i in range(6000))
    counted = await client.messages.count_tokens(model="tiny-qwen3", messages=[{"role": "user", "content": text}],
                                                 system=[{"type": "text", "text": "sys"}])
    rendered = await client.post("/v1/messages/render", cast_to=object, body={
        "model": "tiny-qwen3", "max_tokens": 10, "system": "sys", "messages": [{"role": "user", "content": text}]})
    assert counted.input_tokens == len(rendered["token_ids"]) > 6000


async def test_count_tokens_too_large_body(serve):
    _, client = await serve("q3-parsers", max_request_bytes=256)
    with pytest.raises(anthropic.APIStatusError) as err:
        await client.messages.count_tokens(model="tiny-qwen3", messages=[{"role": "user", "content": "x" * 1000}])
    assert err.value.status_code == 413
    assert err.value.body["type"] == "error" and err.value.body["error"]["type"] == "request_too_large"


async def test_render_errors_keep_vllms_openai_shape(serve):
    _, client = await serve("q3-parsers")
    with pytest.raises(anthropic.NotFoundError) as err:
        await client.post("/v1/messages/render", cast_to=object, body={
            "model": "other", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    assert set(err.value.body) == {"error"} and err.value.body["error"]["code"] == 404


async def test_anthropic_errors_wrapper(serve):
    """What any handler wrapped for the Messages API raises comes out in Anthropic's shape."""
    async def raises(request: web.Request) -> web.Response:
        kind = request.match_info["kind"]
        if kind == "bug":
            raise RuntimeError("secret detail in /root/internal/file.py")
        if kind == "busy":
            raise RequestError("All engines are busy", 503, "ServiceUnavailableError", retry_after=7)
        if kind == "value":
            raise ValueError("bad value")
        raise web.HTTPNotFound()

    app = web.Application()
    app.router.add_post("/x/{kind}", anthropic_errors(raises))
    server, _ = await serve(app=app)
    async with aiohttp.ClientSession() as http:
        async def post(kind: str):
            async with http.post(server.make_url(f"/x/{kind}")) as resp:
                return resp.status, await resp.json(), resp.headers.get("Retry-After")

        assert await post("bug") == (500, {"type": "error", "error": {
            "type": "api_error", "message": "Internal server error"}}, None)
        assert await post("busy") == (503, {"type": "error", "error": {
            "type": "overloaded_error", "message": "All engines are busy"}}, "7")
        assert await post("value") == (400, {"type": "error", "error": {
            "type": "invalid_request_error", "message": "bad value"}}, None)
        status, body, _ = await post("missing")
        assert status == 404 and body["error"]["type"] == "not_found_error"
