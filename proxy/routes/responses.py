"""The Responses API: `POST /v1/responses/render` (vLLM 0.33's render server) and the front door.

* `POST /v1/responses/render`: a Responses request -> one GenerateRequest. vLLM's render server
  is stateless, so `previous_response_id` is refused there. Like vLLM's route it ignores
  `X-Request-Id`: the engine request id is the body's `request_id` (default `resp_<16 hex>`).
* `POST /v1/responses`: render (with the items of a stored previous response prepended),
  generate, derender on the one machine (`core.derender`), written by the Responses adapter
  (`core.derender.adapters.responses`): a response object, or its event stream through the one
  SSE loop. `store: true` (OpenAI's default) keeps the response and what a continuation needs
  in the response store (`proxy.store`), shared by workers and replicas.
* `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}`; `background: true` runs the request
  in this process after answering `queued`; `POST /v1/responses/{id}/cancel` stops it, from any
  replica sharing the store (the running one polls the store for the cancellation).
"""

from __future__ import annotations

import asyncio
import functools
import logging

from aiohttp import web
from pydantic import ValidationError

from core.derender.adapters.sse import StreamWriter
from core.errors import RequestError, validation_error
from core.protocol.responses import ResponsesRequest
from core.render import check_model
from core.render_responses import check_harmony_request, render_responses, request_size
from proxy.app import STATE
from proxy.engine.pool import pool_of
from proxy.engine.run import EngineRun
from proxy.http import json_response, read_json_object
from proxy.background import BACKGROUND, STREAM_LOGS, follow, start_background
from proxy.responses_call import (ACTIVE, NO_BACKGROUND, STORE, ResponsesCall, harmony_history_of, keep_record,
                                  prior_items_of, stored, not_found, store_of)
from proxy.store import open_store
from proxy.streaming import stream_one

log = logging.getLogger("derender_proxy.responses")
STATELESS = "previous_response_id is not supported by the stateless render endpoint."


def validate_request(body: dict) -> ResponsesRequest:
    """Validate once, as FastAPI validates vLLM's body (`from_attributes`: a scalar where an object
    is expected reads "a valid dictionary or object to extract fields from")."""
    try:
        return ResponsesRequest.model_validate(body, from_attributes=True)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False)) from None


async def responses_render(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await read_json_object(request)
    responses = validate_request(body)
    check_model(state.model, responses.model)
    if responses.previous_response_id is not None:
        raise RequestError(STATELESS, 400, "invalid_request_error", "previous_response_id")
    result = await state.run_cpu(request_size(responses), render_responses, state.model, state.render,
                                 responses)
    return json_response(result.generate_request)




# -- the front door --------------------------------------------------------------------------------

async def create_response(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    req = validate_request(await read_json_object(request))
    check_model(state.model, req.model)
    harmony = state.model.renderer == "harmony"
    if harmony:
        check_harmony_request(req)
    store = request.app.get(STORE)
    if req.background and store is None:
        raise RequestError(NO_BACKGROUND, 400, "invalid_request_error", "background")
    if harmony:
        history, prior_items, prior = await harmony_history_of(request, req), None, []
    else:
        history = None
        prior_items, prior = await prior_items_of(request, req)
    rendered = await state.run_cpu(request_size(req), functools.partial(
        render_responses, state.model, state.render, req, prior_items=prior_items, harmony_history=history))
    gen = rendered.generate_request
    run = EngineRun(request, pool_of(request.app))
    run.count(len(gen["token_ids"]), 0)
    keep = store is not None and req.store
    if req.stream and not req.background:
        # the call (session, frame, writer, head) is made while the engine computes the first token
        made: list[tuple[ResponsesCall, StreamWriter]] = []

        def new_writer() -> StreamWriter:
            call = ResponsesCall(request, req, rendered, prior)
            made.append((call, call.writer()))
            return made[0][1]

        async def store_final() -> None:
            # stored before the terminal event goes out: a client (or another replica it reaches)
            # may continue with previous_response_id the moment it reads `response.completed`
            call, writer = made[0]
            final = getattr(writer, "final", None)  # the response the stream ends with
            if final is not None:
                await keep_record(store, call.record(final))

        return await stream_one(request, run, gen, new_writer, store_final if keep else None)
    call = ResponsesCall(request, req, rendered, prior)
    if req.background:
        return await start_background(request, call, run, store)
    response = await call.generate(request, run)
    if keep:
        await keep_record(store, call.record(response))
    return json_response(response)


async def retrieve_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    store = store_of(request, "GET /v1/responses/{id}", "response_id")
    if request.query.get("stream", "").lower() == "true":
        return await _resume(request, response_id)
    record = await stored(store, store.get(response_id))
    if record is None:
        raise not_found(response_id)
    return json_response(record["response"])


async def _resume(request: web.Request, response_id: str) -> web.StreamResponse:
    """`GET ...?stream=true&starting_after=N`: the events of a background streamed response after N."""
    events = request.app[STREAM_LOGS].get(response_id)
    if events is None:
        raise RequestError(f"Response '{response_id}' is not a background stream running on this server (its "
                           "events are kept where it runs); GET it without stream.", 400, "invalid_request_error",
                           "stream")
    after = request.query.get("starting_after")
    try:
        start = 0 if after is None else int(after) + 1
    except ValueError:
        raise RequestError("starting_after must be an integer", 400, "invalid_request_error", "starting_after") from None
    return await follow(request, events, max(0, start))


async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    store = store_of(request, "DELETE /v1/responses/{id}", "response_id")
    if not await stored(store, store.delete(response_id)):
        raise not_found(response_id)
    return json_response({"id": response_id, "object": "response.deleted", "deleted": True})


async def cancel_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    store = store_of(request, "POST /v1/responses/{id}/cancel", "response_id")
    record = await stored(store, store.get(response_id))
    if record is None:
        raise not_found(response_id)
    response = record["response"]
    if response.get("status") not in ACTIVE:
        # vLLM's message (OpenAI: only background responses can be cancelled)
        raise RequestError("Cannot cancel a synchronous response.", 400, "invalid_request_error", "response_id")
    response = {**response, "status": "cancelled"}
    if not await stored(store, store.put({**record, "response": response}, if_status=ACTIVE)):
        record = await stored(store, store.get(response_id))  # it finished meanwhile
        if record is None:
            raise not_found(response_id)
        return json_response(record["response"])
    task = request.app[BACKGROUND].get(response_id)
    if task is not None:  # running here: stop it now (aborts the engine request)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return json_response(response)


async def _close_store(app: web.Application) -> None:
    tasks = list(app[BACKGROUND].values())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    store = app.get(STORE)
    if store is not None:
        await store.close()


def setup(app: web.Application) -> None:
    config = app[STATE].config
    # a malformed --response-store is a start-up error; nothing is opened until a request needs it
    app[STORE] = open_store(config.response_store, ttl=config.response_store_ttl,
                            max_bytes=config.response_store_max_bytes)
    app[BACKGROUND] = {}
    app[STREAM_LOGS] = {}
    app.on_cleanup.append(_close_store)
    app.router.add_post("/v1/responses/render", responses_render)
    app.router.add_post("/v1/responses", create_response)
    app.router.add_get("/v1/responses/{response_id}", retrieve_response)
    app.router.add_delete("/v1/responses/{response_id}", delete_response)
    app.router.add_post("/v1/responses/{response_id}/cancel", cancel_response)
