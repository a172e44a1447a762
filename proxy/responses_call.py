"""One `POST /v1/responses` after its render: the session, the response frame, what the store keeps.

Shared by the route (`proxy.routes.responses`) and background runs (`proxy.background`): the
store access with its errors (off: a 400 that says so; down: a 503), the items a continuation
replays (`previous_response_id`), and the record written to the store.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Collection
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from core.derender.adapters.harmony_responses import HarmonyResponsesStream, function_names, harmony_non_streamed
from core.derender.adapters.responses import ReasoningCounter, ResponsesFrame, ResponsesStream, non_streamed
from core.derender.session import DerenderSession
from core.errors import RequestError
from core.protocol.responses import ResponsesRequest, validate_items
from core.render_responses import HarmonyHistory, dump_item
from core.renderers.harmony_responses import dump_messages, load_messages
from proxy.app import STATE
from proxy.engine.run import EngineRun
from proxy.store import ResponseStore, StoreUnavailable
from proxy.streaming import collect

log = logging.getLogger("derender_proxy.responses")

STORE: web.AppKey[Any] = web.AppKey("response_store", object)
OWNER = f"{socket.gethostname()}:{os.getpid()}"  # the process running a background response
ACTIVE = ("queued", "in_progress")
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


async def stored(store: ResponseStore, call: Any) -> Any:
    try:
        return await call
    except StoreUnavailable as exc:
        raise RequestError(f"The response store ({store.url}) is unavailable: {exc}", 503,
                           "ServiceUnavailableError") from None


def not_found(response_id: str) -> RequestError:
    return RequestError(f"Response with id '{response_id}' not found.", 404, "invalid_request_error", "response_id")


def input_items(req: ResponsesRequest) -> list[Any]:
    """This request's input as stored items (a string input is one user message)."""
    if isinstance(req.input, str):
        return [{"type": "message", "role": "user", "content": req.input}]
    return [dump_item(item) for item in req.input]


async def _previous_record(request: web.Request, response_id: str) -> dict[str, Any]:
    """The stored record `previous_response_id` names: a 404 when there is none, a 400 while it is
    still queued or in progress (a background response: its output is not there yet, and
    continuing without it would drop the answer silently)."""
    store = store_of(request, "previous_response_id", "previous_response_id")
    record = await stored(store, store.get(response_id))
    if record is None:
        raise not_found(response_id)
    status = record["response"].get("status")
    if status in ACTIVE:
        raise RequestError(f"The response '{response_id}' is still {status}: continue it once it has finished "
                           f"(poll GET /v1/responses/{response_id}).", 400, "invalid_request_error",
                           "previous_response_id")
    return record


async def prior_items_of(request: web.Request, req: ResponsesRequest) -> tuple[list[Any] | None, list[Any]]:
    """(validated prior items for render, their stored form) of `previous_response_id`."""
    if req.previous_response_id is None:
        return None, []
    record = await _previous_record(request, req.previous_response_id)
    items = [*record.get("input", []), *record["response"].get("output", [])]
    try:
        return validate_items(items), items
    except ValidationError:  # written by another version of us: say so rather than 500
        raise RequestError(f"The stored response '{req.previous_response_id}' cannot be continued (its items do not "
                           "validate).", 400, "invalid_request_error", "previous_response_id") from None


async def harmony_history_of(request: web.Request, req: ResponsesRequest) -> HarmonyHistory | None:
    """gpt-oss: the stored Harmony messages and output items `previous_response_id` continues."""
    if req.previous_response_id is None:
        return None
    record = await _previous_record(request, req.previous_response_id)
    try:
        # only the calls are read (function_call_output finds its call's name there)
        calls = [item for item in record["response"].get("output", []) if item.get("type") == "function_call"]
        return HarmonyHistory(load_messages(record["harmony"]), validate_items(calls))
    except (KeyError, TypeError, ValueError, AttributeError):  # not a gpt-oss response, or another version's
        raise RequestError(f"The stored response '{req.previous_response_id}' cannot be continued by a gpt-oss "
                           "model (it has no Harmony messages).", 400, "invalid_request_error",
                           "previous_response_id") from None


class ResponsesCall:
    """One `POST /v1/responses` after render: its session, frame and engine request."""

    def __init__(self, request: web.Request, req: ResponsesRequest, rendered: Any, prior: list[Any]) -> None:
        state = request.app[STATE]
        settings = state.derender
        self.req = req
        self.gen = rendered.generate_request
        sampling = self.gen["sampling_params"]
        chat = rendered.chat
        # gpt-oss: the Harmony items are read from the token ids (core/derender/adapters/harmony_responses.py),
        # so the chat parsers need not run
        parser = None if rendered.harmony_messages is not None else settings.parser_for(chat)
        self.session = DerenderSession.for_chat(settings, chat, self.gen, parser)
        self.frame = ResponsesFrame(req, sampling, model=state.model.name, created_at=int(time.time()),
                                    tool_names=rendered.tool_names)
        self.counter = ReasoningCounter(parser)
        self.prior = prior  # the stored items this request continues (the record's input starts with them)
        # gpt-oss: the prompt's Harmony messages; the output's are added once answered (the store
        # keeps both for a continuation, as vLLM's msg_store)
        self.harmony = rendered.harmony_messages
        self.harmony_output: list[Any] = []
        self.function_names = function_names(req) if self.harmony is not None else frozenset()
        self.shown_messages = self.harmony if req.enable_response_messages else None

    def writer(self) -> Any:
        """The event stream's writer (a StreamWriter)."""
        if self.harmony is not None:
            stream = HarmonyResponsesStream(self.session, self.frame, self.function_names, self.shown_messages)
            self.harmony_output = stream.output_messages  # filled when the stream closes
            return stream
        return ResponsesStream(self.session, self.frame, self.counter)

    def record(self, response: dict[str, Any], owner: str | None = None) -> dict[str, Any]:
        # the input items are dumped only for the store, after the answer (not on the way to it)
        record = {"id": response["id"], "response": response, "input": [*self.prior, *input_items(self.req)],
                  "owner": owner}
        if self.harmony is not None:
            record["harmony"] = dump_messages([*self.harmony, *self.harmony_output])
        return record

    async def generate(self, request: web.Request, run: EngineRun) -> dict[str, Any]:
        """The non-streamed response object (engine failures raise the client's error)."""
        sampling = self.gen["sampling_params"]
        use_stream = bool(self.session.spec.text.stop) and sampling.get("prompt_logprobs") is None
        try:
            await collect(request, run, [self.gen], self.session, use_stream)
            run.count(0, self.session.completion_tokens)
        finally:
            run.report_tokens()
        if self.harmony is not None:
            response, self.harmony_output = harmony_non_streamed(self.frame, self.session, self.function_names,
                                                                 self.shown_messages)
            return response
        return non_streamed(self.frame, self.session, self.counter)


async def keep_record(store: ResponseStore, record: dict[str, Any], *,
                      if_status: Collection[str] | None = None) -> None:
    """Store an answered response (with `if_status`, only over a record in one of those statuses).
    The store is best effort here: a client that asked nothing of it gets its answer even while it
    is down (what reads it later gets the 503 then)."""
    try:
        await store.put(record, if_status=if_status)
    except StoreUnavailable as exc:
        log.warning("response %s was answered but not stored: %s", record["id"], exc)


# -- background --------------------------------------------------------------------------------------

