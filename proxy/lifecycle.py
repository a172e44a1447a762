"""Graceful shutdown: stop accepting, let streams finish, then abort what is left.

On SIGTERM (or Ctrl-C) aiohttp's runner closes the listening sockets and then runs the app's
`on_shutdown` hooks; ours (`drain`) then:
1. marks the app draining: `/health` answers 503 (load balancers take the replica out) and any
   new request on a kept-alive connection gets a 503 error body;
2. waits until every in-flight request has finished, at most `--shutdown-timeout` seconds;
3. calls the abort callback of every stream still tracked (cause "shutdown"), which must make
   it end promptly: abort the engine request and end the SSE stream with an error event and
   `data: [DONE]`; each one counts in `derender_proxy_aborts_total{cause="shutdown"}`;
4. waits up to `ABORT_GRACE` more seconds, after which aiohttp cancels whatever still runs.

The registry, for the code that talks to engines (the front door's loop):

    from proxy.lifecycle import track

    async def abort_engine(cause: str) -> None:   # or a plain function
        ...  # POST /inference/v1/abort_requests, close the engine stream

    with track(request, abort_engine) as tracked:
        async for chunk in engine_stream:       # ends early once abort_engine ran
            ...
        if tracked.aborted:                     # the cause: "shutdown"
            ...  # write the error event, then data: [DONE]

Do not count shutdown aborts in the metrics yourself: `drain` does (once per tracked stream).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator

from aiohttp import web

from core.errors import error_json
from proxy.metrics import METRICS

log = logging.getLogger("derender_proxy.lifecycle")

ABORT_GRACE = 5.0  # seconds streams get to end after their abort callback ran
SHUTTING_DOWN_MESSAGE = "The server is shutting down."

AbortCallback = Callable[[str], Awaitable[None] | None]


@dataclass(eq=False)
class TrackedStream:
    """One engine-backed request in flight; `aborted` is the cause once its callback was called."""

    on_abort: AbortCallback
    aborted: str | None = None

    async def abort(self, cause: str) -> None:
        if self.aborted is not None:
            return
        self.aborted = cause
        result = self.on_abort(cause)
        if inspect.isawaitable(result):
            await result


@dataclass
class Lifecycle:
    draining: bool = False
    in_flight: int = 0
    streams: set[TrackedStream] = field(default_factory=set)
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.idle.set()

    def enter(self) -> None:
        """A request is admitted (the caller checked `draining`)."""
        self.in_flight += 1
        self.idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.idle.set()


LIFECYCLE: web.AppKey[Lifecycle] = web.AppKey("lifecycle", Lifecycle)


def lifecycle_of(app: web.Application) -> Lifecycle:
    return app[LIFECYCLE]


@contextmanager
def track(request: web.Request, on_abort: AbortCallback) -> Iterator[TrackedStream]:
    """Register an engine-backed request so a shutdown that outlasts its drain aborts it."""
    state = request.app[LIFECYCLE]
    stream = TrackedStream(on_abort)
    state.streams.add(stream)
    try:
        yield stream
    finally:
        state.streams.discard(stream)


def is_draining(app: web.Application) -> bool:
    return app[LIFECYCLE].draining


def refusal() -> web.Response:
    """The answer to a request that arrives while draining."""
    return web.Response(status=503, body=error_json(SHUTTING_DOWN_MESSAGE, "ServiceUnavailable", 503),
                        content_type="application/json", headers={"Connection": "close"})


async def _wait_idle(state: Lifecycle, timeout: float) -> bool:
    try:
        await asyncio.wait_for(state.idle.wait(), timeout)
        return True
    except asyncio.TimeoutError:
        return False


async def drain(app: web.Application, timeout: float) -> None:
    state = app[LIFECYCLE]
    state.draining = True
    if state.in_flight:
        log.info("draining", extra={"fields": {"in_flight": state.in_flight, "timeout_s": timeout}})
    if await _wait_idle(state, timeout):
        return
    streams = list(state.streams)
    log.warning("shutdown timeout reached: aborting streams",
                extra={"fields": {"streams": len(streams), "in_flight": state.in_flight}})
    metrics = app.get(METRICS)
    for stream in streams:
        if metrics is not None and stream.aborted is None:
            metrics.abort("shutdown")
        try:
            await stream.abort("shutdown")
        except Exception:  # one failing callback must not keep the others alive
            log.exception("abort callback failed")
    await _wait_idle(state, ABORT_GRACE)


def install(app: web.Application, shutdown_timeout: float) -> None:
    """Create the registry and hook `drain` into the app's shutdown."""
    app[LIFECYCLE] = Lifecycle()

    async def on_shutdown(app: web.Application) -> None:
        await drain(app, shutdown_timeout)

    app.on_shutdown.append(on_shutdown)
