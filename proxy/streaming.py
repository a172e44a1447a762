"""The one loop between engines and a client, for every front-door API.

* `write_stream`: an SSE response driven by a `StreamWriter` (`core.derender.adapters.sse`): the
  writer's head events leave with the first token, each batch of engine events becomes the
  writer's events in one write, prompts whose choices all ended early (stop string, max_tokens
  cap) have their engine requests aborted, and the writer's last events end the body. A batch
  with many tokens is derendered in the thread pool, so one huge engine event cannot stall the
  event loop.
* `collect`: the same engine reads for a non-streamed answer, into the writer-less session.

Failures: before the first token they are JSON errors (raised); after it, the writer's error
event ends the stream, so a client never hangs. A client that goes away (the handler is
cancelled, or a write fails) aborts every engine request of the run; a shutdown that outlasts
`--shutdown-timeout` ends the stream with a 503 error event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from core.derender.adapters.sse import Collector, StreamWriter
from core.derender.session import EngineOutputError
from core.engine_request import engine_body
from core.errors import RequestError
from core.stop import normalize_stop
from proxy import lifecycle
from proxy import trace_context
from proxy.app import STATE
from proxy.engine.client import EngineError, EngineStream, invalid_response
from proxy.engine.run import EngineRun, all_or_none, client_error, merged, output_error

log = logging.getLogger("derender_proxy.streaming")

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
SHUTDOWN = RequestError(lifecycle.SHUTTING_DOWN_MESSAGE, 503, "ServiceUnavailableError")
# a batch carrying more tokens than this is derendered in the thread pool, not on the event loop
OFFLOAD_TOKENS = 4096


class SSEResponse(web.StreamResponse):
    """An event stream whose headers leave with its first events, in one send.

    aiohttp's StreamResponse sends its headers as soon as it is prepared; we prepare once the
    engine's first token is in, so they would be a send of their own just before the first events.
    A send costs tens of microseconds of system time (more on virtual machines), and two of them
    sit on the time to first token; `web.Response` buffers its headers the same way."""

    _send_headers_immediately = False


def _tokens(batch: list[dict[str, Any]]) -> int:
    count = 0
    for event in batch:
        choices = event.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                ids = choice.get("token_ids") if isinstance(choice, dict) else None
                if isinstance(ids, list):
                    count += len(ids)
    return count


async def _derender(request: web.Request, fn: Any, prompt: int, batch: list[dict[str, Any]]) -> Any:
    """`fn(prompt, batch)`, in the thread pool when the batch is large (only this request's
    coroutine touches its session, and it waits here)."""
    tokens = _tokens(batch)
    started = time.perf_counter()
    try:
        if tokens < OFFLOAD_TOKENS:
            return fn(prompt, batch)
        return await request.app[STATE].run_cpu(tokens, fn, prompt, batch)
    finally:
        trace_context.derendered(time.perf_counter() - started)


def _source_engine(sources: Sequence[tuple[EngineStream, Any]], prompt: int) -> Any:
    return sources[prompt][0].engine if 0 <= prompt < len(sources) else None


def client_gone() -> asyncio.CancelledError:
    """The client went away while we wrote to it: the same as a cancelled handler (a 499 in the
    access log, no traceback), not a server error."""
    return asyncio.CancelledError()


async def pump(request: web.Request, run: EngineRun, sources: Sequence[tuple[EngineStream, dict | None]],
               writer: StreamWriter, emit: Callable[[list[bytes]], Awaitable[None]],
               shutting_down: Callable[[], bool] = lambda: False) -> RequestError | None:
    """The loop itself: each batch of engine events through `writer`, its events to `emit`,
    prompts whose choices all ended early aborted. Returns the error that ended the stream (None:
    it ended well); the caller adds `writer.close(...)`."""
    session = writer.session
    cut = 0
    prompt = 0
    first = True
    try:
        async for prompt, batch in merged(sources, run.metrics):
            out = await _derender(request, writer.feed, prompt, batch)
            if out or first:  # the first engine event sends the writer's head even when it adds nothing
                try:
                    await emit(out)
                except ConnectionResetError:
                    # the client left and a write found out: a disconnect (the caller aborts the
                    # engine request as one), not a derender failure nor an engine error
                    raise client_gone() from None
                first = False
            for done in session.to_abort():
                run.abort(sources[done][0], "stop_string")
                cut += 1
            if cut == len(sources):
                break
        return SHUTDOWN if shutting_down() else None
    except EngineError as exc:
        return SHUTDOWN if shutting_down() else _failed(run, exc)
    except EngineOutputError as exc:
        return _failed(run, output_error(exc, _source_engine(sources, prompt), started=True))
    except Exception:  # the stream has started: never let a bug corrupt it, end it properly
        log.exception("derendering the engine stream failed")
        return _failed(run, invalid_response(started=True))
    finally:
        run.count(0, session.completion_tokens)


async def write_stream(request: web.Request, run: EngineRun, sources: Sequence[tuple[EngineStream, dict | None]],
                       writer: StreamWriter, head: list[bytes] | None = None,
                       before_end: Callable[[], Awaitable[None]] | None = None) -> web.StreamResponse:
    """Stream the engine's output to the client through `writer` (see the module docstring).
    `head`: the writer's first events, when the caller made them already (`stream_one`: while the
    engine computed the first token). `before_end`: awaited once the writer has closed (its final
    answer made) and before its last events go out, for what must be done before the client can
    act on the end (the Responses store: a continuation may follow the terminal event at once)."""
    resp = SSEResponse(headers=SSE_HEADERS)
    try:
        await resp.prepare(request)
    except BaseException as exc:
        run.abort_all("client_disconnect")
        if isinstance(exc, ConnectionResetError):
            raise client_gone() from None
        raise
    unsent = writer.head() if head is None else head
    keepalive = _keepalive(resp, writer)

    async def emit(events: list[bytes]) -> None:
        nonlocal unsent
        if unsent:  # the head leaves with the first engine event, in one send
            events, unsent = unsent + events, []
        if not events:
            return
        await resp.write(b"".join(events))
        run.first_events_written()
        if keepalive is not None:
            keepalive.wrote()

    try:
        with lifecycle.track(request, run.abort_all) as tracked:
            error = await pump(request, run, sources, writer, emit, lambda: tracked.aborted is not None)
            if keepalive is not None:
                await keepalive.stop()
            last = writer.close(error)
            if before_end is not None:
                await before_end()
            await resp.write_eof(b"".join([*unsent, *last]))  # one send, end of body included
    except (asyncio.CancelledError, ConnectionResetError) as exc:
        run.abort_all("client_disconnect")
        if isinstance(exc, ConnectionResetError):
            raise client_gone() from None
        raise
    finally:
        if keepalive is not None:
            await keepalive.stop()
        run.report_tokens()
    return resp


class _Keepalive:
    """Sends the writer's `ping()` event whenever the stream has been silent `ping_interval`
    seconds (Anthropic's `ping`), so proxies and clients with idle timeouts keep the stream.

    A timer, not a task per stream: creating and starting a task cost ~40 us (in the server, caches
    cold) of every Messages stream's time to first token. The timer fires `interval` after the
    last write; if nothing was written since, a ping goes out (its own task: a write may wait for
    the client); either way it is set again for `interval` after the last write."""

    def __init__(self, resp: web.StreamResponse, ping: bytes, interval: float) -> None:
        self.resp = resp
        self.ping = ping
        self.interval = interval
        self.loop = asyncio.get_running_loop()
        self.last = self.loop.time()
        self.sending: asyncio.Task | None = None
        self.timer = self.loop.call_at(self.last + interval, self._due)

    def wrote(self) -> None:
        self.last = self.loop.time()

    def _due(self) -> None:
        now = self.loop.time()
        if now - self.last >= self.interval and (self.sending is None or self.sending.done()):
            self.last = now
            self.sending = self.loop.create_task(self._send())
        self.timer = self.loop.call_at(self.last + self.interval, self._due)

    async def _send(self) -> None:
        try:
            await self.resp.write(self.ping)
        except (ConnectionResetError, RuntimeError):
            pass  # the client is gone (the main loop notices) or the response ended

    async def stop(self) -> None:
        self.timer.cancel()
        if self.sending is not None and not self.sending.done():
            self.sending.cancel()
            await asyncio.gather(self.sending, return_exceptions=True)


async def stream_one(request: web.Request, run: EngineRun, gen: dict[str, Any],
                     make_writer: Callable[[], StreamWriter],
                     before_end: Callable[[], Awaitable[None]] | None = None) -> web.StreamResponse:
    """Stream one prompt's engine output: the engine request goes out first, and `make_writer` (the
    derender session, its parsers, the writer and its head: nothing the engine request needs) runs
    while the engine computes the first token. The one check the session makes of the request,
    the stop strings' bound, is made here first: a 400 before the engine is called."""
    normalize_stop(gen["sampling_params"].get("stop"))
    made: list[tuple[StreamWriter, list[bytes]]] = []

    def prepare() -> None:
        writer = make_writer()
        made.append((writer, writer.head()))

    source = await run.open(engine_body(gen, stream=True), gen["token_ids"], while_waiting=prepare)
    writer, head = made[0]
    return await write_stream(request, run, [source], writer, head, before_end)


def _keepalive(resp: web.StreamResponse, writer: StreamWriter) -> _Keepalive | None:
    interval = getattr(writer, "ping_interval", None)
    return _Keepalive(resp, writer.ping(), interval) if interval else None  # type: ignore[attr-defined]


def _failed(run: EngineRun, exc: EngineError) -> RequestError:
    run.failed(exc)
    return client_error(exc)


async def collect(request: web.Request, run: EngineRun, gens: Sequence[dict[str, Any]], session: Collector,
                  use_stream: bool) -> list[list[Any] | None]:
    """Read every prompt's engine output into the session (non-streamed answers); returns the
    engine's prompt_logprobs per prompt. With stop strings (`use_stream`) the engine streams, so a
    prompt whose choices all stopped can be aborted instead of generated to the end."""
    prompt_logprobs: list[list[Any] | None] = [None] * len(gens)
    try:
        if not use_stream:
            async def one(p: int, gen: dict[str, Any]) -> None:
                answer, engine = await run.answer(engine_body(gen, stream=False), gen["token_ids"])
                found = answer.get("prompt_logprobs")
                prompt_logprobs[p] = found if isinstance(found, list) else None
                try:
                    await _derender(request, session.collect, p, [answer])
                except EngineOutputError as exc:
                    raise client_error(output_error(exc, engine, started=False)) from None
            await all_or_none(run, [one(p, g) for p, g in enumerate(gens)])
            return prompt_logprobs
        sources = await all_or_none(run, [run.open(engine_body(g, stream=True), g["token_ids"]) for g in gens])
        cut = 0
        prompt = 0
        try:
            async for prompt, batch in merged(sources, run.metrics):
                await _derender(request, session.collect, prompt, batch)
                for done in session.to_abort():
                    run.abort(sources[done][0], "stop_string")
                    cut += 1
                if cut == len(sources):
                    break
        except EngineError as exc:
            raise _failed(run, exc) from None
        except EngineOutputError as exc:
            raise _failed(run, output_error(exc, _source_engine(sources, prompt), started=True)) from None
        return prompt_logprobs
    except asyncio.CancelledError:
        run.abort_all("client_disconnect")
        raise
