"""--otlp-traces-endpoint over real HTTP: one span per request (the SDK's in-memory exporter and a
real OTLP/HTTP receiver started here), the client's W3C traceparent as its parent, and the span's
own context on the engine request (a reference engine that records the headers it gets)."""

from __future__ import annotations

import gzip
import json
import threading
import time
from typing import Any

import openai
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from proxy.app import create_app
from proxy.cli import build_parser
from proxy.config import ServerConfig, config_from_args
from proxy.reference_engine import create_reference_app
from proxy.tracing import otlp_traces_url, provider_of
from tests.proxy.frontdoor_stack import PARSERS, post_raw
from tests.proxy.loopback import LoopbackServer, free_port
from tests.proxy.serve_process import ServeProcess

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
CHAT_SPAN = "POST /v1/chat/completions"


class OtlpReceiver:
    """An OTLP/HTTP trace receiver (what an OpenTelemetry collector listens with on :4318)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []  # opentelemetry.proto Span messages
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self.server = LoopbackServer(self._app).start()
        self.url = self.server.url

    def _app(self) -> web.Application:
        async def export(request: web.Request) -> web.Response:
            body = await request.read()
            if request.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert request.content_type == "application/x-protobuf"
            message = ExportTraceServiceRequest.FromString(body)
            with self.lock:
                self.paths.append(request.path)
                for resource_spans in message.resource_spans:
                    for scope_spans in resource_spans.scope_spans:
                        self.spans.extend((resource_spans.resource, span) for span in scope_spans.spans)
            return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                                content_type="application/x-protobuf")

        app = web.Application()
        app.router.add_post("/v1/traces", export)
        return app

    def wait_for(self, name: str, timeout: float = 10.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [(r, s) for r, s in self.spans if s.name == name]
            if found:
                return found
            time.sleep(0.02)
        raise AssertionError(f"no span {name!r} received")

    def close(self) -> None:
        self.server.stop()


def recording_engine(model: Any, seen: list[dict[str, str]], **kwargs: Any) -> web.Application:
    """The reference engine, keeping the headers of each generate request it gets."""
    app = create_reference_app(model, **kwargs)

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/inference/v1/generate":
            seen.append({k.lower(): v for k, v in request.headers.items()})
        return await handler(request)

    app.middlewares.append(record)
    return app


class TracedStack:
    def __init__(self, model: Any, *, receiver: OtlpReceiver | None, token_delay_ms: float = 0.0,
                 **config: Any) -> None:
        self.engine_headers: list[dict[str, str]] = []
        self.engine = LoopbackServer(lambda: recording_engine(model, self.engine_headers,
                                                              token_delay_ms=token_delay_ms)).start()
        self.config = ServerConfig(engine_url=[self.engine.url], health_check_interval=0,
                                   otlp_traces_endpoint=receiver.url if receiver else None, **PARSERS, **config)
        self.proxy = LoopbackServer(lambda: create_app(self.config, model)).start()
        self.url = self.proxy.url
        self.memory = InMemorySpanExporter()
        provider = provider_of(self.proxy.app)
        if provider is not None:
            provider.add_span_processor(SimpleSpanProcessor(self.memory))

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0)

    def spans(self, name: str = CHAT_SPAN) -> list[Any]:
        return [s for s in self.memory.get_finished_spans() if s.name == name]

    def close(self) -> None:
        self.proxy.stop()  # (its cleanup flushes the spans still queued for the collector)
        self.engine.stop()


@pytest.fixture
def receiver():
    receiver = OtlpReceiver()
    yield receiver
    receiver.close()


def parse_traceparent(value: str) -> tuple[str, str, str, str]:
    version, trace_id, span_id, flags = value.split("-")
    return version, trace_id, span_id, flags


def test_a_streamed_chat_is_one_span_under_the_clients_trace(qwen3, receiver):
    stack = TracedStack(qwen3, receiver=receiver)
    try:
        stream = stack.client().chat.completions.create(
            model="tiny-qwen3", messages=[{"role": "user", "content": "hello"}], stream=True,
            stream_options={"include_usage": True},
            extra_headers={"traceparent": TRACEPARENT, "tracestate": "vendor=abc", "X-Request-Id": "trace-me"})
        chunks = list(stream)
        usage = chunks[-1].usage
        (span,) = stack.spans()
        context = span.get_span_context()
        # the client's trace, the client's span as the parent, a server span
        assert f"{context.trace_id:032x}" == TRACE_ID
        assert f"{span.parent.span_id:016x}" == CLIENT_SPAN and span.parent.is_remote
        assert span.kind == SpanKind.SERVER and span.status.status_code != StatusCode.ERROR
        a = span.attributes
        assert a["http.route"] == "/v1/chat/completions" and a["http.request.method"] == "POST"
        assert a["http.response.status_code"] == 200 and a["gen_ai.request.id"] == "trace-me"
        assert (a["gen_ai.usage.prompt_tokens"], a["gen_ai.usage.completion_tokens"]) == (
            usage.prompt_tokens, usage.completion_tokens)
        assert list(a["derender_proxy.engines"]) == [stack.engine.url]
        # the timings tell one story: render, then the engine (its first token, its end), all within e2e
        render, ttft, engine = (a["derender_proxy.latency.render"], a["gen_ai.latency.time_to_first_token"],
                                a["derender_proxy.latency.engine"])
        assert 0 <= render <= ttft <= a["gen_ai.latency.e2e"]
        assert 0 <= engine and render + engine <= a["gen_ai.latency.e2e"]
        assert a["gen_ai.latency.time_in_queue"] == 0  # no --engine-max-concurrency: never queued
        assert 0 < a["derender_proxy.latency.derender"] <= a["gen_ai.latency.e2e"]
        events = [(e.name, e.timestamp) for e in span.events]
        assert [name for name, _ in events] == ["engine.request", "engine.first_token", "engine.done"]
        assert span.start_time <= events[0][1] <= events[1][1] <= events[2][1] <= span.end_time
        # the engine request carries this span's context (and the client's tracestate)
        (headers,) = stack.engine_headers
        version, trace_id, parent_id, flags = parse_traceparent(headers["traceparent"])
        assert (version, trace_id, parent_id, flags) == ("00", TRACE_ID, f"{context.span_id:016x}", "01")
        assert headers["tracestate"] == "vendor=abc"
        # and the same span reached the collector over OTLP/HTTP
        assert provider_of(stack.proxy.app).force_flush(10_000)
        ((resource, sent),) = receiver.wait_for(CHAT_SPAN)
        assert receiver.paths[0] == "/v1/traces"  # added to the endpoint, which had no path
        assert (sent.trace_id.hex(), sent.span_id.hex(), sent.parent_span_id.hex()) == (
            TRACE_ID, f"{context.span_id:016x}", CLIENT_SPAN)
        sent_attributes = {kv.key: kv.value for kv in sent.attributes}
        assert sent_attributes["gen_ai.request.id"].string_value == "trace-me"
        assert sent_attributes["gen_ai.usage.completion_tokens"].int_value == usage.completion_tokens
        service = {kv.key: kv.value.string_value for kv in resource.attributes}["service.name"]
        assert service == "derender-proxy"
    finally:
        stack.close()


def test_without_a_client_trace_each_request_starts_one(qwen3, receiver):
    stack = TracedStack(qwen3, receiver=receiver)
    try:
        client = stack.client()
        answer = client.completions.create(model="tiny-qwen3", prompt="one", max_tokens=4)
        client.completions.create(model="tiny-qwen3", prompt="two", max_tokens=4)
        spans = stack.spans("POST /v1/completions")
        assert len(spans) == 2 and all(span.parent is None for span in spans)
        assert len({span.context.trace_id for span in spans}) == 2
        first = spans[0].attributes
        assert first["gen_ai.usage.completion_tokens"] == answer.usage.completion_tokens
        assert 0 <= first["derender_proxy.latency.render"] <= first["gen_ai.latency.time_to_first_token"]
        for span, headers in zip(spans, stack.engine_headers):
            _, trace_id, parent_id, _ = parse_traceparent(headers["traceparent"])
            assert (trace_id, parent_id) == (f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")
        # routes without an engine have their span too, without engine timings
        assert client.models.list().data
        (models_span,) = stack.spans("GET /v1/models")
        assert "derender_proxy.latency.render" not in models_span.attributes
    finally:
        stack.close()


def test_time_waiting_for_an_engine_slot_is_in_the_span(qwen3, receiver):
    stack = TracedStack(qwen3, receiver=receiver, token_delay_ms=20, engine_max_concurrency=1)
    try:
        def ask() -> None:
            stack.client().completions.create(model="tiny-qwen3", prompt="hi", max_tokens=6)

        threads = [threading.Thread(target=ask) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        queued = sorted(span.attributes["gen_ai.latency.time_in_queue"] for span in stack.spans("POST /v1/completions"))
        assert len(queued) == 2
        assert queued[1] > 0  # one of the two waited for the other's slot
        for span in stack.spans("POST /v1/completions"):
            a = span.attributes
            assert a["gen_ai.latency.time_in_queue"] <= a["derender_proxy.latency.engine"]
    finally:
        stack.close()


def test_a_failed_request_is_an_error_span(qwen3, receiver):
    stack = TracedStack(qwen3, receiver=receiver)
    try:
        stack.engine.stop()
        status, _, _ = post_raw(stack.url + "/v1/chat/completions", {
            "model": "tiny-qwen3", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 503
        (span,) = stack.spans()
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["http.response.status_code"] == 503
        assert "gen_ai.latency.time_to_first_token" not in span.attributes
    finally:
        stack.close()


def test_tracing_off_passes_a_valid_client_trace_to_the_engine_unchanged(qwen3):
    stack = TracedStack(qwen3, receiver=None)
    try:
        assert provider_of(stack.proxy.app) is None
        client = stack.client()
        future_version = f"01-{TRACE_ID}-{CLIENT_SPAN}-00-more"  # W3C: later versions may append fields
        cases = [
            ({"traceparent": TRACEPARENT, "tracestate": "a=1,b=2"}, {"traceparent": TRACEPARENT,
                                                                      "tracestate": "a=1,b=2"}),
            ({"traceparent": future_version}, {"traceparent": future_version}),
            ({}, {}),
            ({"traceparent": "00-xyz-1-01"}, {}),  # not W3C: dropped, never passed on
            ({"traceparent": f"00-{'0' * 32}-{CLIENT_SPAN}-01"}, {}),  # an all-zero trace id is invalid
            ({"traceparent": f"ff-{TRACE_ID}-{CLIENT_SPAN}-01"}, {}),  # version ff is forbidden
            ({"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01-extra"}, {}),  # version 00 has 4 fields
        ]
        for sent, expected in cases:
            client.completions.create(model="tiny-qwen3", prompt="hi", max_tokens=2, extra_headers=sent)
            got = stack.engine_headers[-1]
            assert {k: got[k] for k in ("traceparent", "tracestate") if k in got} == expected, sent
    finally:
        stack.close()


@pytest.mark.parametrize("endpoint,expected", [
    ("http://collector:4318", "http://collector:4318/v1/traces"),
    ("http://collector:4318/", "http://collector:4318/v1/traces"),
    ("https://otel.example/custom/path", "https://otel.example/custom/path"),
])
def test_endpoint_urls(endpoint, expected):
    assert otlp_traces_url(endpoint) == expected


def test_unusable_endpoints_and_protocols_fail_at_start_up(qwen3, monkeypatch):
    args = build_parser().parse_args(["serve", "--otlp-traces-endpoint", "grpc://collector:4317"])
    config = config_from_args(args)
    assert config.otlp_traces_endpoint == "grpc://collector:4317"
    with pytest.raises(ValueError, match="OTLP/HTTP collector URL"):
        create_app(config, qwen3)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    with pytest.raises(ValueError, match="over OTLP/HTTP only"):
        create_app(ServerConfig(otlp_traces_endpoint="http://collector:4318"), qwen3)


@pytest.mark.slow
def test_derender_proxy_serve_exports_spans(tmp_path, receiver):
    engine = ServeProcess(tmp_path=tmp_path, subcommand="reference-engine").start()
    proxy = ServeProcess("--engine-url", engine.url, "--otlp-traces-endpoint", receiver.url,
                         "--health-check-interval", "0", tmp_path=tmp_path, port=free_port(),
                         env={"OTEL_SERVICE_NAME": "proxy-under-test", "OTEL_BSP_SCHEDULE_DELAY": "100"})
    try:
        proxy.start()
        status, _, body = post_raw(proxy.url + "/v1/completions", {"model": "Qwen/Qwen3-0.6B", "prompt": "hi",
                                                                   "max_tokens": 3})
        assert status == 200
        ((resource, span),) = receiver.wait_for("POST /v1/completions")
        attributes = {kv.key: kv.value for kv in span.attributes}
        assert attributes["gen_ai.usage.completion_tokens"].int_value == json.loads(body)["usage"]["completion_tokens"]
        assert {kv.key: kv.value.string_value for kv in resource.attributes}["service.name"] == "proxy-under-test"
    finally:
        proxy.stop()
        engine.stop()
    assert proxy.proc.returncode == 0
