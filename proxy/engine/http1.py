"""An HTTP/1.1 response parser for engine connections: a pure state machine, no I/O (as h11).

The proxy's only HTTP peer on this side is a tokens-only engine (vLLM's uvicorn, our reference
engine), so the parser reads what such servers send: a status line, headers, then a body framed by
`Content-Length`, by `Transfer-Encoding: chunked` (every streamed generate) or by the connection's
end. `feed(data)` takes whatever bytes a read returned, however TCP cut them; `take_body()` hands out
the body bytes decoded so far. Interim `1xx` answers are skipped; `204`/`304` have no body.

Limits, with their precedents: a head (status line and headers) of at most 64 KiB (h11 refuses an
incomplete event over 16 KiB, aiohttp a header line over 8 KiB; 64 KiB leaves room for long
engine-side headers while a server that never ends its head is still caught), and a chunk-size line
of at most 1 KiB (real ones are a few hex digits plus optional extensions).
"""

from __future__ import annotations

MAX_HEAD_BYTES = 64 * 1024
MAX_CHUNK_LINE_BYTES = 1024
HEX_DIGITS = b"0123456789abcdefABCDEF"

# states
HEAD, LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS, UNTIL_CLOSE, DONE = range(8)


class ProtocolError(ValueError):
    """Bytes that are not an HTTP/1.1 response (the connection cannot be used any more)."""


class ResponseParser:
    """One response on a connection. `head_done` once the status and headers are in, `complete`
    once the whole body is; `keep_alive` says whether the connection may carry another request."""

    __slots__ = ("status", "reason", "headers", "keep_alive", "buffered", "_state", "_buf", "_body", "_left",
                 "_no_body")

    def __init__(self, *, no_body: bool = False) -> None:
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}  # lower-cased names; repeated ones joined with ", "
        self.keep_alive = True
        self._state = HEAD
        self._buf = b""  # bytes not parsed yet (a partial head or chunk line)
        self._body: list[bytes] = []
        self.buffered = 0  # bytes in the body pieces not taken yet
        self._left = 0  # bytes left in the Content-Length body or the current chunk
        self._no_body = no_body  # the answer to a HEAD request

    @property
    def head_done(self) -> bool:
        return self._state != HEAD

    @property
    def complete(self) -> bool:
        return self._state == DONE

    @property
    def has_body(self) -> bool:
        return bool(self._body)

    def take_body(self) -> bytes:
        """The body bytes decoded since the last call (b"" if none)."""
        body = self._body
        if not body:
            return b""
        self._body = []
        self.buffered = 0
        return body[0] if len(body) == 1 else b"".join(body)

    def feed(self, data: bytes) -> None:
        """Parse these bytes; raises ProtocolError on anything that is not a valid response."""
        if self._buf:
            data, self._buf = self._buf + data, b""
        state = self._state
        while data:
            if state == CHUNK_SIZE:
                end = data.find(b"\r\n")
                if end > MAX_CHUNK_LINE_BYTES or (end < 0 and len(data) > MAX_CHUNK_LINE_BYTES + 1):
                    raise ProtocolError("chunk size line too long")  # (+1: its CR may be in already)
                if end < 0:
                    self._buf = data
                    break
                size = _chunk_size(data[:end])
                data = data[end + 2:]
                if size == 0:
                    state = TRAILERS
                    continue
                self._left, state = size, CHUNK_DATA
                if len(data) >= size + 2 and data[size:size + 2] == b"\r\n":  # the whole chunk: the usual case
                    self._body.append(data[:size])
                    self.buffered += size
                    data, state = data[size + 2:], CHUNK_SIZE
            elif state == CHUNK_DATA:
                data = self._body_part(data)
                if not self._left:
                    state = CHUNK_END
            elif state == CHUNK_END:
                if len(data) < 2:
                    if data != b"\r":
                        raise ProtocolError("chunk not followed by CRLF")
                    self._buf = data
                    break
                if data[:2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                data, state = data[2:], CHUNK_SIZE
            elif state == LENGTH:
                data = self._body_part(data)
                if not self._left:
                    state = DONE
            elif state == UNTIL_CLOSE:
                self._body.append(data)
                self.buffered += len(data)
                data = b""
            elif state == HEAD:
                end = data.find(b"\r\n\r\n")
                if end > MAX_HEAD_BYTES or (end < 0 and len(data) > MAX_HEAD_BYTES + 3):
                    raise ProtocolError("response head too long")  # (+3: part of its blank line may be in)
                if end < 0:
                    self._buf = data
                    break
                head, data = data[:end], data[end + 4:]
                state = self._parse_head(head)
            elif state == TRAILERS:
                if data.startswith(b"\r\n"):  # no trailers (always, from the engines we talk to)
                    data, state = data[2:], DONE
                    continue
                end = data.find(b"\r\n\r\n")
                if end > MAX_HEAD_BYTES or (end < 0 and len(data) > MAX_HEAD_BYTES + 3):
                    raise ProtocolError("trailers too long")
                if end < 0:
                    self._buf = data
                    break
                data, state = data[end + 4:], DONE
            else:  # DONE: bytes after the response (a server answering twice)
                self._state = state
                raise ProtocolError("data after the end of the response")
        self._state = state

    def _body_part(self, data: bytes) -> bytes:
        """Take the body bytes of `data` (at most the `_left` still due); returns the rest."""
        part = data[:self._left]
        self._body.append(part)
        self.buffered += len(part)
        self._left -= len(part)
        return data[len(part):]

    def feed_eof(self) -> None:
        """The connection ended: completes a body read until close; otherwise, if the response is
        not complete, it was cut (ProtocolError)."""
        if self._state == UNTIL_CLOSE:
            self._state = DONE
            self.keep_alive = False
        elif self._state != DONE:
            raise ProtocolError("connection closed before the response ended")

    def _parse_head(self, head: bytes) -> int:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or len(parts[1]) != 3 \
                or not parts[1].isdigit() or parts[1] < b"100":
            raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:100]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip() or b" " in name:
                raise ProtocolError(f"invalid header line: {line[:100]!r}")
            key = name.decode("latin-1").lower()
            text = value.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        if 100 <= status < 200:  # interim (100 Continue...): the real answer follows
            return HEAD
        self.status, self.headers = status, headers
        self.reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
        connection = _tokens(headers.get("connection"))
        self.keep_alive = (parts[0] == b"HTTP/1.1" and "close" not in connection) or "keep-alive" in connection
        if self._no_body or status in (204, 304):
            return DONE
        if "chunked" in _tokens(headers.get("transfer-encoding")):
            return CHUNK_SIZE
        length = headers.get("content-length")
        if length is None:
            self.keep_alive = False  # the body ends with the connection
            return UNTIL_CLOSE
        if not (length.isascii() and length.isdigit()):  # "²".isdigit() is True
            raise ProtocolError(f"invalid Content-Length: {length[:50]!r}")
        self._left = int(length)
        return LENGTH if self._left else DONE


def _tokens(value: str | None) -> list[str]:
    """A comma-separated header's tokens, lower-cased ("keep-alive, Upgrade" -> ["keep-alive", "upgrade"])."""
    return [t.strip().lower() for t in value.split(",")] if value else []


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()  # chunk extensions are ignored, as RFC 9112 allows
    if not size or len(size) > 16 or size.strip(HEX_DIGITS):  # int() would take "0x1", "+1", "1_0"
        raise ProtocolError(f"invalid chunk size line: {line[:50]!r}")
    return int(size, 16)
