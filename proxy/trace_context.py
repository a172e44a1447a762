"""The trace context of the request being handled, and the hooks that report to its span.

A `RequestTrace` lives in a context variable for the length of a request (set by
`proxy.tracing.middleware`), so the code along the request's path reports to it without passing
it around, and engine requests carry the W3C trace context:

* `engine_headers()`: header lines for an engine request (proxy/engine/client.py);
* `engine_called()`, `first_token(url)`, `answered(url)`, `output_ended()`: proxy/engine/run.py;
* `queued(seconds)`: proxy/metrics.py (the pool reports its queue waits there);
* `derendered(seconds)`: proxy/streaming.py.

Each is one context-variable read when no request is traced. This module imports nothing of ours,
so every layer may use it; `proxy.tracing` makes the spans.
"""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from typing import Any

TRACEPARENT, TRACESTATE = "traceparent", "tracestate"
MAX_TRACESTATE_CHARS = 512  # W3C: at most 32 members, and vendors keep it short
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7e]*)?")


class RequestTrace:
    """What one request's span records, reported along the request's path (perf_counter seconds)."""

    __slots__ = ("engine_header_lines", "arrival", "engine_call", "first_token_at", "engine_done", "queue",
                 "derender", "engines")

    def __init__(self, engine_header_lines: bytes, arrival: float) -> None:
        self.engine_header_lines = engine_header_lines  # `traceparent: ...\r\n` for the engine requests
        self.arrival = arrival
        self.engine_call: float | None = None
        self.first_token_at: float | None = None
        self.engine_done: float | None = None
        self.queue = 0.0
        self.derender = 0.0
        self.engines: list[str] = []

    def engine(self, url: str) -> None:
        if url not in self.engines:
            self.engines.append(url)


CURRENT: ContextVar[RequestTrace | None] = ContextVar("derender_proxy_trace", default=None)


# -- the hooks along a request's path ------------------------------------------------------------

def engine_headers() -> bytes:
    """Header lines for an engine request made now: the trace context, or nothing."""
    trace = CURRENT.get()
    return trace.engine_header_lines if trace is not None else b""


def engine_called() -> None:
    trace = CURRENT.get()
    if trace is not None and trace.engine_call is None:
        trace.engine_call = time.perf_counter()


def first_token(engine_url: str) -> None:
    """An engine stream gave its first event."""
    trace = CURRENT.get()
    if trace is not None:
        if trace.first_token_at is None:
            trace.first_token_at = time.perf_counter()
        trace.engine(engine_url)


def answered(engine_url: str) -> None:
    """A non-streamed engine answer arrived whole."""
    trace = CURRENT.get()
    if trace is not None:
        now = time.perf_counter()
        if trace.first_token_at is None:
            trace.first_token_at = now
        trace.engine_done = now
        trace.engine(engine_url)


def output_ended() -> None:
    """An engine stream's output ended (its last event was read, or it was cut short on purpose)."""
    trace = CURRENT.get()
    if trace is not None:
        trace.engine_done = time.perf_counter()


def queued(seconds: float) -> None:
    trace = CURRENT.get()
    if trace is not None:
        trace.queue += seconds


def derendered(seconds: float) -> None:
    trace = CURRENT.get()
    if trace is not None:
        trace.derender += seconds


# -- the client's trace context -------------------------------------------------------------------

def client_context(headers: Any) -> bytes:
    """The client's `traceparent` (and `tracestate`) as header lines to pass on, when valid W3C
    trace context (anything else is dropped: it must never add headers of the client's choosing)."""
    parent = headers.get(TRACEPARENT)
    if parent is None:
        return b""
    parent = parent.strip()
    match = _TRACEPARENT.fullmatch(parent)
    if (match is None or match.group(1) == "ff" or (match.group(1) == "00" and match.group(5))
            or match.group(2) == "0" * 32 or match.group(3) == "0" * 16):
        return b""
    lines = f"{TRACEPARENT}: {parent}\r\n"
    state = headers.get(TRACESTATE)
    if state is not None:
        state = state.strip()
        if state and len(state) <= MAX_TRACESTATE_CHARS and state.isascii() and state.isprintable():
            lines += f"{TRACESTATE}: {state}\r\n"
    return lines.encode("ascii")
