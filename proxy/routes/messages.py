"""POST /v1/messages/render and POST /v1/messages/count_tokens (Anthropic Messages API, vLLM 0.33).

`/v1/messages/render` is vLLM's render-server route: a GenerateRequest out, and its errors in
vLLM's OpenAI shape like the other render routes (vLLM declares `ErrorResponse` for them).
`/v1/messages/count_tokens` answers in Anthropic's shape, errors included: `anthropic_errors`
wraps a handler so whatever it raises (validation, render, a bug) becomes
`{"type": "error", "error": {"type", "message"}}` with the status the OpenAI shape would have had.
The front door's `/v1/messages` is meant to use the same wrapper and `messages_renderer(state)`.
"""

from __future__ import annotations

import functools
from typing import Awaitable, Callable

from aiohttp import web

from core.errors import RequestError
from core.protocol.messages import AnthropicCountTokensRequest, AnthropicMessagesRequest, anthropic_error_body
from core.render_messages import MessagesRenderer, count_tokens_body, request_size
from proxy.app import STATE, AppState
from proxy.http import answer_errors, json_response, read_json_object, validate

MESSAGES_RENDERER = "messages_renderer"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def messages_renderer(state: AppState) -> MessagesRenderer:
    """The app's MessagesRenderer, built once (it caches the model's probes)."""
    renderer = state.extras.get(MESSAGES_RENDERER)
    if renderer is None:
        effort = getattr(state.config, "anthropic_disabled_thinking_effort", None) or "auto"
        renderer = MessagesRenderer(state.model, state.render, disabled_thinking_effort=effort)
        state.extras[MESSAGES_RENDERER] = renderer
    return renderer


def anthropic_error_response(error: RequestError) -> web.Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after else None
    return json_response(anthropic_error_body(error.message, error.status), status=error.status, headers=headers)


def anthropic_errors(handler: Handler) -> Handler:
    """Answer every failure of `handler` in Anthropic's error shape (same statuses as elsewhere)."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        return await answer_errors(request, handler, anthropic_error_response)

    return wrapped


async def messages_render(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await read_json_object(request)
    messages = validate(AnthropicMessagesRequest, body, from_attributes=True)
    # vLLM uses the X-Request-Id header whenever it is present, even when empty
    rendered = await state.run_cpu(request_size(messages), messages_renderer(state).render, messages,
                                   request.headers.get("X-Request-Id"))
    return json_response(rendered.generate_request)


@anthropic_errors
async def count_tokens(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await read_json_object(request)
    count_request = validate(AnthropicCountTokensRequest, body, from_attributes=True)
    tokens: int = await state.run_cpu(request_size(count_request), messages_renderer(state).count_tokens,
                                      count_request)
    return json_response(count_tokens_body(tokens))


def setup(app: web.Application) -> None:
    messages_renderer(app[STATE])  # its per-model probes run on the first request that needs them
    app.router.add_post("/v1/messages/render", messages_render)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
