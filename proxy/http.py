"""HTTP helpers shared by every route: body parsing, JSON responses, error middleware.

The rule for clients: whatever they send, they get either a 2xx or an OpenAI error body
(`{"error": {...}}`) with the right status; never a 500 with a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

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


def validate(model: type[BaseModel], data: Any) -> Any:
    """Validate once per request; pydantic errors become vLLM's 400 body."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False)) from None


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except BodyTimeout as exc:
        return await _answer_and_close(request, error_response(exc))
    except RequestError as exc:
        return error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        # aiohttp's request.read() raises it without the actual size; its text names the limit
        return error_response(RequestError(f"Request body is too large. {exc.text}", 413,
                                           "RequestEntityTooLarge"))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = exc.reason if exc.status != 404 else f"Not Found: {request.method} {request.path}"
        return error_response(RequestError(message, exc.status, _status_type(exc.status)))
    except (ValueError, TypeError, OverflowError) as exc:
        # vLLM maps these to 400 (spec 1); core code should raise RequestError, so log the escape
        log.warning("400 from %s on %s: %s", type(exc).__name__, request.path, exc)
        return error_response(RequestError(str(exc) or type(exc).__name__, 400, "BadRequestError"))
    except NotImplementedError as exc:
        return error_response(RequestError(str(exc) or "Not implemented", 501, "NotImplementedError"))
    except RecursionError:  # a value nested deeper than some code walking it expected: the client's doing
        log.warning("400 from RecursionError on %s", request.path)
        return error_response(RequestError(NESTED_TOO_DEEPLY, 400, "BadRequestError"))
    except Exception:  # the last line of defence: a JSON 500, the traceback only in our log
        log.exception("internal error on %s %s", request.method, request.path)
        return error_response(RequestError("Internal server error", 500, "InternalServerError"))


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
