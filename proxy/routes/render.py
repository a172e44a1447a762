"""POST /v1/chat/completions/render and POST /v1/completions/render (vLLM 0.33 wire format).

The handler validates the body once with pydantic, then runs the synchronous render (template
and tokenizer) inline for small prompts or in the bounded thread pool for large ones, so a
32k-token prompt never stalls other requests on the event loop. Output goes through orjson.
"""

from __future__ import annotations

from aiohttp import web

from core.protocol.chat import ChatCompletionRequest
from core.protocol.completion import CompletionRequest
from core.render import precheck_messages, render_chat, render_completion, request_size, warm_up
from proxy.app import STATE
from proxy.http import json_response, read_json_object, validate

def _request_id_header(request: web.Request) -> str | None:
    # vLLM uses the header whenever it is present, even when empty
    return request.headers.get("X-Request-Id")


async def chat_render(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await read_json_object(request)
    precheck_messages(body, state.model.max_model_len)
    chat = validate(ChatCompletionRequest, body)
    result = await state.run_cpu(request_size(chat), render_chat, state.model, state.render, chat,
                                 _request_id_header(request))
    return json_response(result)


async def completion_render(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await read_json_object(request)
    completion = validate(CompletionRequest, body)
    result = await state.run_cpu(request_size(completion), render_completion, state.model, state.render,
                                 completion, _request_id_header(request))
    return json_response(result)


def setup(app: web.Application) -> None:
    warm_up(app[STATE].model)
    app.router.add_post("/v1/chat/completions/render", chat_render)
    app.router.add_post("/v1/completions/render", completion_render)
