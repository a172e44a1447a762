"""A server-sent-events decoder for engine streams, robust to how TCP cuts them.

vLLM writes `data: <json>\\n\\n` per event, but a network read can hold half an event, several
events, or an event split inside its `\\n\\n`. `SSEDecoder.feed` takes whatever bytes arrived and
returns the `data` payloads of the events completed so far, keeping the rest for the next read.
Per the SSE format, several `data:` lines in one event are joined with `\\n`, comment lines
(`:`) and other fields are ignored, and `\\r\\n` line endings are accepted.
"""

from __future__ import annotations

DONE = b"[DONE]"
# an engine event is a few hundred bytes (a few MB with huge logprobs); more without an end is broken
MAX_PENDING_BYTES = 64 * 1024 * 1024


class SSEError(ValueError):
    """The byte stream cannot be SSE (an event that never ends)."""


class SSEDecoder:
    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        hold = b""
        if buf.endswith(b"\r"):  # maybe half of a \r\n: decide on the next read
            buf, hold = buf[:-1], b"\r"
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            if len(buf) > MAX_PENDING_BYTES:
                raise SSEError(f"an event longer than {MAX_PENDING_BYTES} bytes")
            self._buf = buf + hold
            return []
        self._buf = buf[end + 2:] + hold
        return _events(buf[:end])

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated (a stream that ends here was cut)."""
        return self._buf


def _events(block: bytes) -> list[bytes]:
    out: list[bytes] = []
    for event in block.split(b"\n\n"):
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
    return out
