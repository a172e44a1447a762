"""Kept-alive HTTP/1.1 connections to the engines: asyncio protocols around `http1.ResponseParser`.

Why not aiohttp's client: the engine request sits on every request's path to its first token, and
its first event on the way back. Measured here (one process, alternating, same engine, 10 ms to
the first token), aiohttp's client put ~0.3 ms more on the time to first token than one write and
one read on a kept-alive socket, about 100 us of CPU per request; and each streamed event woke a
task through its StreamReader. What the engines need is small: `POST`/`GET` with a short JSON body,
answers framed by Content-Length or chunked, kept-alive connections, TLS for `https` engines. This
module does exactly that: one `transport.write` per request, and a reader woken straight from
`data_received`.

`HTTPClient` bounds the open connections (`--engine-max-connections`) over all engines, hands out
the most recently used idle connection of an origin first (the least likely to be closing) and
closes idle ones after `keepalive_timeout` (below uvicorn's 5 s default, so a request rarely lands
on a connection the engine is closing; when one does, `Disconnected` says the request may be sent
again).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from urllib.parse import quote, urlsplit

from proxy.engine.http1 import ProtocolError, ResponseParser

# a reader that falls behind (a slow client downstream) stops reading the engine past this much
# buffered body, as aiohttp's StreamReader does at its high-water mark, so memory stays bounded
PAUSE_READING_BYTES = 256 * 1024


class ClientError(Exception):
    """Base of the errors below."""


class ConnectFailed(ClientError):
    """No connection could be made (refused, unreachable, DNS, TLS)."""


class Disconnected(ClientError):
    """The connection closed before any byte of the answer: typically a kept-alive connection the
    server closed as we reused it; the request may be sent again."""


class ConnectionBroken(ClientError):
    """The connection ended in the middle of an answer."""


class BodyTooLarge(ClientError):
    """A body longer than the reader allowed (`Response.read(max_bytes=)`); the connection is dropped."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"body longer than {limit} bytes")
        self.limit = limit


class BadResponse(ClientError):
    """The server's bytes are not an HTTP/1.1 response."""


class Origin:
    """Where an engine listens, parsed once: the pool key, what to connect to, the Host header."""

    __slots__ = ("scheme", "host", "port", "key", "host_header", "ssl", "base_path")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        # what would otherwise be dropped without a word: say so at start-up
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"credentials in the URL are not sent: {url!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"a query or fragment in a base URL has no meaning: {url!r}")
        if parts.port == 0:
            raise ValueError(f"port 0 in {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname if parts.hostname.isascii() else parts.hostname.encode("idna").decode("ascii")
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.key = (self.scheme, self.host, self.port)
        default_port = parts.port is None or parts.port == (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        # the request line is ASCII: a path given in other characters is sent percent-encoded
        self.base_path = quote(parts.path.rstrip("/"), safe="/%:@!$&'()*+,;=-._~")


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; carries one request at a time."""

    def __init__(self, client: HTTPClient, origin: Origin) -> None:
        self.client = client
        self.origin = origin
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser: ResponseParser | None = None
        self.received = False  # any byte of the current answer arrived
        self.failure: ClientError | None = None
        self.closed = False
        self.paused = False
        self.waiter: asyncio.Future | None = None
        self.idle_timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        parser = self.parser
        if parser is None:  # bytes nobody asked for, on an idle connection: it cannot be trusted
            self.close()
            return
        self.received = True
        try:
            parser.feed(data)
        except ProtocolError as exc:
            self.failure = BadResponse(str(exc))
            self.close()
        else:
            if parser.buffered > PAUSE_READING_BYTES and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        return False  # close our side too: the connection is done

    def connection_lost(self, exc: BaseException | None) -> None:
        parser = self.parser
        if parser is not None and not parser.complete and self.failure is None:
            try:
                parser.feed_eof()
            except ProtocolError:
                self.failure = ConnectionBroken(str(exc or "connection closed")) if self.received else \
                    Disconnected(str(exc or "connection closed before the answer"))
        self._gone()
        self._wake()

    # -- used by HTTPClient and Response -------------------------------------------------------
    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Until more of the answer arrived, the connection ended, or `timeout` (TimeoutError)."""
        waiter = self.waiter = self.loop.create_future()
        timer = self.loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    def resume(self) -> None:
        """The reader took the buffered body: read the socket again if it was paused."""
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()  # connection_lost follows, on a later loop iteration
        self._gone()
        # a reader waiting on this connection learns now, not at connection_lost: over TLS that
        # comes after the TLS shutdown, which a hung peer can stretch to its 30 s timeout
        self._wake()

    def _gone(self) -> None:
        if not self.closed:
            self.closed = True
            if self.idle_timer is not None:
                self.idle_timer.cancel()
            self.client._forget(self)


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class Response:
    """An answer whose status and headers are in; the body is read with `readany`/`read`."""

    __slots__ = ("status", "headers", "_conn", "_parser", "_done")

    def __init__(self, conn: Connection, parser: ResponseParser) -> None:
        self.status = parser.status
        self.headers = parser.headers
        self._conn = conn
        self._parser = parser
        self._done = False

    async def readany(self, timeout: float | None = None) -> bytes:
        """The body bytes that arrived since the last read (waiting for some if none did), or b""
        at the end of the body. A connection cut before the end raises ConnectionBroken; no byte
        for `timeout` seconds raises TimeoutError."""
        parser, conn = self._parser, self._conn
        while True:
            if parser.has_body:
                data = parser.take_body()
                if conn.paused:
                    conn.resume()
                return data
            if parser.complete:
                return b""
            if conn.failure is not None:
                raise conn.failure
            if conn.closed:
                raise ConnectionBroken("connection closed")
            await conn.wait(timeout)

    def at_eof(self) -> bool:
        return self._parser.complete and not self._parser.has_body

    async def read(self, timeout: float | None = None, max_bytes: int | None = None) -> bytes:
        """The rest of the body (each wait for more bounded by `timeout`), then `release()`; more
        than `max_bytes` raises BodyTooLarge as soon as they arrived (and drops the connection)."""
        parts = []
        size = 0
        try:
            while data := await self.readany(timeout):
                size += len(data)
                if max_bytes is not None and size > max_bytes:
                    raise BodyTooLarge(max_bytes)
                parts.append(data)
        finally:
            self.release()  # on a timeout or a cancellation too: the connection is then closed
        return b"".join(parts)

    def release(self) -> None:
        """Give the connection back (body read to its end) or close it (anything else)."""
        if self._done:
            return
        self._done = True
        conn = self._conn
        if self.at_eof() and self._parser.keep_alive and not conn.closed and conn.failure is None:
            conn.client._put_back(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Drop the connection (the server sees the request's client go away)."""
        if not self._done:
            self._done = True
            self._conn.close()


class HTTPClient:
    """A bounded set of kept-alive connections, shared by every engine."""

    def __init__(self, *, limit: int = 1024, keepalive_timeout: float = 4.0) -> None:
        self.limit = limit
        self.keepalive_timeout = keepalive_timeout
        self.open = 0  # connections open or being opened
        self._idle: dict[tuple, list[Connection]] = {}
        self._slot_waiters: deque[asyncio.Future] = deque()
        self._closed = False

    async def request(self, origin: Origin, method: str, path: str, *, body: bytes = b"",
                      headers: bytes = b"", connect_timeout: float | None = None,
                      read_timeout: float | None = None) -> Response:
        """Send one request (in one write) and wait for the answer's head. `headers` are extra
        header lines, each ending with CRLF (encoded once by the caller: they rarely change)."""
        # made before a connection is taken, so that a head that cannot be encoded holds none
        head = (f"{method} {origin.base_path}{path} HTTP/1.1\r\nHost: {origin.host_header}\r\n"
                f"Content-Length: {len(body)}\r\n").encode("latin-1")
        conn = await self._acquire(origin, connect_timeout)
        parser = ResponseParser(no_body=method == "HEAD")
        conn.parser, conn.received, conn.failure = parser, False, None
        assert conn.transport is not None
        conn.transport.write(head + headers + b"\r\n" + body)
        try:
            while not parser.head_done:
                if conn.failure is not None:
                    raise conn.failure
                if conn.closed:
                    raise Disconnected("connection closed before the answer")
                await conn.wait(read_timeout)
        except BaseException:
            conn.close()
            raise
        return Response(conn, parser)

    async def close(self) -> None:
        """Close the idle connections and fail the requests waiting for one (ConnectFailed); the
        connections in use close as their answers end."""
        self._closed = True
        for conns in self._idle.values():
            for conn in list(conns):
                conn.close()
        self._idle.clear()
        while self._slot_waiters:
            self._wake_slot_waiter()  # each sees the client closed
        await asyncio.sleep(0)  # let the transports finish closing

    # -- connection accounting -----------------------------------------------------------------
    async def _acquire(self, origin: Origin, connect_timeout: float | None) -> Connection:
        waited = False  # a request that waited goes back to the head of the line, never the tail
        while True:
            if self._closed:
                raise ConnectFailed("the engine client is closed")
            if waited or not self._slot_waiters:  # a newcomer does not pass requests already waiting
                conn = self._idle_connection(origin)
                if conn is not None:
                    return conn
                if self.open < self.limit:
                    break
                if self._close_one_idle():  # an idle connection to another engine makes room
                    continue
            elif self.open < self.limit or any(self._idle.values()):
                self._wake_slot_waiter()  # there is room: the first in line takes it, we queue behind
            waiter = asyncio.get_running_loop().create_future()
            if waited:
                self._slot_waiters.appendleft(waiter)
            else:
                self._slot_waiters.append(waiter)
            waited = True
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_slot_waiter()  # pass on the slot we were given
                elif waiter in self._slot_waiters:
                    self._slot_waiters.remove(waiter)
                raise
        self.open += 1
        loop = asyncio.get_running_loop()
        conn = Connection(self, origin)
        try:
            async with asyncio.timeout(connect_timeout):
                await loop.create_connection(lambda: conn, origin.host, origin.port, ssl=origin.ssl)
        except BaseException as exc:
            conn.close()  # frees the slot
            if isinstance(exc, TimeoutError):
                raise ConnectFailed(f"connect to {origin.host}:{origin.port} timed out") from None
            if isinstance(exc, OSError):  # refused, unreachable, DNS (socket.gaierror), TLS (ssl.SSLError)
                raise ConnectFailed(str(exc) or type(exc).__name__) from None
            raise
        return conn

    def _idle_connection(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin.key)
        while idle:
            conn = idle.pop()  # the most recently used
            if conn.idle_timer is not None:
                conn.idle_timer.cancel()
                conn.idle_timer = None
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            conn.close()
        return None

    def _put_back(self, conn: Connection) -> None:
        if self._closed:
            conn.close()
            return
        conn.parser = None
        self._idle.setdefault(conn.origin.key, []).append(conn)
        conn.idle_timer = conn.loop.call_later(self.keepalive_timeout, conn.close)
        if self._slot_waiters:  # someone waits for a slot: it may want this very origin
            self._wake_slot_waiter()

    def _forget(self, conn: Connection) -> None:
        """A connection closed: its slot is free (called once per connection)."""
        idle = self._idle.get(conn.origin.key)
        if idle and conn in idle:
            idle.remove(conn)
        self.open -= 1
        self._wake_slot_waiter()

    def _close_one_idle(self) -> bool:
        for conns in self._idle.values():
            if conns:
                conns.pop(0).close()  # the least recently used
                return True
        return False

    def _wake_slot_waiter(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
