"""HTTP helpers shared by every route: body parsing, JSON responses, error middleware.

The rule for clients: whatever they send, they get either a 2xx or an OpenAI error body
(`{"error": {...}}`) with the right status; never a 500 with a traceback.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from core.errors import NESTED_TOO_DEEPLY, RequestError, error_json, validation_error
from proxy.request_body import BodyTimeout, read_body

log = logging.getLogger("derender_proxy")

JSON_CONTENT_TYPE = "application/json"
UNSUPPORTED_MEDIA = "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type=JSON_CONTENT_TYPE,
                        headers=headers)


def error_response(exc: RequestError) -> web.Response:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
    return web.Response(body=error_json(exc.message, exc.type, exc.status, exc.param), status=exc.status,
                        content_type=JSON_CONTENT_TYPE, headers=headers)


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, with vLLM's content-type and shape checks."""
    if request.content_type != JSON_CONTENT_TYPE:
        raise RequestError(UNSUPPORTED_MEDIA, 400, "Bad Request")
    raw = await read_body(request)  # in bounded time and size, Content-Encoding undone
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _json_decode_error(raw) from None
    if not isinstance(data, dict):
        raise validation_error([{"type": "model_attributes_type", "loc": (),
                                 "msg": "Input should be a valid dictionary or object to extract fields from",
                                 "input": data}])
    return data


def _json_decode_error(raw: bytes) -> RequestError:
    """FastAPI's wording for a body that is not JSON: the decoder's reason, `loc` = the char position."""
    import json

    try:
        json.loads(raw)
        reason, pos = "Invalid JSON", 0  # orjson is stricter (e.g. NaN); rare
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        pos = exc.pos if isinstance(exc, json.JSONDecodeError) else exc.start
    except RecursionError:  # orjson stops at 1024 levels; the stdlib re-parse would blow the stack
        reason, pos = "Maximum nesting depth exceeded", 0
    return validation_error([{"type": "json_invalid", "loc": (pos,), "msg": "JSON decode error", "input": {},
                              "ctx": {"error": reason}}])


def validate(model: type[BaseModel], data: Any, *, from_attributes: bool = False) -> Any:
    """Validate once per request; pydantic errors become vLLM's 400 body.

    `from_attributes=True` is how FastAPI validates bodies: a non-object where a nested model is
    expected is then a `model_attributes_type` error, as vLLM reports it.
    """
    try:
        return model.model_validate(data, from_attributes=from_attributes)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False)) from None


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """`answer_errors` with the OpenAI shape (the proxy's own app does this inside `proxy.gate`)."""
    try:
        return await handler(request)
    except Exception as exc:
        return await answer(request, exc, error_response)


async def answer_errors(request: web.Request, handler: Any, respond: Callable[[RequestError], web.Response]
                        ) -> web.StreamResponse:
    """Run `handler`; whatever it raises is answered by `respond` (the API's error shape)."""
    try:
        return await handler(request)
    except Exception as exc:
        return await answer(request, exc, respond)


async def answer(request: web.Request, exc: Exception, respond: Callable[[RequestError], web.Response]
                  ) -> web.StreamResponse:
    """The answer to what a handler raised (re-raised when it is no error: an HTTP redirect)."""
    if isinstance(exc, BodyTimeout):
        return await _answer_and_close(request, respond(exc))
    error = as_request_error(exc, request)
    if error is None:
        raise exc
    return respond(error)


def as_request_error(exc: Exception, request: web.Request) -> RequestError | None:
    """The client-facing error for any exception a handler raised (None: an HTTP redirect, re-raise it).

    Shared by the OpenAI-shaped middleware and routes that answer errors in another API's shape.
    Call it from inside the `except` block: an unexpected exception's traceback is logged here.
    """
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        # aiohttp's request.read() raises it without the actual size; its text names the limit
        return RequestError(f"Request body is too large. {exc.text}", 413, "RequestEntityTooLarge")
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            return None
        message = exc.reason if exc.status != 404 else f"Not Found: {request.method} {request.path}"
        return RequestError(message, exc.status, _status_type(exc.status))
    if isinstance(exc, (ValueError, TypeError, OverflowError)):
        # vLLM maps these to 400 (docs/vllm-wire-spec.md §1); core code should raise RequestError, so log the escape
        log.warning("400 from %s on %s: %s", type(exc).__name__, request.path, exc)
        return RequestError(str(exc) or type(exc).__name__, 400, "BadRequestError")
    if isinstance(exc, NotImplementedError):
        return RequestError(str(exc) or "Not implemented", 501, "NotImplementedError")
    if isinstance(exc, RecursionError):  # a value nested deeper than some code walking it expected
        log.warning("400 from RecursionError on %s", request.path)
        return RequestError(NESTED_TOO_DEEPLY, 400, "BadRequestError")
    # the last line of defence: a JSON 500, the traceback only in our log
    log.exception("internal error on %s %s", request.method, request.path)
    return RequestError("Internal server error", 500, "InternalServerError")


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send `response`, then close the connection without reading the rest of the request body
    (aiohttp would otherwise linger up to 10 s reading it, for a client that sends it byte by byte)."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.protocol is not None:
        request.protocol.force_close()  # the response is out (a transport sends what it holds, then closes)
    return response


def _status_type(status: int) -> str:
    return {401: "Unauthorized", 403: "Forbidden", 404: "NotFoundError", 405: "MethodNotAllowed",
            413: "RequestEntityTooLarge"}.get(status, "BadRequestError" if status < 500 else "InternalServerError")
