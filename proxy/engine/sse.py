"""A server-sent-events decoder for engine streams, robust to how TCP cuts them.

vLLM writes `data: <json>\\n\\n` per event, but a network read can hold half an event, several
events, or an event split inside its `\\n\\n`. `SSEDecoder.feed` takes whatever bytes arrived and
returns the `data` payloads of the events completed so far, keeping the rest for the next read.
Per the SSE format, several `data:` lines in one event are joined with `\\n`, comment lines
(`:`) and other fields are ignored, and `\\r\\n` line endings are accepted.

The work is linear in the bytes received, however an event is cut: a read is searched for the
blank line that ends an event only in its own bytes (plus the one newline a previous read may
have ended with), and an unfinished event is kept as the list of reads that brought it, joined
once when it ends. (Re-joining and rescanning the whole unfinished event on every read made one
4 MB event cost 0.4 s of event loop, quadratically more for larger ones.)

An event longer than `max_event_bytes` is an error (`EventTooLarge`), raised as soon as the
unfinished event grows past it: the caller sizes the bound from what the request can produce
(its `max_tokens` times its choices, with slack; see `event_bytes_bound`), so an engine that
sends more never makes us buffer, join or parse it.
"""

from __future__ import annotations

DONE = b"[DONE]"
# an engine event is a few hundred bytes (a few MB with huge logprobs); more without an end is broken
MAX_PENDING_BYTES = 64 * 1024 * 1024
# what one generated token can take in an engine event: its id (up to 10 digits and a comma) and,
# with logprobs, one {"token_id","logprob","rank"} entry per candidate (~60 bytes each)
_BYTES_PER_TOKEN = 16
_BYTES_PER_LOGPROB = 80
_EVENT_SLACK_BYTES = 64 * 1024  # request id, usage, finish and stop reasons, routing fields


class SSEError(ValueError):
    """The byte stream cannot be SSE (an event that never ends)."""


class EventTooLarge(SSEError):
    """One event is longer than the decoder's bound (what the request can produce)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event longer than {limit} bytes")
        self.limit = limit


def event_bytes_bound(max_tokens: int, choices: int = 1, logprobs: int = 0) -> int:
    """A generous bound on one engine event of a request: every token it may generate (`max_tokens`
    for each of `choices`) in one event, each with `logprobs` candidates (plus the sampled one),
    and fixed slack; never above MAX_PENDING_BYTES."""
    per_token = _BYTES_PER_TOKEN + (_BYTES_PER_LOGPROB * (logprobs + 1) if logprobs else 0)
    return min(MAX_PENDING_BYTES, 2 * max(1, max_tokens) * max(1, choices) * per_token + _EVENT_SLACK_BYTES)


class SSEDecoder:
    __slots__ = ("_parts", "_size", "_cr", "max_event_bytes", "_error")

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._parts: list[bytes] = []  # the unfinished event, as the reads that brought it
        self._size = 0
        self._cr = False  # the last read ended with \r: maybe half of a \r\n, decided on the next read
        self.max_event_bytes = MAX_PENDING_BYTES if max_event_bytes is None else min(max_event_bytes,
                                                                                     MAX_PENDING_BYTES)
        self._error: EventTooLarge | None = None  # raised on the next feed: this one still had events

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads of the events this read completes. An event past the bound raises
        EventTooLarge, after the events before it in the same read were returned (the next call
        raises): what the engine sent before the bad event is never lost."""
        if self._error is not None:
            raise self._error
        out: list[bytes] = []
        try:
            self._feed(data, out)
        except EventTooLarge as exc:
            if not out:
                raise
            self._error = exc
        return out

    def _feed(self, data: bytes, out: list[bytes]) -> None:
        if self._cr:
            data = b"\r" + data  # a copy of this read only, never of the unfinished event
            self._cr = False
        if data.endswith(b"\r"):
            data, self._cr = data[:-1], True
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        if not data:
            return
        parts = self._parts
        start = 0
        if parts and data[0] == 0x0A and parts[-1].endswith(b"\n"):  # the blank line spans two reads
            block = b"".join(parts)[:-1]
            parts.clear()
            self._size = 0
            self._events(block, out)
            start = 1
        end = data.rfind(b"\n\n", start)
        if end < 0:  # no event ends in this read
            self._keep(data[start:] if start else data)
            return
        head = data[start:end]
        block = b"".join([*parts, head]) if parts else head
        parts.clear()
        self._size = 0
        self._events(block, out)
        self._keep(data[end + 2:])

    def _keep(self, piece: bytes) -> None:
        if not self._parts:
            piece = piece.lstrip(b"\n")  # blank lines between events mean nothing
        if not piece:
            return
        self._size += len(piece)
        if self._size > self.max_event_bytes:
            raise EventTooLarge(self.max_event_bytes)
        self._parts.append(piece)

    def _events(self, block: bytes, out: list[bytes]) -> None:
        """The data payloads of `block` (whole events separated by blank lines), onto `out`."""
        limit = self.max_event_bytes
        for event in block.split(b"\n\n"):
            if len(event) > limit:
                raise EventTooLarge(limit)
            if event.startswith(b"data: ") and b"\n" not in event:  # the common case, one line
                out.append(event[6:])
                continue
            data: list[bytes] = []
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    value = line[5:]
                    data.append(value[1:] if value.startswith(b" ") else value)
            if data:
                out.append(b"\n".join(data))

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated (a stream that ends here was cut)."""
        return b"".join(self._parts) + (b"\r" if self._cr else b"")
