"""One tokens-only engine over HTTP: generate (streaming and not), abort, health.

All engines share one `HTTPClient` (kept-alive connections, at most `--engine-max-connections`,
created at app start-up; `connections.py` says why it is not aiohttp's client). Failures become
`EngineError`s that carry what the caller needs: the status and OpenAI error body to give the
client, whether any token had arrived (only failures before the first token may be retried on
another engine) and a metrics `kind`.

Aborting an engine request does both things vLLM reacts to: it closes the stream (the engine's
handler sees the disconnect) and posts `{"request_ids": ["generate-tokens-<id>"]}` to
`/inference/v1/abort_requests` (in the background; the abort must never delay the client).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.engine.circuit import OPEN, Circuit
from proxy.trace_context import engine_headers
from proxy.engine.connections import (BodyTooLarge, ClientError, ConnectFailed, Disconnected, HTTPClient,
                                      Origin, Response)
from proxy.engine.sse import DONE, EventTooLarge, SSEDecoder, SSEError

log = logging.getLogger("derender_proxy.engine")

ENGINE_ID_PREFIX = "generate-tokens-"
ABORT_TIMEOUT = 5.0
STREAM_CUT_MESSAGE = "The inference engine closed the stream before it finished."
# error bodies and the answers to abort and health requests: a few hundred bytes, never read past this
MAX_CONTROL_BODY_BYTES = 1024 * 1024
MAX_RETRY_AFTER = 3600  # seconds: an engine's Retry-After passed on, at most this


@dataclass(frozen=True)
class EngineTimeouts:
    connect: float = 5.0
    first_token: float = 600.0
    idle: float = 120.0


class EngineError(Exception):
    """An engine call that failed; `status`/`type`/`message` are what the client gets."""

    def __init__(self, message: str, status: int, type: str, *, kind: str, started: bool = False,
                 retryable: bool = False, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        # connect | disconnect | status | stream | timeout; from the pool itself (no engine was
        # called): unavailable (every engine's circuit is open) | busy (no free slot in time)
        self.kind = kind
        self.started = started  # tokens had already been received
        self.retryable = retryable and not started
        self.retry_after = retry_after  # seconds, for a Retry-After header (pool rejections)


def unreachable(url: str, exc: BaseException) -> EngineError:
    log.warning("engine %s unreachable: %s", url, exc)
    return EngineError("The inference engine is unavailable (connection failed).", 503,
                       "ServiceUnavailableError", kind="connect", retryable=True)


def retry_after_seconds(value: str | None, now: float | None = None) -> int | None:
    """A Retry-After header (seconds, or an HTTP date) as whole seconds from now, at most an hour;
    None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = int(value[:6])
    else:
        import email.utils
        import time

        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = int(when.timestamp() - (time.time() if now is None else now) + 0.999)
    return min(max(seconds, 0), MAX_RETRY_AFTER)


def engine_status_error(status: int, body: bytes, location: str | None = None,
                        retry_after: str | None = None) -> EngineError:
    """An engine's error answer, passed on: its message and, for 4xx, its status and type (a 429
    keeps its Retry-After, in seconds)."""
    if status < 400:  # a redirect (or any other non-error) where an answer was due: a wrong --engine-url
        where = f" to {location}" if location else ""
        return EngineError(f"The inference engine answered HTTP {status}{where} instead of generating; "
                           "check --engine-url.", 502, "BadGatewayError", kind="status")
    message, etype = None, None
    try:
        err = orjson.loads(body).get("error")
        if isinstance(err, dict):
            message, etype = err.get("message"), err.get("type")
        elif isinstance(err, str):
            message = err
    except (orjson.JSONDecodeError, AttributeError):
        pass
    if message is None:
        message = body[:500].decode("utf-8", "replace") or f"engine answered HTTP {status}"
    if status == 429:  # the engine is saturated: the client may retry (the type the openai client expects)
        return EngineError(str(message), 429, "RateLimitError", kind="status",
                           retry_after=retry_after_seconds(retry_after))
    if status < 500:
        return EngineError(str(message), status, str(etype or "BadRequestError"), kind="status")
    if status == 503:
        return EngineError(str(message), 503, "ServiceUnavailableError", kind="status", retryable=True)
    return EngineError(f"The inference engine failed: {message}", 502, "BadGatewayError", kind="status",
                       retryable=True)


INVALID_RESPONSE_MESSAGE = "The inference engine sent an invalid response."


def invalid_response(started: bool = False) -> EngineError:
    """Engine output that is not what the tokens-only protocol says (not JSON, not an object, bad fields)."""
    return EngineError(INVALID_RESPONSE_MESSAGE, 502, "BadGatewayError", kind="stream", started=started)


def oversized_output(url: str, limit: int, started: bool = False) -> EngineError:
    """An engine answer or event larger than the request can produce: not read any further (the
    engine request is aborted); the URL goes to our log, not to the client."""
    log.warning("engine %s sent more than %d bytes in one answer or event: stream cut", url, limit)
    return EngineError(f"The inference engine sent more output than the request allows (over {limit} bytes in "
                       "one answer or event).", 502, "BadGatewayError", kind="stream", started=started)


def stream_error_event(payload: dict[str, Any]) -> EngineError:
    """A `data: {"error": ...}` event from the engine, after the stream started."""
    err = payload.get("error")
    message = err.get("message") if isinstance(err, dict) else str(err)
    code = err.get("code") if isinstance(err, dict) else None
    etype = err.get("type") if isinstance(err, dict) else None
    return EngineError(str(message or "engine stream error"), code if isinstance(code, int) else 500,
                       str(etype or "InternalServerError"), kind="stream", started=True)


class Engine:
    """One engine base URL, with its load and health as the pool sees them."""

    def __init__(self, url: str, http: HTTPClient | None, *, api_key: str | None = None,
                 timeouts: EngineTimeouts = EngineTimeouts(), circuit: Circuit | None = None) -> None:
        self.url = url.rstrip("/")
        try:
            self.origin = Origin(self.url)
        except (ValueError, UnicodeError) as exc:  # (UnicodeError: a host name IDNA cannot encode)
            raise ValueError(f"--engine-url {url!r}: expected http(s)://HOST:PORT[/PATH] ({exc})") from None
        self.http: HTTPClient = http  # type: ignore[assignment]  # attached at start-up
        self.timeouts = timeouts
        # header lines sent with every request, encoded once
        self.headers = b"Content-Type: application/json\r\n"
        if api_key:
            if not (api_key.isascii() and api_key.isprintable()):
                raise ValueError("--engine-api-key: printable ASCII characters only")
            self.headers += f"Authorization: Bearer {api_key}\r\n".encode("ascii")
        self.outstanding = 0
        self.circuit = circuit or Circuit()
        self._background: set[asyncio.Task] = set()

    @property
    def healthy(self) -> bool:
        """Not open: the pool sends it requests (closed, or half-open for one probe)."""
        return self.circuit.state != OPEN

    def __repr__(self) -> str:
        return f"Engine({self.url}, outstanding={self.outstanding}, circuit={self.circuit.state})"

    async def _post(self, path: str, body: bytes, request_id: str | None, timeout: float | None) -> Response:
        headers = self.headers
        if request_id is not None and request_id.isascii() and request_id.isprintable():
            # vLLM names the engine request after this header when present, else after the body's
            # request_id: an id the header cannot carry as is (a JSON string may hold CR/LF, which
            # would add headers of the client's choosing, or non-ASCII) is left to the body, so the
            # engine's id is always the one our aborts name
            headers += f"X-Request-Id: {request_id}\r\n".encode("ascii")
        headers += engine_headers()  # the W3C trace context (proxy/tracing.py), when there is one
        try:
            return await self.http.request(self.origin, "POST", path, body=body, headers=headers,
                                           connect_timeout=self.timeouts.connect, read_timeout=timeout)
        except Disconnected as exc:
            # typically a kept-alive connection the engine closed just as we reused it: the engine is
            # fine, the request can be sent again (the pool retries it, on this engine if it is alone)
            log.info("engine %s dropped a connection before answering: %s", self.url, exc)
            raise EngineError("The inference engine closed the connection before answering.", 502,
                              "BadGatewayError", kind="disconnect", retryable=True) from None
        except ConnectFailed as exc:
            raise unreachable(self.url, exc) from None
        except TimeoutError:
            raise EngineError("The inference engine did not answer in time.", 504, "GatewayTimeout",
                              kind="timeout", retryable=True) from None
        except ClientError as exc:  # the head was cut or is not HTTP
            log.warning("engine %s answered badly: %s", self.url, exc)
            raise EngineError(f"The inference engine connection broke: {exc}", 502, "BadGatewayError",
                              kind="stream", retryable=True) from None

    async def generate(self, request: dict[str, Any], *, max_answer_bytes: int | None = None) -> dict[str, Any]:
        """Non-streaming generate: the GenerateTokensResponse as a dict. A body longer than
        `max_answer_bytes` (what the request can produce) is not read further: a 502."""
        body = orjson.dumps(request)
        request_id = request.get("request_id")
        try:
            resp = await self._post("/inference/v1/generate", body, request_id, self.timeouts.first_token)
            data = await self._read_full(resp, max_answer_bytes)
        except asyncio.CancelledError:
            # the client went away: the dropped connection cancels the engine's handler, and the
            # explicit abort covers engines (or proxies in between) that do not notice
            if request_id:
                self.abort_in_background([ENGINE_ID_PREFIX + request_id])
            raise
        if resp.status != 200:
            raise engine_status_error(resp.status, data, resp.headers.get("location"), resp.headers.get("retry-after"))
        try:
            answer = orjson.loads(data)
        except orjson.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            raise invalid_response()
        return answer

    async def _read_full(self, resp: Response, max_bytes: int | None = None) -> bytes:
        try:
            return await resp.read(self.timeouts.first_token, max_bytes=max_bytes)
        except BodyTooLarge as exc:
            raise oversized_output(self.url, exc.limit) from None
        except TimeoutError:
            raise EngineError("The inference engine did not answer in time.", 504, "GatewayTimeout",
                              kind="timeout", retryable=True) from None
        except ClientError as exc:
            raise EngineError(f"The inference engine connection broke: {exc}", 502, "BadGatewayError",
                              kind="stream", retryable=True) from None
        finally:
            resp.release()  # closes the connection unless the body was read to its end

    async def open_stream(self, request: dict[str, Any], *, max_event_bytes: int | None = None) -> EngineStream:
        """Start a streaming generate; returns once the engine accepted it (status 200).

        `max_event_bytes` bounds one SSE event (see `proxy.engine.sse.event_bytes_bound`): an engine
        event that grows past it ends the stream with a 502 as soon as it does, unread and unparsed."""
        body = orjson.dumps(request)
        resp = await self._post("/inference/v1/generate", body, request.get("request_id"), self.timeouts.first_token)
        if resp.status != 200:
            try:
                data = await resp.read(self.timeouts.connect + 5, max_bytes=MAX_CONTROL_BODY_BYTES)
            except (TimeoutError, ClientError):
                data = b""
            finally:
                resp.release()
            raise engine_status_error(resp.status, data, resp.headers.get("location"), resp.headers.get("retry-after"))
        return EngineStream(self, resp, request.get("request_id"), max_event_bytes)

    def abort_in_background(self, engine_request_ids: list[str]) -> None:
        task = asyncio.get_running_loop().create_task(self.abort(engine_request_ids))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _call(self, method: str, path: str, body: bytes = b"") -> int:
        """A short control request (abort, health): its status. A kept-alive connection the engine
        closed just as we reused it is not the engine's failure: sent once more on a new one."""
        async def once() -> int:
            resp = await self.http.request(self.origin, method, path, body=body, headers=self.headers)
            await resp.read(max_bytes=MAX_CONTROL_BODY_BYTES)
            return resp.status

        try:
            return await once()
        except Disconnected:
            return await once()

    async def abort(self, engine_request_ids: list[str]) -> bool:
        try:
            async with asyncio.timeout(ABORT_TIMEOUT):
                status = await self._call("POST", "/inference/v1/abort_requests",
                                          orjson.dumps({"request_ids": engine_request_ids}))
                return status == 200
        except (ClientError, TimeoutError, OSError) as exc:
            log.warning("abort of %s on %s failed: %s", engine_request_ids, self.url, exc or type(exc).__name__)
            return False
        except Exception:  # it runs as a background task: nothing may escape it unretrieved
            log.exception("abort of %r on %s failed", engine_request_ids, self.url)
            return False

    async def check_health(self) -> bool:
        try:
            async with asyncio.timeout(self.timeouts.connect + 5):
                return await self._call("GET", "/health") == 200
        except (ClientError, TimeoutError, OSError):
            return False


class EngineStream:
    """The decoded events of one streaming generate, as dicts, ending at `data: [DONE]`.

    `await stream.next()` returns the next event, or None at the end. The first read is bounded by
    the first-token timeout, the others by the idle timeout; a timeout, a cut connection or an
    engine error event raises `EngineError` (the stream is then closed and the request aborted).
    """

    def __init__(self, engine: Engine, resp: Response, request_id: str | None,
                 max_event_bytes: int | None = None) -> None:
        self.engine = engine
        self._resp = resp
        self._decoder = SSEDecoder(max_event_bytes)
        self._pending: deque[bytes] = deque()
        self.started = False  # an event with tokens (or any event) arrived
        self.finished = False  # [DONE] seen (and the connection reusable)
        self.completed = False  # [DONE] seen
        self.error: EngineError | None = None  # why the stream failed, for on_close callbacks
        self.closed = False
        self.engine_request_id = ENGINE_ID_PREFIX + request_id if request_id else None
        self._on_close: list[Any] = []

    def on_close(self, callback: Any) -> None:
        self._on_close.append(callback)

    async def next(self) -> dict[str, Any] | None:
        if self.closed and not self.completed:
            return None  # we ended it (abort, stop string): events still buffered are not wanted
        while not self._pending:
            if self.finished or self.closed:
                return None
            timeout = self.engine.timeouts.idle if self.started else self.engine.timeouts.first_token
            try:
                data = await self._resp.readany(timeout)
            except TimeoutError:
                when = "between tokens." if self.started else "before the first token."
                raise self._fail(EngineError("The inference engine timed out " + when, 504, "GatewayTimeout",
                                             kind="timeout", started=self.started, retryable=True)) from None
            except (ClientError, ConnectionError) as exc:
                if self.closed:
                    return None  # we closed it (abort, stop string) while this read waited: it just ends
                log.warning("engine %s stream broke: %s", self.engine.url, exc)
                raise self._fail(EngineError(STREAM_CUT_MESSAGE, 502, "BadGatewayError", kind="stream",
                                             started=self.started, retryable=True)) from None
            if not data and self.closed:
                return None
            if not data:  # EOF without [DONE]: the engine (or the network) cut the stream
                raise self._fail(EngineError(STREAM_CUT_MESSAGE, 502, "BadGatewayError", kind="stream",
                                             started=self.started, retryable=True))
            try:
                self._pending.extend(self._decoder.feed(data))
            except EventTooLarge as exc:
                raise self._fail(oversized_output(self.engine.url, exc.limit, self.started)) from None
            except SSEError as exc:
                raise self._fail(EngineError(f"The inference engine sent an invalid stream ({exc}).", 502,
                                             "BadGatewayError", kind="stream", started=self.started)) from None
        payload = self._pending.popleft()
        if payload == DONE:
            self.finished = self.completed = True
            self._pending.clear()
            await self._read_to_eof()
            self.close()
            return None
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            raise self._fail(invalid_response(started=self.started))
        if "error" in event and "choices" not in event:
            raise self._fail(stream_error_event(event))
        if not self.started:
            self.started = True
            rid = event.get("request_id")
            if isinstance(rid, str) and rid:
                self.engine_request_id = rid
        return event

    def _fail(self, exc: EngineError) -> EngineError:
        """Record why the stream failed (the pool's on_close callback reads it), then abort it."""
        self.error = exc
        self.abort()
        return exc

    async def next_batch(self, limit: int = 64) -> list[dict[str, Any]] | None:
        """The next event and every further one already received (at most `limit`), or None at the
        end: the loop derenders them together and writes them to its client in one go."""
        event = await self.next()
        if event is None:
            return None
        batch = [event]
        while self._pending and len(batch) < limit:
            event = await self.next()
            if event is None:
                break
            batch.append(event)
        return batch

    async def _read_to_eof(self) -> None:
        """After [DONE], read the body's end so the connection goes back to the pool (a connection
        released before its body ended is closed); an engine that dawdles, or keeps sending
        after [DONE], gets it closed after a second in all."""
        resp = self._resp
        try:
            async with asyncio.timeout(1.0):
                while not resp.at_eof():
                    await resp.readany()
        except (TimeoutError, ClientError):
            self.finished = False  # close() drops the connection instead of reusing it

    def close(self) -> None:
        """Release the connection (after [DONE]) or drop it (before: the engine sees a disconnect)."""
        if self.closed:
            return
        self.closed = True
        if self.finished:
            self._resp.release()
        else:
            self._resp.close()
        for callback in self._on_close:
            callback()
        self._on_close.clear()

    def abort(self) -> bool:
        """Stop the engine request: drop the connection and post the abort. True if it was live."""
        live = not self.finished and not self.closed
        self.close()
        if live and self.engine_request_id:
            self.engine.abort_in_background([self.engine_request_id])
        return live
