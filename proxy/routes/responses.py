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
import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from core.derender.adapters.responses import ReasoningCounter, ResponsesFrame, ResponsesStream, non_streamed
from core.derender.session import DerenderSession
from core.derender.spec import OutputSpec
from core.engine_request import engine_body, max_tokens
from core.errors import RequestError, validation_error
from core.protocol.responses import ResponsesRequest, validate_items
from core.render import check_model
from core.render_responses import dump_item, render_responses, request_size
from proxy.app import STATE
from proxy.engine.pool import pool_of
from proxy.engine.run import EngineRun
from proxy.http import json_response, read_json_object
from proxy.store import ResponseStore, StoreUnavailable, open_store
from proxy.streaming import SSE_HEADERS, SSEResponse, client_gone, collect, pump, write_stream

log = logging.getLogger("derender_proxy.responses")
OWNER = f"{socket.gethostname()}:{os.getpid()}"  # the process running a background response
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

STORE: web.AppKey[Any] = web.AppKey("response_store", object)
BACKGROUND: web.AppKey[dict] = web.AppKey("background_responses", dict)
STREAM_LOGS: web.AppKey[dict] = web.AppKey("background_stream_logs", dict)
ACTIVE = ("queued", "in_progress")
CANCEL_POLL_SECONDS = 1.0  # how often a background response looks for a cancellation from elsewhere
STORE_OFF = ("The response store is off (--response-store none), so {what} is not available; run the "
             "server with a response store (the default SQLite file, or --response-store redis://...).")
# vLLM's message for background without a store
NO_BACKGROUND = ("This server does not store responses (--response-store none) and therefore does not support "
                 "the background mode.")


def store_of(request: web.Request, what: str, param: str | None = None) -> ResponseStore:
    store = request.app.get(STORE)
    if store is None:
        raise RequestError(STORE_OFF.format(what=what), 400, "invalid_request_error", param)
    return store


async def _stored(store: ResponseStore, call: Any) -> Any:
    try:
        return await call
    except StoreUnavailable as exc:
        raise RequestError(f"The response store ({store.url}) is unavailable: {exc}", 503,
                           "ServiceUnavailableError") from None


def not_found(response_id: str) -> RequestError:
    return RequestError(f"Response with id '{response_id}' not found.", 404, "invalid_request_error", "response_id")


def _input_items(req: ResponsesRequest) -> list[Any]:
    """This request's input as stored items (a string input is one user message)."""
    if isinstance(req.input, str):
        return [{"type": "message", "role": "user", "content": req.input}]
    return [dump_item(item) for item in req.input]


async def _prior(request: web.Request, req: ResponsesRequest) -> tuple[list[Any] | None, list[Any]]:
    """(validated prior items for render, their stored form) of `previous_response_id`."""
    if req.previous_response_id is None:
        return None, []
    store = store_of(request, "previous_response_id", "previous_response_id")
    record = await _stored(store, store.get(req.previous_response_id))
    if record is None:
        raise not_found(req.previous_response_id)
    items = [*record.get("input", []), *record["response"].get("output", [])]
    try:
        return validate_items(items), items
    except ValidationError:  # written by another version of us: say so rather than 500
        raise RequestError(f"The stored response '{req.previous_response_id}' cannot be continued (its items do not "
                           "validate).", 400, "invalid_request_error", "previous_response_id") from None


class ResponsesCall:
    """One `POST /v1/responses` after render: its session, frame and engine request."""

    def __init__(self, request: web.Request, req: ResponsesRequest, rendered: Any, prior: list[Any]) -> None:
        state = request.app[STATE]
        settings = state.derender
        self.req = req
        self.gen = rendered.generate_request
        sampling = self.gen["sampling_params"]
        chat = rendered.chat
        parser = settings.parser_for(chat)
        spec = OutputSpec.for_chat(settings, chat, sampling, parser, max_tokens(self.gen))
        self.session = DerenderSession(spec, [self.gen["token_ids"]], 1)
        self.frame = ResponsesFrame(req, sampling, model=state.model.name, created_at=int(time.time()),
                                    tool_names=rendered.tool_names)
        self.counter = ReasoningCounter(parser)
        self.input = [*prior, *_input_items(req)]

    def record(self, response: dict[str, Any], owner: str | None = None) -> dict[str, Any]:
        return {"id": response["id"], "response": response, "input": self.input, "owner": owner}

    async def generate(self, request: web.Request, run: EngineRun) -> dict[str, Any]:
        """The non-streamed response object (engine failures raise the client's error)."""
        sampling = self.gen["sampling_params"]
        use_stream = bool(self.session.spec.text.stop) and sampling.get("prompt_logprobs") is None
        try:
            await collect(request, run, [self.gen], self.session, use_stream)
            run.count(0, self.session.completion_tokens)
        finally:
            run.report_tokens()
        return non_streamed(self.frame, self.session, self.counter)


async def create_response(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    req = validate_request(await read_json_object(request))
    check_model(state.model, req.model)
    store = request.app.get(STORE)
    if req.background and store is None:
        raise RequestError(NO_BACKGROUND, 400, "invalid_request_error", "background")
    prior_items, prior = await _prior(request, req)
    rendered = await state.run_cpu(request_size(req), functools.partial(
        render_responses, state.model, state.render, req, prior_items=prior_items))
    call = ResponsesCall(request, req, rendered, prior)
    run = EngineRun(request, pool_of(request.app))
    run.count(len(call.gen["token_ids"]), 0)
    keep = store is not None and req.store
    if req.background:
        return await _start_background(request, call, run, store)
    if req.stream:
        writer = ResponsesStream(call.session, call.frame, call.counter)
        head = writer.head()
        source = await run.open(engine_body(call.gen, stream=True), call.gen["token_ids"])
        resp = await write_stream(request, run, [source], writer, head)
        if keep and writer.final is not None:
            await _keep(store, call.record(writer.final))
        return resp
    response = await call.generate(request, run)
    if keep:
        await _keep(store, call.record(response))
    return json_response(response)


async def _keep(store: ResponseStore, record: dict[str, Any]) -> None:
    """Store an answered response. The store is best effort here: a client that asked nothing
    of it gets its answer even while it is down (what reads it later gets the 503 then)."""
    try:
        await store.put(record)
    except StoreUnavailable as exc:
        log.warning("response %s was answered but not stored: %s", record["id"], exc)


# -- background --------------------------------------------------------------------------------------

class EventLog:
    """The events of a background streamed response, in this process: the request that created
    it and later `GET ...?stream=true&starting_after=N` follow it; the generation goes on whoever
    listens. Kept LOG_KEEP_SECONDS after the end, for late resumptions."""

    def __init__(self) -> None:
        self.events: list[bytes] = []  # one per sequence number
        self.done = False
        self._changed = asyncio.Condition()

    async def extend(self, events: list[bytes]) -> None:
        async with self._changed:
            self.events.extend(events)
            self._changed.notify_all()

    async def finish(self) -> None:
        async with self._changed:
            self.done = True
            self._changed.notify_all()

    async def follow(self, start: int) -> AsyncIterator[list[bytes]]:
        seen = start
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.events) > seen or self.done)
                events, seen = self.events[seen:], len(self.events)
                done = self.done
            if events:
                yield events
            if done and seen >= len(self.events):
                return


LOG_KEEP_SECONDS = 600.0


async def _start_background(request: web.Request, call: ResponsesCall, run: EngineRun,
                            store: ResponseStore) -> web.StreamResponse:
    queued = call.frame.response([], "queued", None)
    await _stored(store, store.put(call.record(queued, OWNER)))
    response_id = queued["id"]
    logs = request.app[STREAM_LOGS]
    events = logs[response_id] = EventLog() if call.req.stream else None
    tasks = request.app[BACKGROUND]
    task = asyncio.get_running_loop().create_task(_run_background(request, call, run, store, events))
    tasks[response_id] = task

    def ended(_: Any) -> None:
        tasks.pop(response_id, None)
        if events is not None:
            asyncio.get_running_loop().call_later(LOG_KEEP_SECONDS, logs.pop, response_id, None)
    task.add_done_callback(ended)
    if events is None:
        return json_response(queued)
    return await _follow(request, events, 0)


async def _follow(request: web.Request, events: EventLog, start: int) -> web.StreamResponse:
    """Stream a background response's events from `start`; leaving does not stop the generation."""
    resp = SSEResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    try:
        async for batch in events.follow(start):
            await resp.write(b"".join(batch))
        await resp.write_eof()
    except ConnectionResetError:
        raise client_gone() from None
    return resp


async def _run_background(request: web.Request, call: ResponsesCall, run: EngineRun, store: ResponseStore,
                          events: EventLog | None) -> None:
    """Generate, then store the answer unless the response was cancelled meanwhile. A cancellation
    here (POST .../cancel on this process, shutdown) or seen in the store stops the generation,
    which aborts the engine request. With `events`, the generation is streamed into that log."""
    response_id = call.frame.id
    generation = watcher = None
    try:
        await store.put(call.record(call.frame.response([], "in_progress", None), OWNER), if_status=ACTIVE)
        produce = call.generate(request, run) if events is None else _stream_into(request, call, run, events)
        generation = asyncio.ensure_future(produce)
        watcher = asyncio.ensure_future(_watch_cancellation(store, response_id))
        await asyncio.wait([generation, watcher], return_when=asyncio.FIRST_COMPLETED)
        if not generation.done():
            return  # cancelled from another replica (finally stops the generation)
        try:
            response = generation.result()
        except RequestError as exc:
            response = call.frame.response([], "failed", None, {"code": "server_error", "message": exc.message})
        await store.put(call.record(response, OWNER), if_status=ACTIVE)
    except StoreUnavailable as exc:
        log.warning("background response %s: the store is unavailable: %s", response_id, exc)
    except Exception:
        log.exception("background response %s failed", response_id)
        failed = call.frame.response([], "failed", None, {"code": "server_error", "message": "Internal server error"})
        with contextlib.suppress(StoreUnavailable):
            await store.put(call.record(failed, OWNER), if_status=ACTIVE)
    finally:
        for task in (generation, watcher):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(t for t in (generation, watcher) if t is not None), return_exceptions=True)
        if events is not None:
            await events.finish()


async def _stream_into(request: web.Request, call: ResponsesCall, run: EngineRun, events: EventLog) -> dict[str, Any]:
    """A background streamed response: the Responses events into the log; returns the final response."""
    writer = ResponsesStream(call.session, call.frame, call.counter)
    await events.extend(writer.head())
    try:
        source = await run.open(engine_body(call.gen, stream=True), call.gen["token_ids"])
        error = await pump(request, run, [source], writer, events.extend)
        await events.extend(writer.close(error))
    except RequestError as exc:  # the engine failed before its first token
        await events.extend(writer.close(exc))
    except asyncio.CancelledError:
        run.abort_all("client_disconnect")
        raise
    finally:
        run.report_tokens()
    assert writer.final is not None
    return writer.final


async def _watch_cancellation(store: ResponseStore, response_id: str) -> None:
    """Returns once the stored response says it was cancelled (or is gone)."""
    while True:
        await asyncio.sleep(CANCEL_POLL_SECONDS)
        try:
            record = await store.get(response_id)
        except StoreUnavailable:
            continue
        if record is None or record["response"].get("status") not in ACTIVE:
            return


async def retrieve_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    store = store_of(request, "GET /v1/responses/{id}", "response_id")
    if request.query.get("stream", "").lower() == "true":
        return await _resume(request, response_id)
    record = await _stored(store, store.get(response_id))
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
    return await _follow(request, events, max(0, start))


async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    store = store_of(request, "DELETE /v1/responses/{id}", "response_id")
    if not await _stored(store, store.delete(response_id)):
        raise not_found(response_id)
    return json_response({"id": response_id, "object": "response.deleted", "deleted": True})


async def cancel_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    store = store_of(request, "POST /v1/responses/{id}/cancel", "response_id")
    record = await _stored(store, store.get(response_id))
    if record is None:
        raise not_found(response_id)
    response = record["response"]
    if response.get("status") not in ACTIVE:
        # vLLM's message (OpenAI: only background responses can be cancelled)
        raise RequestError("Cannot cancel a synchronous response.", 400, "invalid_request_error", "response_id")
    response = {**response, "status": "cancelled"}
    if not await _stored(store, store.put({**record, "response": response}, if_status=ACTIVE)):
        record = await _stored(store, store.get(response_id))  # it finished meanwhile
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
