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
import multiprocessing
import os
import signal
import sys
import threading
import time
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


@web.middleware
async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Count in-flight requests for the drain; refuse new work (and fail /health) while draining."""
    state = request.app[LIFECYCLE]
    if state.draining:
        return web.Response(status=503, body=error_json(SHUTTING_DOWN_MESSAGE, "ServiceUnavailable", 503),
                            content_type="application/json", headers={"Connection": "close"})
    state.in_flight += 1
    state.idle.clear()
    try:
        return await handler(request)
    finally:
        state.in_flight -= 1
        if state.in_flight == 0:
            state.idle.set()


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


# --- running the server: event loop, workers ----------------------------------------------------

def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (the `fast` extra), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve(config: Any) -> int:
    """`derender-proxy serve`: one process, or `--workers N` processes sharing the port."""
    if config.workers > 1:
        return _supervise(config)
    return _serve_process(config, reuse_port=False)


def _serve_process(config: Any, reuse_port: bool) -> int:
    from proxy.access_log import configure_logging
    from proxy.app import create_app
    from proxy.cli import load_served_model

    configure_logging(config.log_level)
    # we never need PyTorch: transformers' banner about it would be the only non-JSON log line
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    model = load_served_model(config)
    app = create_app(config, model)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    url = f"http://{config.host}:{config.port}"

    def announce(_: str) -> None:
        log.info("listening", extra={"fields": {"url": url, "model": model.name, "pid": os.getpid(),
                                                "event_loop": type(loop).__module__.split(".")[0]}})

    # the drain in on_shutdown already waited --shutdown-timeout; aiohttp's own wait is the last grace
    web.run_app(app, host=config.host, port=config.port, access_log=None, print=announce,
                shutdown_timeout=ABORT_GRACE, handler_cancellation=True, reuse_port=reuse_port or None,
                loop=loop)
    return 0


def _worker_main(config: Any) -> None:
    # own process group: a terminal's Ctrl-C reaches the supervisor only, which sends one SIGTERM
    os.setpgid(0, 0)
    _exit_with_parent()
    sys.exit(_serve_process(config, reuse_port=True))


def _exit_with_parent(poll: float = 1.0) -> None:
    """A worker whose supervisor died (even by SIGKILL) drains and exits instead of serving on."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _supervise(config: Any) -> int:
    """Start `--workers` processes bound to the same port with SO_REUSEPORT (the kernel spreads
    connections); forward SIGTERM/SIGINT to them and wait for their graceful shutdown."""
    from proxy.access_log import configure_logging

    configure_logging(config.log_level)
    if config.port == 0:
        log.error("--workers needs a fixed --port (each worker would get its own random port)")
        return 2
    ctx = multiprocessing.get_context("spawn")  # no fork: tokenizers' thread pool does not survive it
    workers = [ctx.Process(target=_worker_main, args=(config,), name=f"derender-proxy-worker-{i}")
               for i in range(config.workers)]
    for process in workers:
        process.start()
    stopping = False

    def stop(signum: int = signal.SIGTERM, frame: Any = None) -> None:
        nonlocal stopping
        stopping = True
        for process in workers:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = 0
    while any(p.is_alive() for p in workers):
        for process in workers:
            process.join(0.2)
            if process.exitcode not in (None, 0) and not stopping:
                log.error("worker exited: stopping the others",
                          extra={"fields": {"worker": process.name, "exitcode": process.exitcode}})
                status = 1
                stop()
    return status
