"""Server-sent events: the framing every streamed API shares, and the writers' contract.

The proxy has one SSE loop for every streamed API (`proxy.streaming`). It asks a `StreamWriter`
for the bytes to send: `head()` before the first token (made while the engine computes it, so it
costs nothing on the way to the first token), `feed(prompt, events)` per batch of engine
events of one prompt, and `close(error)` for the last events. A writer owns the request's
`DerenderSession`, which says what to abort; everything a writer does is sans-IO.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from core.derender.session import DerenderSession
from core.errors import RequestError, error_json

DONE = b"data: [DONE]\n\n"


def data_event(payload: dict[str, Any]) -> bytes:
    """An unnamed event (`data: {...}`), OpenAI's chat and completion streams."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


_EVENT_PREFIXES: dict[str, bytes] = {}


def named_event(name: str, payload: dict[str, Any]) -> bytes:
    """A named event (`event: NAME` + data), the Responses and Messages streams."""
    prefix = _EVENT_PREFIXES.get(name)
    if prefix is None:  # a handful of names per API: encoded once
        prefix = _EVENT_PREFIXES[name] = b"event: " + name.encode() + b"\ndata: "
    return prefix + orjson.dumps(payload) + b"\n\n"


def openai_error_event(error: RequestError) -> bytes:
    """How an OpenAI stream that already started says it failed: an error object, then [DONE]."""
    return b"data: " + error_json(error.message, error.type, error.status, error.param) + b"\n\n"


class Collector(Protocol):
    """What the non-streamed read (`proxy.streaming.collect`) feeds: a `DerenderSession` (vLLM's
    non-streaming parse at the end) or an adapter that aggregates the session's streamed events
    (the Messages API: its non-streamed message is exactly what its stream adds up to)."""

    def collect(self, prompt: int, events: list[dict[str, Any]]) -> None:
        """Engine events (or a whole answer) of one prompt."""

    def to_abort(self) -> list[int]:
        """Prompts whose engine requests should be aborted now (each named once)."""


class StreamWriter(Protocol):
    session: DerenderSession

    def head(self) -> list[bytes]:
        """Events before the first engine token."""

    def feed(self, prompt: int, batch: list[dict[str, Any]]) -> list[bytes]:
        """Events for a batch of one prompt's engine events (may raise EngineOutputError)."""

    def close(self, error: RequestError | None) -> list[bytes]:
        """The last events: after success, or the error that ended the stream."""

# A writer may also have `ping_interval` (seconds, or None) and `ping() -> bytes`: the loop then
# sends that event whenever the stream has been silent that long (Anthropic's `ping`).
