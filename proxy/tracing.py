"""Tracing: one OpenTelemetry span per request (`--otlp-traces-endpoint`), and the W3C trace
context passed on to the engines.

With `--otlp-traces-endpoint URL` (as `vllm serve` spells it) every request gets one SERVER span,
a child of the client's `traceparent` when it sent one, exported in batches over OTLP/HTTP by the
OpenTelemetry SDK (the `tracing` extra). The span carries vLLM's attribute names where the meaning
is the same and ours for the proxy's own parts (seconds):

| attribute | what |
|---|---|
| `gen_ai.request.id`, `http.request.method`, `http.route`, `url.path`, `http.response.status_code` | the request |
| `derender_proxy.latency.render` | arrival to the first engine request: body, validation, render |
| `gen_ai.latency.time_in_queue` | waiting for an engine slot (`--engine-max-concurrency`) |
| `gen_ai.latency.time_to_first_token` | arrival to the first token from the engine |
| `derender_proxy.latency.engine` | first engine request to the end of the engines' output (queue included) |
| `derender_proxy.latency.derender` | CPU time derendering the engines' output (detokenize, parse, write events) |
| `gen_ai.latency.e2e` | arrival to the last byte |
| `gen_ai.usage.prompt_tokens`, `gen_ai.usage.completion_tokens`, `derender_proxy.engines` | tokens, engine URLs |

and the events `engine.request`, `engine.first_token`, `engine.done` at those moments. Each
engine request carries `traceparent` (and `tracestate`) naming this span as its parent, so a
vLLM engine started with its own `--otlp-traces-endpoint` puts its `llm_request` span under ours.

Without the flag nothing is recorded, but a client's valid `traceparent` / `tracestate` still
reach the engine unchanged (the proxy is then transparent to the trace).

The timings are reported along the request's path to its `RequestTrace`, a context variable
(`proxy/trace_context.py` has the hooks).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web

from proxy.access_log import CLIENT_CLOSED, REQUEST_ID, route_template
from proxy.metrics import TOKENS_KEY
from proxy.trace_context import CURRENT, TRACEPARENT, RequestTrace, client_context

OTLP_TRACES_PATH = "/v1/traces"
PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
SERVICE_NAME = "derender-proxy"


# -- the span ------------------------------------------------------------------------------------

class Tracing:
    """An app's tracer: its own TracerProvider (never the global one: tests run several apps)."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self.tracer = provider.get_tracer("derender_proxy")
        self.propagator = TraceContextTextMapPropagator()
        self.set_span_in_context = trace.set_span_in_context
        self.server_kind = trace.SpanKind.SERVER
        self.error_status = Status(StatusCode.ERROR)

    def start(self, request: web.Request, route: str) -> tuple[Any, RequestTrace]:
        arrival = time.perf_counter()
        parent = self.propagator.extract(request.headers) if TRACEPARENT in request.headers else None
        span = self.tracer.start_span(f"{request.method} {route}", context=parent, kind=self.server_kind,
                                      attributes={"http.request.method": request.method, "http.route": route,
                                                  "url.path": request.path})
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, context=self.set_span_in_context(span))
        lines = "".join(f"{name}: {value}\r\n" for name, value in carrier.items()).encode("ascii")
        return span, RequestTrace(lines, arrival)

    def finish(self, span: Any, trace: RequestTrace, status: int, request_id: str | None,
               tokens: list[int] | None) -> None:
        end = time.perf_counter()
        wall = time.time_ns()

        def ns(t: float) -> int:
            return wall - int((end - t) * 1e9)

        attributes: dict[str, Any] = {"http.response.status_code": status, "gen_ai.latency.e2e": end - trace.arrival}
        if request_id:
            attributes["gen_ai.request.id"] = request_id
        if trace.engine_call is not None:
            attributes["derender_proxy.latency.render"] = trace.engine_call - trace.arrival
            attributes["gen_ai.latency.time_in_queue"] = trace.queue
            attributes["derender_proxy.latency.derender"] = trace.derender
            span.add_event("engine.request", timestamp=ns(trace.engine_call))
        if trace.first_token_at is not None:
            attributes["gen_ai.latency.time_to_first_token"] = trace.first_token_at - trace.arrival
            span.add_event("engine.first_token", timestamp=ns(trace.first_token_at))
        if trace.engine_done is not None and trace.engine_call is not None:
            attributes["derender_proxy.latency.engine"] = trace.engine_done - trace.engine_call
            span.add_event("engine.done", timestamp=ns(trace.engine_done))
        if tokens is not None:
            attributes["gen_ai.usage.prompt_tokens"], attributes["gen_ai.usage.completion_tokens"] = tokens
        if trace.engines:
            attributes["derender_proxy.engines"] = list(trace.engines)
        span.set_attributes(attributes)
        if status >= 500:
            span.set_status(self.error_status)
        span.end(end_time=wall)


def otlp_traces_url(endpoint: str) -> str:
    """The collector's traces URL: `/v1/traces` added when the endpoint has no path (OTLP/HTTP)."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--otlp-traces-endpoint {endpoint!r}: expected an OTLP/HTTP collector URL, "
                         "http(s)://HOST:4318[/v1/traces]")
    if parts.path in ("", "/"):
        parts = parts._replace(path=OTLP_TRACES_PATH)
    return urlunsplit(parts)


def make_provider(endpoint: str) -> Any:
    """A TracerProvider exporting in batches to the collector at `endpoint` over OTLP/HTTP."""
    for name in PROTOCOL_ENVS:
        protocol = os.environ.get(name)
        if protocol and protocol != "http/protobuf":
            raise ValueError(f"{name}={protocol}: derender-proxy exports traces over OTLP/HTTP only "
                             "(http/protobuf); point --otlp-traces-endpoint at the collector's HTTP port (4318)")
    url = otlp_traces_url(endpoint)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ValueError("--otlp-traces-endpoint needs the OpenTelemetry SDK: "
                         "pip install 'derender-proxy[tracing]'") from None
    attributes: dict[str, Any] = {"process.pid": os.getpid()}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = SERVICE_NAME
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return provider


TRACING: web.AppKey[Any] = web.AppKey("tracing", object)


def provider_of(app: web.Application) -> Any:
    """The app's TracerProvider (None without --otlp-traces-endpoint)."""
    tracing = app.get(TRACING)
    return tracing.provider if tracing is not None else None


def install(app: web.Application, config: Any) -> None:
    """Set up the app's tracer when `--otlp-traces-endpoint` is given (a bad endpoint, or no SDK,
    is a ValueError at start-up); spans still being exported are flushed at cleanup."""
    endpoint = getattr(config, "otlp_traces_endpoint", None)
    tracing = Tracing(make_provider(endpoint)) if endpoint else None
    app[TRACING] = tracing
    if tracing is None:
        return

    async def flush(app: web.Application) -> None:
        # shutdown() joins the exporter's thread and may wait on the collector: not on the loop
        await asyncio.get_running_loop().run_in_executor(None, tracing.provider.shutdown)

    app.on_cleanup.append(flush)


def wanted(request: web.Request) -> bool:
    """Whether `middleware` has anything to do: a tracer, or a client's trace context to carry."""
    return request.app.get(TRACING) is not None or TRACEPARENT in request.headers


async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """A span around the request (with --otlp-traces-endpoint), else the client's trace context
    carried to the engine requests."""
    tracing = request.app.get(TRACING)
    if tracing is None:
        lines = client_context(request.headers) if TRACEPARENT in request.headers else b""
        if not lines:
            return await handler(request)
        token = CURRENT.set(RequestTrace(lines, time.perf_counter()))
        try:
            return await handler(request)
        finally:
            CURRENT.reset(token)
    span, trace = tracing.start(request, route_template(request))
    token = CURRENT.set(trace)
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except BaseException as exc:
        status = _status_of(exc)
        raise
    finally:
        CURRENT.reset(token)
        tracing.finish(span, trace, status, request.get(REQUEST_ID), request.get(TOKENS_KEY))


def _status_of(exc: BaseException) -> int:
    """The status the access log records for a request that ended with `exc` (499: client gone)."""
    if isinstance(exc, web.HTTPException):
        return exc.status
    if isinstance(exc, (asyncio.CancelledError, ConnectionResetError)):
        return CLIENT_CLOSED
    return 500
