"""POST /v1/chat/completions/derender and POST /v1/completions/derender (docs/vllm-wire-spec.md §2.4, 2.5, 5).

Both body shapes share a path and are told apart by `stream`. The body is validated once
with pydantic (the union's errors on failure, as vLLM reports them); the derender itself is
sans-IO code in `core.derender`, run inline for small payloads and in the bounded thread pool
for large ones. Streaming calls answer plain JSON `{"chunk", "stream_state"}` (not SSE).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from core.derender import (derender_chat, derender_chat_stream, derender_completion,
                           derender_completion_stream)
from core.errors import RequestError, validation_error
from core.logprobs import TokenTexts
from core.protocol.derender import validate_derender_body
from core.protocol.generate import prevalidate_logprobs
from proxy.app import INLINE_WORK_CHARS, STATE
from proxy.http import read_json_object



async def _read_body(request: web.Request) -> Any:
    """The JSON body; a JSON body that is not an object is reported by the union validation
    below (vLLM lists both members' complaints), everything else as `read_json_object` does."""
    try:
        return await read_json_object(request)
    except RequestError as exc:
        if request.content_type != "application/json" or exc.status != 400:  # (408, 413, 415: no body to re-read)
            raise
        try:
            data = orjson.loads(await request.read())  # aiohttp caches the body
        except orjson.JSONDecodeError:
            raise exc from None
        if isinstance(data, dict):
            raise exc from None
        return data


def _as_vllm_pydantic(error: dict[str, Any]) -> dict[str, Any]:
    """vLLM's pydantic reports a non-object where a model is expected as `model_attributes_type`."""
    if error.get("type") == "model_type":
        error = {k: v for k, v in error.items() if k != "ctx"}
        error["type"] = "model_attributes_type"
        error["msg"] = "Input should be a valid dictionary or object to extract fields from"
    return error


def _validate(body: Any, chat: bool) -> Any:
    try:
        return validate_derender_body(body, chat=chat)
    except ValidationError as exc:
        raise validation_error([_as_vllm_pydantic(e) for e in exc.errors(include_url=False)]) from None


# run_cpu units per body byte. The body's size tracks both costs that grow with it: pydantic
# validation (~0.3 us per byte of logprobs) and the decode (a token costs ~5 us plain, ~25 us
# through parsers, with ~7 bytes per id). A few-ms job, ~4 KB, stays inline; larger bodies
# (thousands of tokens, or logprobs with many candidates) go to the thread pool whole:
# validation, derender and serialization, so the event loop never waits on them.
WORK_PER_BODY_BYTE = 4


async def _derender(request: web.Request, chat: bool) -> web.Response:
    state = request.app[STATE]
    body = await _read_body(request)
    size = len(await request.read()) * WORK_PER_BODY_BYTE  # aiohttp caches the body
    settings = state.derender

    def work() -> bytes:
        if size >= INLINE_WORK_CHARS:
            prevalidate_logprobs(body)  # in the pool: let the GIL change hands between slices
        req = _validate(body, chat=chat)
        if chat:
            fn = derender_chat_stream if req.stream else derender_chat
        else:
            fn = derender_completion_stream if req.stream else derender_completion
        return orjson.dumps(fn(settings, req))

    return web.Response(body=await state.run_cpu(size, work), content_type="application/json")


async def chat_derender(request: web.Request) -> web.Response:
    return await _derender(request, chat=True)


async def completion_derender(request: web.Request) -> web.Response:
    return await _derender(request, chat=False)


def setup(app: web.Application) -> None:
    TokenTexts.of(app[STATE].model.tokenizer)  # per-tokenizer caches, built at start-up
    app.router.add_post("/v1/chat/completions/derender", chat_derender)
    app.router.add_post("/v1/completions/derender", completion_derender)
