"""Running the server: the event loop, one process or `--workers N` processes on one port.

`serve(config)` is what `derender-proxy serve` runs: JSON logs, uvloop when installed, the model
loaded once per process, the app from `proxy.app.create_app`, handler cancellation (a client that
goes away cancels its handler, which aborts the engine request) and the graceful drain of
`proxy.lifecycle` on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Any

from aiohttp import web

from core.errors import error_json
from proxy.lifecycle import ABORT_GRACE
from proxy.metrics import METRICS, prepare_workers, worker_exited

log = logging.getLogger("derender_proxy.lifecycle")


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
    from proxy.model_loader import load_served_model

    configure_logging(config.log_level)
    # we never need PyTorch: transformers' banner about it would be the only non-JSON log line
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    model = load_served_model(config)
    app = create_app(config, model)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(_run(app, config, reuse_port, model.name))
    try:
        loop.run_until_complete(main)
    except KeyboardInterrupt:  # (signals are handled in _run; this is a Ctrl-C during start-up)
        pass
    finally:
        if not main.done():
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main)
        _cancel_remaining_tasks(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return 0


async def _run(app: web.Application, config: Any, reuse_port: bool, model_name: str) -> None:
    """Serve until SIGTERM or SIGINT, then shut down: the app's drain (`proxy.lifecycle`), and
    aiohttp's own wait for what is left (ABORT_GRACE)."""
    loop = asyncio.get_running_loop()
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=ABORT_GRACE)
    await runner.setup()
    try:
        site = CappedSite(runner, config.host, config.port, max_connections=max_connections(config),
                          reuse_port=reuse_port or None)
        await site.start()
        log.info("listening", extra={"fields": {
            "url": f"http://{config.host}:{site.port}", "model": model_name, "pid": os.getpid(),
            "event_loop": type(loop).__module__.split(".")[0], "max_connections": site.max_connections}})
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def _cancel_remaining_tasks(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


# -- a bound on the connections one process holds -------------------------------------------------

def max_connections(config: Any) -> int:
    """`--max-connections`, or by default half of the process's open-file limit: the other half
    stays for engine connections, health checks and files, so slow or idle clients can never take
    the sockets the proxy needs to reach its engines."""
    if getattr(config, "max_connections", 0):
        return int(config.max_connections)
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or soft <= 0:
            soft = 65536
    except (ImportError, OSError, ValueError):  # (not a Unix)
        soft = 1024
    return max(16, soft // 2)


OVER_CAPACITY_MESSAGE = "The server has too many open connections; retry shortly."
_OVER_CAPACITY_BODY = error_json(OVER_CAPACITY_MESSAGE, "ServiceUnavailableError", 503)
_OVER_CAPACITY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                           b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
                           + str(len(_OVER_CAPACITY_BODY)).encode() + b"\r\n\r\n" + _OVER_CAPACITY_BODY)
REFUSED_READ_TIMEOUT = 1.0  # seconds a refused client gets to send its request before we hang up


class _Refused(asyncio.Protocol):
    """A connection past the bound: it gets a 503 error body as soon as its request (head) starts
    to arrive, or after REFUSED_READ_TIMEOUT, and is closed; it never reaches the app."""

    def __init__(self, on_refused: Any) -> None:
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.on_refused = on_refused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.timer = asyncio.get_running_loop().call_later(REFUSED_READ_TIMEOUT, self._answer)
        self.on_refused()

    def data_received(self, data: bytes) -> None:
        self._answer()

    def _answer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        transport, self.transport = self.transport, None
        if transport is not None and not transport.is_closing():
            transport.write(_OVER_CAPACITY_RESPONSE)
            transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None


class CappedSite(web.BaseSite):
    """A TCP site (like aiohttp's TCPSite) that holds at most `max_connections` client connections
    (uvicorn's --limit-concurrency, nginx's worker_connections): one more gets a 503 error body and
    is closed at once, so slow or idle clients cannot exhaust the process's file descriptors."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, max_connections: int,
                 reuse_port: bool | None = None, backlog: int = 128) -> None:
        super().__init__(runner, backlog=backlog)
        self.host = host
        self.port = port  # the bound port once started (port 0: a free one)
        self.max_connections = max_connections
        self.reuse_port = reuse_port
        self.refused = 0
        self._accepting = 0  # handlers made whose connection_made has not run yet

    @property
    def name(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        metrics = self._runner.app.get(METRICS) if isinstance(self._runner, web.AppRunner) else None

        def accepted() -> None:
            self._accepting -= 1

        def refused() -> None:
            self.refused += 1
            if metrics is not None:
                metrics.connection_refused()

        def protocol() -> asyncio.BaseProtocol:
            # a handler registers with the server in its connection_made, the next callback after
            # this one: until then it is counted here (the decrement is queued just before it)
            if len(server.connections) + self._accepting >= self.max_connections:
                return _Refused(refused)
            self._accepting += 1
            loop.call_soon(accepted)
            return server()

        self._server = await loop.create_server(protocol, self.host, self.port, backlog=self._backlog,
                                                reuse_port=self.reuse_port)
        if self._server.sockets:
            self.port = self._server.sockets[0].getsockname()[1]


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
    cleanup_metrics = prepare_workers()  # one /metrics for all workers: set before they start
    ctx = multiprocessing.get_context("spawn")  # no fork: tokenizers' thread pool does not survive it
    workers = [ctx.Process(target=_worker_main, args=(config,), name=f"derender-proxy-worker-{i}")
               for i in range(config.workers)]
    for process in workers:
        process.start()
    stopping = False
    gone: set[int] = set()

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
            if process.exitcode is not None and process.pid not in gone:
                gone.add(process.pid)  # type: ignore[arg-type]
                worker_exited(process.pid)  # its gauges leave /metrics' sums
            if process.exitcode not in (None, 0) and not stopping:
                log.error("worker exited: stopping the others",
                          extra={"fields": {"worker": process.name, "exitcode": process.exitcode}})
                status = 1
                stop()
    for process in workers:  # one may have exited after its last check in the loop
        if process.pid not in gone:
            worker_exited(process.pid)  # type: ignore[arg-type]
    cleanup_metrics()
    return status
