"""Run aiohttp apps on real loopback ports in a background thread, for real-HTTP tests.

The official `openai` sync client blocks its thread, so the servers it talks to need their own
event loop: `LoopbackServer` runs one app in one thread, on an ephemeral 127.0.0.1 port, with
handler cancellation on (as in production), and stops it cleanly.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def url(server: Any) -> str:
    """The base URL of a server on 127.0.0.1 (aiohttp's TestServer, LoopbackServer)."""
    return f"http://127.0.0.1:{server.port}"


class LoopbackServer:
    def __init__(self, app_factory: Callable[[], web.Application], port: int | None = None) -> None:
        self._factory = app_factory
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app: web.Application | None = None
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner: web.AppRunner | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as exc:  # surface start-up failures in the test thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._runner.cleanup())  # type: ignore[union-attr]
        self.loop.close()

    async def _start(self) -> None:
        self.app = self._factory()
        # a stalled handler (a fault-injected engine) is cancelled after 2 s, not aiohttp's 60: the
        # test is over by then, and stop() must not wait for it
        self._runner = web.AppRunner(self.app, handler_cancellation=True, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def start(self) -> LoopbackServer:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def call(self, coro: Any, timeout: float = 10) -> Any:
        """Run a coroutine on the server's loop (e.g. to stop a site) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(15)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
