"""The reference engine and `derender-proxy serve` as subprocesses on loopback, for bench scripts
that need the real server (`soak.py`, `fuzz.py`): started on free ports, waited for, stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
PARSER_FLAGS = ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3", "--enable-auto-tool-choice"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


@dataclass
class Stack:
    engine: subprocess.Popen
    proxy: subprocess.Popen
    engine_url: str
    proxy_url: str
    proxy_port: int


@contextlib.contextmanager
def stack(engine_flags: list[str], proxy_flags: list[str], proxy_stderr: IO[bytes] | int = subprocess.DEVNULL
          ) -> Iterator[Stack]:
    """A reference engine (served as tiny-qwen3) and the proxy in front of it, both up; SIGTERM on exit."""
    exe = [sys.executable, "-m", "proxy.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_VERBOSITY": "error"}
    engine_port, proxy_port = free_port(), free_port()
    engine = subprocess.Popen([*exe, "reference-engine", "--port", str(engine_port), "--served-model-name",
                               "tiny-qwen3", "--log-level", "warning", *engine_flags],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = subprocess.Popen([*exe, "serve", "--port", str(proxy_port), "--served-model-name", "tiny-qwen3",
                              "--engine-url", f"http://127.0.0.1:{engine_port}", "--no-access-log",
                              "--log-level", "warning", *proxy_flags],
                             env=env, stdout=subprocess.DEVNULL, stderr=proxy_stderr)
    running = Stack(engine, proxy, f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{proxy_port}", proxy_port)
    try:
        wait_up(running.engine_url)
        wait_up(running.proxy_url)
        yield running
    finally:
        for p in (proxy, engine):
            p.send_signal(signal.SIGTERM)
        for p in (proxy, engine):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def publish(text: str, out: str | None) -> None:
    """Print a report, and write it to `out` (a bench/results/*.md file) when given."""
    print(text)
    if out:
        Path(out).write_text(text)
