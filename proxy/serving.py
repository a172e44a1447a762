"""Running the server: the event loop, one process or `--workers N` processes on one port.

`serve(config)` is what `derender-proxy serve` runs: JSON logs, uvloop when installed, the model
loaded once per process, the app from `proxy.app.create_app`, handler cancellation (a client that
goes away cancels its handler, which aborts the engine request) and the graceful drain of
`proxy.lifecycle` on SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Any

from aiohttp import web

from proxy.lifecycle import ABORT_GRACE

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
