"""Request ids, the per-request JSON access log, and JSON logging for the whole process.

The outermost middleware (`middleware()`) runs around every request but the probes:
* takes the client's `X-Request-Id` or makes one, keeps it in `request[REQUEST_ID]` and in a
  context variable so every log line written while handling the request carries it, and echoes
  it in the response's `X-Request-Id` header (added when the response is prepared, so streamed
  responses get it too);
* records request count by route template and status, in-flight requests and end-to-end latency;
* writes one JSON access-log line: request id, method, route, path, status, latency, and the
  prompt/completion tokens the handler reported through `metrics_of(app).add_tokens(..., request=)`.

It sits outside `proxy.gate`, which answers errors, so the status it records is the one the client really got.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import orjson
from aiohttp import web

from proxy.metrics import ARRIVAL_KEY, METRICS, TOKENS_KEY, request_key

REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID = request_key("request_id", str)
ACCESS_LOG_ENABLED: web.AppKey[bool] = web.AppKey("access_log_enabled", bool)
QUIET_ROUTES = frozenset({"/health", "/metrics"})
CLIENT_CLOSED = 499  # nginx's code for "client went away before the response was complete"

access_log = logging.getLogger("derender_proxy.access")
current_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "derender_proxy_request_id", default=None)


def request_id(request: web.Request) -> str:
    """The request's id: the client's `X-Request-Id` when it sent one, else a generated uuid hex."""
    rid = request.get(REQUEST_ID)
    if rid is None:
        rid = request[REQUEST_ID] = request.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex
    return rid


def carryable(value: str) -> str:
    """A header value as text every later step can carry: aiohttp decodes header bytes as UTF-8,
    keeping bytes that are not (`\\xff\\xfe`) as lone surrogates, which JSON (the engine request, a
    response body, a log line) cannot encode. Those values are read as Latin-1 instead, byte for
    byte, as Starlette (vLLM) reads every header; valid UTF-8 is kept as is."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("latin-1")


def _with_carryable_request_id(request: web.Request) -> web.Request:
    """The request itself, or (rarely) a clone whose X-Request-Id handlers can use as they like."""
    value = request.headers.get(REQUEST_ID_HEADER)
    if value is None:
        return request
    fixed = carryable(value)
    if fixed is value:
        return request
    headers = request.headers.copy()
    headers[REQUEST_ID_HEADER] = fixed
    return request.clone(headers=headers)


def route_template(request: web.Request) -> str:
    """`/v1/chat/completions`, never the raw path: bounded label cardinality for metrics."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def middleware(answered_first: frozenset[Any] = frozenset()) -> Any:
    """`observe`, the outermost middleware; the route handlers in `answered_first` (the
    Kubernetes probes) are answered before it: no request id, no metrics, no log line, no key."""

    @web.middleware
    async def observe(request: web.Request, handler: Any) -> web.StreamResponse:
        route_handler = request.match_info.handler
        if route_handler in answered_first:
            return await route_handler(request)
        inner = _with_carryable_request_id(request)  # what the handlers see
        start = inner[ARRIVAL_KEY] = time.perf_counter()
        # on both: aiohttp prepares a response a handler returns with the request it received itself
        rid = request[REQUEST_ID] = request_id(inner)
        token = current_request_id.set(rid)
        metrics = request.app[METRICS]
        metrics.in_flight.inc()
        status = 500
        try:
            response = await handler(inner)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            status = CLIENT_CLOSED
            raise
        finally:
            elapsed = time.perf_counter() - start
            route = route_template(request)
            metrics.in_flight.dec()
            metrics.request_done(route, request.method, status, elapsed)
            # probes and scrapes come every few seconds: their lines are debug-level noise
            level = logging.DEBUG if route in QUIET_ROUTES and status < 400 else logging.INFO
            if request.app[ACCESS_LOG_ENABLED] and access_log.isEnabledFor(level):
                fields: dict[str, Any] = {
                    "request_id": rid, "method": request.method, "route": route, "path": request.path, "status": status,
                    "latency_ms": round(elapsed * 1000, 3), "remote": request.remote,
                }
                tokens = inner.get(TOKENS_KEY)
                if tokens is not None:
                    fields["prompt_tokens"], fields["completion_tokens"] = tokens
                access_log.log(level, "request", extra={"fields": fields})
            current_request_id.reset(token)

    return observe


def echo_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """The request's id in the response's `X-Request-Id` (called when a response is prepared,
    streams included: `proxy.gate.install`)."""
    rid = request.get(REQUEST_ID)
    if rid is not None:
        response.headers[REQUEST_ID_HEADER] = rid


def install(app: web.Application, enabled: bool = True) -> None:
    """`middleware()` must be the first middleware (create_app puts it there)."""
    app[ACCESS_LOG_ENABLED] = enabled


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, and any `extra={"fields": {}}`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or current_request_id.get()
        if rid is not None:
            line["request_id"] = rid
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str = "info") -> None:
    """JSON lines on stderr for every logger of the process (ours, aiohttp's, the libraries')."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
