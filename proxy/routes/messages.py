"""The Anthropic Messages API (vLLM 0.33): POST /v1/messages, /v1/messages/count_tokens, /v1/messages/render.

`/v1/messages` is the front door, the same flow as `/v1/chat/completions`: validate once, render
(`messages_renderer(state)`: the chat-equivalent request and its GenerateRequest), one
`DerenderSession` on the one machine, and the Messages adapter
(`core.derender.adapters.messages`) writing Anthropic's shapes: streamed by the one SSE loop
(`proxy.streaming.write_stream`, which also aborts the engine request on a stop sequence or a
client that leaves, and sends the writer's `ping` after a silence), or collected into one message.
Non-streamed answers without stop sequences use the engine's non-streaming generate; with stop
sequences they read the engine stream so the request can be cut short.

`/v1/messages` and `/v1/messages/count_tokens` answer in Anthropic's shape, errors included:
`anthropic_errors` wraps a handler so whatever it raises (validation, render, an engine failure
before the stream, a bug) becomes `{"type": "error", "error": {"type", "message"}}` with the
status the OpenAI shape would have had (503 `overloaded_error`, 502 / 504 `api_error`, ...). Once a
stream has started, a failure is an `error` event (vLLM's rule). `/v1/messages/render` is vLLM's
render-server route: a GenerateRequest out, and its errors in vLLM's OpenAI shape like the other
render routes (vLLM declares `ErrorResponse` for them).
"""

from __future__ import annotations

import functools
from typing import Awaitable, Callable

from aiohttp import web

from core.derender.adapters import messages as adapter
from core.derender.adapters.messages import MessageCollector, MessagesStream
from core.derender.session import DerenderSession
from core.errors import RequestError
from core.protocol.messages import AnthropicCountTokensRequest, AnthropicMessagesRequest, anthropic_error_body
from core.render_messages import MessagesRenderer, count_tokens_body, request_size
from proxy.app import STATE, AppState
from proxy.engine.pool import pool_of
from proxy.engine.run import EngineRun
from proxy.http import answer_errors, json_response, read_json_object, validate
from proxy.streaming import collect, stream_one

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


@anthropic_errors
async def create_message(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    model, settings = state.model, state.derender
    req = validate(AnthropicMessagesRequest, await read_json_object(request), from_attributes=True)
    rendered = await state.run_cpu(request_size(req), messages_renderer(state).render, req,
                                   request.headers.get("X-Request-Id"))
    gen, chat = rendered.generate_request, rendered.chat_request
    prompt_ids: list[int] = gen["token_ids"]
    run = EngineRun(request, pool_of(request.app))
    run.count(len(prompt_ids), 0)
    # vLLM's message id is its chat completion's (chatcmpl-...)
    shape = {"message_id": gen["request_id"], "model": model.name}

    def new_session() -> DerenderSession:
        return DerenderSession.for_chat(settings, chat, gen, settings.parser_for(chat))

    if req.stream:  # the session is made while the engine computes the first token
        return await stream_one(request, run, gen, lambda: MessagesStream(
            new_session(), ping_interval=adapter.PING_INTERVAL, **shape))
    session = new_session()
    spec = session.spec
    collector = MessageCollector(session, **shape)
    try:
        # stop sequences read the engine stream to cut it short
        await collect(request, run, [gen], collector, use_stream=bool(spec.text.stop))
        run.count(0, session.completion_tokens)
    finally:
        run.report_tokens()
    return json_response(collector.message())


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
    app.router.add_post("/v1/messages", create_message)
    app.router.add_post("/v1/messages/render", messages_render)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
