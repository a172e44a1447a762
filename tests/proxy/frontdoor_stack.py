"""A real stack for front-door tests: reference engine(s) and the proxy on loopback ports.

Each server runs in its own thread and event loop (`LoopbackServer`), so the official `openai`
client, sync or async, talks to them over real HTTP. Tests change the engine's replies, delay
and faults between requests through `Stack.engine_state` (plain attribute writes).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import openai

from core.model import ModelInfo
from core.reference_engine import ReplyBook
from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.reference_engine import REFERENCE, Faults, ReferenceEngine, create_reference_app
from tests.proxy.loopback import LoopbackServer, free_port

PARSERS = {"tool_call_parser": "hermes", "reasoning_parser": "qwen3", "enable_auto_tool_choice": True}


class Stack:
    def __init__(self, model: ModelInfo, *, engines: int = 1, dead_engines: int = 0, **config: Any) -> None:
        self.model = model
        self.engines = [LoopbackServer(lambda: create_reference_app(model)).start() for _ in range(engines)]
        urls = [f"http://127.0.0.1:{free_port()}" for _ in range(dead_engines)] + [e.url for e in self.engines]
        self.config = ServerConfig(engine_url=urls, health_check_interval=0, **config)
        self.proxy = LoopbackServer(lambda: create_app(self.config, model)).start()
        self.url = self.proxy.url
        self.base_url = self.url + "/v1"

    def client(self, **options: Any) -> openai.OpenAI:
        """The official client on this proxy, without retries: a test sees every failure."""
        return openai.OpenAI(base_url=self.base_url, api_key="unused", max_retries=0, **options)

    def async_client(self, **options: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key="unused", max_retries=0, **options)

    @property
    def engine_state(self) -> ReferenceEngine:
        return self.engines[0].app[REFERENCE]  # type: ignore[index]

    def set_replies(self, replies: Sequence[str], token_delay_ms: float = 0.0, faults: Faults | None = None) -> None:
        for server in self.engines:
            state = server.app[REFERENCE]  # type: ignore[index]
            state.replies = ReplyBook(self.model, [(r, None) for r in replies])
            state.token_delay = token_delay_ms / 1000.0
            state.faults = faults or Faults()
            state.aborted.clear()

    def wait_aborted(self, timeout: float = 2.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        state = self.engine_state
        while time.monotonic() < deadline and not state.aborted:
            time.sleep(0.002)
        return list(state.aborted)

    def last_engine_request(self) -> dict[str, Any]:
        return self.engine_state.received[-1]

    def close(self) -> None:
        self.proxy.stop()
        for server in self.engines:
            server.stop()


def wait_for(condition, timeout: float = 5.0) -> None:
    """Poll until `condition()` (the stack's servers run in their own threads)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def with_config(stack: Stack, **changes: Any) -> ServerConfig:
    return replace(stack.config, **changes)


def post_raw(url: str, body: dict[str, Any], timeout: float = 10.0) -> tuple[int, dict[str, str], str]:
    """A plain HTTP POST (stdlib only), for tests that check the bytes on the wire."""
    import json
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read().decode()
