"""The engine side of one client request: its engine calls (one per prompt), aborts, metrics.

* `EngineRun`: opens streams and non-streamed answers through the pool as one admission group,
  aborts them all (client gone, error, shutdown) or one prompt's (stop string, `max_tokens` cap),
  and records the request's token counts and the proxy's own share of the time to first token.
* `merged(...)`: several engine streams (a multi-prompt completion) as one sequence of
  (prompt index, batch of events), with backpressure;
* `all_or_none(...)`: one engine call per prompt, concurrently; the first failure cancels and
  aborts the others.

Failures become the client's errors here: `client_error` (an EngineError as a RequestError), and
`output_error` (engine output that breaks the protocol, `core.derender.session.EngineOutputError`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from aiohttp import web

from core.derender.session import GENERATION_FAILED, EngineOutputError
from core.errors import RequestError
from proxy import trace_context
from proxy.engine.client import INVALID_RESPONSE_MESSAGE, Engine, EngineError, EngineStream
from proxy.engine.pool import EnginePool
from proxy.engine.sse import event_bytes_bound
from proxy.metrics import ARRIVAL_KEY, METRICS

log = logging.getLogger("derender_proxy.engine")

BATCH_LIMIT = 32  # engine events derendered per write; then other requests get the loop


# logprobs: -1 asks for every candidate the engine keeps (vLLM caps them at --max-logprobs)
_ALL_LOGPROBS = 1000


def output_bound(body: dict[str, Any], with_prompt: bool = False) -> int:
    """The most bytes an engine event (or, `with_prompt`, a whole answer with its prompt logprobs)
    of this engine request can hold; more is an engine gone wrong, refused as it arrives."""
    params = body["sampling_params"]
    logprobs = params.get("logprobs") or 0
    bound = event_bytes_bound(int(params.get("max_tokens") or 1), int(params.get("n") or 1),
                              _ALL_LOGPROBS if logprobs < 0 else logprobs)
    prompt_logprobs = params.get("prompt_logprobs")
    if with_prompt and prompt_logprobs is not None:
        bound += event_bytes_bound(len(body["token_ids"]), 1,
                                   _ALL_LOGPROBS if prompt_logprobs < 0 else max(prompt_logprobs, 1))
    return bound


def client_error(exc: EngineError) -> RequestError:
    return RequestError(exc.message, exc.status, exc.type, retry_after=exc.retry_after)


def output_error(exc: EngineOutputError, engine: Engine | None, started: bool) -> EngineError:
    """Engine output the protocol does not allow: a 502 (an error event once streaming). The
    client hears what was wrong; which engine said it goes to the log (engine URLs are internal)."""
    log.warning("engine %s broke the protocol: %s", engine.url if engine is not None else "?", exc.message)
    if exc.generation_failed:  # vLLM turns finish_reason "error" into a 500 with this message
        return EngineError(GENERATION_FAILED, 502, "BadGatewayError", kind="stream", started=started)
    return EngineError(f"{INVALID_RESPONSE_MESSAGE[:-1]}: {exc.message}.", 502, "BadGatewayError", kind="stream",
                       started=started)


class EngineRun:
    """The engine side of one request: its streams (one per prompt), aborts, metrics."""

    def __init__(self, request: web.Request, pool: EnginePool) -> None:
        self.request = request
        self.pool = pool
        self.metrics = request.app.get(METRICS)
        self.streams: list[EngineStream] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._t0 = time.monotonic()
        # the proxy's own share of the time to first token (perf_counter): arrival -> first engine call,
        # last engine stream's first token -> first events written
        self._arrival: float | None = request.get(ARRIVAL_KEY)
        self._engine_called: float | None = None
        self._first_token: float | None = None

    def calling_engine(self) -> None:
        if self._engine_called is None:
            self._engine_called = time.perf_counter()
            trace_context.engine_called()

    def first_events_written(self) -> None:
        """Record the proxy's own share of this stream's time to first token (once)."""
        if self._first_token is None or self._arrival is None or self._engine_called is None:
            return
        if self.metrics is not None:
            self.metrics.observe_overhead(self._engine_called - self._arrival + time.perf_counter() - self._first_token)
        self._first_token = None

    async def open(self, body: dict[str, Any], prompt_ids: Sequence[int], prefer: Engine | None = None,
                   while_waiting: Callable[[], None] | None = None) -> tuple[EngineStream, dict | None]:
        """Open one engine stream and read its first event; `while_waiting` runs once the engine
        accepted the request, before that event is awaited (`EnginePool.open_stream`)."""
        self.calling_engine()
        try:
            # one group: the engine requests of one client request (several prompts) are admitted
            # together, so a request never holds slots while it queues for its own other prompts
            stream, first = await self.pool.open_stream(body, prompt_ids, group=self, prefer=prefer,
                                                        max_event_bytes=output_bound(body),
                                                        while_waiting=while_waiting)
        except EngineError as exc:
            raise client_error(exc) from None
        self.streams.append(stream)
        self._first_token = time.perf_counter()
        trace_context.first_token(stream.engine.url)
        if self.metrics is not None:
            self.metrics.observe_ttft(time.monotonic() - self._t0)
        return stream, first

    async def answer(self, body: dict[str, Any], prompt_ids: Sequence[int]) -> tuple[dict[str, Any], Engine]:
        """One non-streamed engine answer and the engine that gave it (failures: the client's error)."""
        self.calling_engine()
        try:
            engine, answer = await self.pool.generate(body, prompt_ids,
                                                      max_answer_bytes=output_bound(body, with_prompt=True))
        except EngineError as exc:
            raise client_error(exc) from None
        trace_context.answered(engine.url)
        return answer, engine

    def abort_all(self, cause: str) -> None:
        aborted = False
        for stream in self.streams:
            aborted |= stream.abort()
        if aborted and self.metrics is not None and cause != "shutdown":
            self.metrics.abort(cause)

    def abort(self, stream: EngineStream, cause: str) -> None:
        """One prompt's engine request: its choices ended before the engine's (stop string, cap)."""
        if stream.abort() and self.metrics is not None:
            self.metrics.abort(cause)

    def failed(self, exc: EngineError) -> None:
        """An engine stream broke after it started: count it and make sure nothing keeps generating."""
        if self.metrics is not None:
            for stream in self.streams:
                if not stream.finished:
                    self.metrics.engine_error(stream.engine.url, exc.kind)
                    break
            if exc.kind == "timeout":
                self.metrics.abort("timeout")
        self.abort_all("error")

    def count(self, prompt: int, completion: int) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    def report_tokens(self) -> None:
        if self.metrics is not None:
            self.metrics.add_tokens(self.prompt_tokens, self.completion_tokens, request=self.request)


async def batches(stream: EngineStream, first: dict | None, metrics: Any) -> AsyncIterator[list[dict]]:
    """The engine events of one stream in batches (what one network read brought), first one
    included; the gap between reads feeds the inter-token latency histogram."""
    if first is None:
        return
    batch: list[dict] | None = [first]
    last = time.monotonic()
    while batch is not None:
        yield batch
        if len(batch) >= BATCH_LIMIT:
            await asyncio.sleep(0)  # a zero-delay engine must not starve new requests' first tokens
        batch = await stream.next_batch(BATCH_LIMIT)
        if metrics is not None and batch is not None:
            now = time.monotonic()
            metrics.observe_itl(now - last)
            last = now
    trace_context.output_ended()


async def merged(sources: Sequence[tuple[EngineStream, dict | None]], metrics: Any
                 ) -> AsyncIterator[tuple[int, list[dict]]]:
    """Several engine streams (multi-prompt completions) as one sequence of (prompt index, batch)."""
    if len(sources) == 1:
        stream, first = sources[0]
        async for batch in batches(stream, first, metrics):
            yield 0, batch
        return
    # bounded: a slow client slows the pumps, which stop reading, which slows the engines (backpressure)
    queue: asyncio.Queue = asyncio.Queue(maxsize=4 * len(sources))
    end = object()

    async def pump(i: int, stream: EngineStream, first: dict | None) -> None:
        try:
            async for batch in batches(stream, first, metrics):
                await queue.put((i, batch))
            await queue.put((i, end))
        except asyncio.CancelledError:
            raise  # the consumer is gone: nothing to tell it
        except Exception as exc:  # the consumer re-raises it (and cancels the other pumps)
            await queue.put((i, exc))

    tasks = [asyncio.get_running_loop().create_task(pump(i, s, f)) for i, (s, f) in enumerate(sources)]
    remaining = len(tasks)
    try:
        while remaining:
            i, item = await queue.get()
            if item is end:
                remaining -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield i, item
    finally:
        for task in tasks:
            task.cancel()


async def all_or_none(run: EngineRun, coros: list[Any]) -> list[Any]:
    """Run one engine call per prompt concurrently; on the first failure (or a cancellation),
    cancel the others and abort every engine request already started, then re-raise."""
    if len(coros) == 1:
        return [await coros[0]]
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = next((t for t in done if not t.cancelled() and t.exception() is not None), None)
        if failed is None:
            return [t.result() for t in tasks]
        raise failed.exception()  # type: ignore[misc]
    except BaseException as exc:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        run.abort_all("client_disconnect" if isinstance(exc, asyncio.CancelledError) else "error")
        raise
