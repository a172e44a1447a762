"""Background responses (`background: true`): runs that outlive the request that started them.

The response is stored `queued`, answered at once, then generated here; it ends `completed`,
`incomplete` or `failed` in the store unless it was cancelled meanwhile (a compare-and-set on its
status, so a cancellation from another replica always wins). A cancellation on this process stops
the task; one from elsewhere is seen by polling the store (`CANCEL_POLL_SECONDS`). With `stream`,
the events go into an `EventLog` that the creating request and later resumptions follow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from core.engine_request import engine_body
from core.errors import RequestError
from proxy.engine.run import EngineRun
from proxy.responses_call import ACTIVE, OWNER, ResponsesCall, keep_record, log
from proxy.store import ResponseStore, StoreUnavailable
from proxy.http import json_response
from proxy.responses_call import stored
from proxy.streaming import SSE_HEADERS, SSEResponse, client_gone, pump

CANCEL_POLL_SECONDS = 1.0  # how often a background response looks for a cancellation from elsewhere
BACKGROUND: web.AppKey[dict] = web.AppKey("background_responses", dict)  # response id -> its task here
STREAM_LOGS: web.AppKey[dict] = web.AppKey("background_stream_logs", dict)  # response id -> its EventLog
class EventLog:
    """The events of a background streamed response, in this process: the request that created
    it and later `GET ...?stream=true&starting_after=N` follow it; the generation goes on whoever
    listens. Kept LOG_KEEP_SECONDS after the end, for late resumptions."""

    def __init__(self) -> None:
        self.events: list[bytes] = []  # one per sequence number
        self.done = False
        self._changed = asyncio.Condition()

    async def extend(self, events: list[bytes]) -> None:
        async with self._changed:
            self.events.extend(events)
            self._changed.notify_all()

    async def finish(self) -> None:
        async with self._changed:
            self.done = True
            self._changed.notify_all()

    async def follow(self, start: int) -> AsyncIterator[list[bytes]]:
        seen = start
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.events) > seen or self.done)
                events, seen = self.events[seen:], len(self.events)
                done = self.done
            if events:
                yield events
            if done and seen >= len(self.events):
                return


LOG_KEEP_SECONDS = 600.0


async def start_background(request: web.Request, call: ResponsesCall, run: EngineRun,
                            store: ResponseStore) -> web.StreamResponse:
    queued = call.frame.response([], "queued", None)
    await stored(store, store.put(call.record(queued, OWNER)))
    response_id = queued["id"]
    logs = request.app[STREAM_LOGS]
    events = logs[response_id] = EventLog() if call.req.stream else None
    tasks = request.app[BACKGROUND]
    task = asyncio.get_running_loop().create_task(run_background(request, call, run, store, events))
    tasks[response_id] = task

    def ended(_: Any) -> None:
        tasks.pop(response_id, None)
        if events is not None:
            asyncio.get_running_loop().call_later(LOG_KEEP_SECONDS, logs.pop, response_id, None)
    task.add_done_callback(ended)
    if events is None:
        return json_response(queued)
    return await follow(request, events, 0)


async def follow(request: web.Request, events: EventLog, start: int) -> web.StreamResponse:
    """Stream a background response's events from `start`; leaving does not stop the generation."""
    resp = SSEResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    try:
        async for batch in events.follow(start):
            await resp.write(b"".join(batch))
        await resp.write_eof()
    except ConnectionResetError:
        raise client_gone() from None
    return resp


async def run_background(request: web.Request, call: ResponsesCall, run: EngineRun, store: ResponseStore,
                          events: EventLog | None) -> None:
    """Generate, then store the answer unless the response was cancelled meanwhile. A cancellation
    here (POST .../cancel on this process, shutdown) or seen in the store stops the generation,
    which aborts the engine request. With `events`, the generation is streamed into that log."""
    response_id = call.frame.id
    generation = watcher = None
    try:
        await store.put(call.record(call.frame.response([], "in_progress", None), OWNER), if_status=ACTIVE)
        produce = call.generate(request, run) if events is None else _stream_into(request, call, run, events, store)
        generation = asyncio.ensure_future(produce)
        watcher = asyncio.ensure_future(_watch_cancellation(store, response_id))
        await asyncio.wait([generation, watcher], return_when=asyncio.FIRST_COMPLETED)
        if not generation.done():
            return  # cancelled from another replica (finally stops the generation)
        try:
            response = generation.result()
        except RequestError as exc:
            response = call.frame.response([], "failed", None, {"code": "server_error", "message": exc.message})
        if events is None:  # (a streamed one stored its answer before its last events: _stream_into)
            await store.put(call.record(response, OWNER), if_status=ACTIVE)
    except StoreUnavailable as exc:
        log.warning("background response %s: the store is unavailable: %s", response_id, exc)
    except Exception:
        log.exception("background response %s failed", response_id)
        failed = call.frame.response([], "failed", None, {"code": "server_error", "message": "Internal server error"})
        with contextlib.suppress(StoreUnavailable):
            await store.put(call.record(failed, OWNER), if_status=ACTIVE)
    finally:
        for task in (generation, watcher):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(t for t in (generation, watcher) if t is not None), return_exceptions=True)
        if events is not None:
            await events.finish()


async def _stream_into(request: web.Request, call: ResponsesCall, run: EngineRun, events: EventLog,
                       store: ResponseStore) -> dict[str, Any]:
    """A background streamed response: the Responses events into the log; returns the final response,
    stored before the terminal event is logged (a follower may GET or continue it from another
    replica the moment it reads that event)."""
    writer = call.writer()
    await events.extend(writer.head())

    async def end(last: list[bytes]) -> None:
        assert writer.final is not None
        await keep_record(store, call.record(writer.final, OWNER), if_status=ACTIVE)  # (followers get their end)
        await events.extend(last)

    try:
        source = await run.open(engine_body(call.gen, stream=True), call.gen["token_ids"])
        error = await pump(request, run, [source], writer, events.extend)
        await end(writer.close(error))
    except RequestError as exc:  # the engine failed before its first token
        await end(writer.close(exc))
    except asyncio.CancelledError:
        run.abort_all("client_disconnect")
        raise
    finally:
        run.report_tokens()
    assert writer.final is not None
    return writer.final


async def _watch_cancellation(store: ResponseStore, response_id: str) -> None:
    """Returns once the stored response says it was cancelled (or is gone)."""
    while True:
        await asyncio.sleep(CANCEL_POLL_SECONDS)
        try:
            record = await store.get(response_id)
        except StoreUnavailable:
            continue
        if record is None or record["response"].get("status") not in ACTIVE:
            return


