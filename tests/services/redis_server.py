"""A real Redis server for tests: Debian's `redis-server`, started on a free loopback port in a
temporary directory and stopped afterwards. Never skipped: when `redis-server` is missing it is
installed from Debian's packages (as root, or with passwordless sudo; `.ci/run` does the same),
and if that is not possible the tests that need it fail, saying how to install it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

INSTALL_HINT = "redis-server is not installed: apt-get install redis-server (Debian's package; .ci/run does this)"


def redis_binary() -> str:
    """`redis-server`'s path, installing Debian's package once when it is missing."""
    binary = shutil.which("redis-server")
    if binary is None:
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "install", "-y", "-qq", "redis-server"], ["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "redis-server"]):
            try:
                subprocess.run([*sudo, *command], env=env, capture_output=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired):  # no apt-get / sudo here: the hint says what to do
                break
            binary = shutil.which("redis-server")
            if binary is not None:
                break
    assert binary is not None, INSTALL_HINT
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, directory: Path) -> None:
        binary = redis_binary()
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                      "--dir", str(directory), "--daemonize", "no", "--loglevel", "warning"]
        self.process: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(self._args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            assert self.process.poll() is None, f"redis-server exited: {self.process.stderr.read()!r}"
            assert time.monotonic() < deadline, "redis-server did not answer PING in 20 s"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory).start()
    try:
        yield server
    finally:
        server.stop()
