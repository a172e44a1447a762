"""Run the real `derender-proxy` command as a subprocess on a free loopback port, for lifecycle tests."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.proxy.loopback import free_port


def command() -> list[str]:
    script = Path(sys.executable).with_name("derender-proxy")
    if script.exists():
        return [str(script)]
    found = shutil.which("derender-proxy")
    return [found] if found else [sys.executable, "-m", "proxy.cli"]


class ServeProcess:
    """`derender-proxy ARGS --port P` with stderr captured to a file (JSON log lines)."""

    def __init__(self, *args: str, port: int | None = None, tmp_path: Path, env: dict[str, str] | None = None,
                 subcommand: str = "serve") -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stderr_path = tmp_path / f"{subcommand}-{self.port}.stderr"
        self.stdout_path = tmp_path / f"{subcommand}-{self.port}.stdout"
        self.argv = [*command(), subcommand, *args, "--port", str(self.port)]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ServeProcess:
        return self.launch().wait_ready(timeout)

    def launch(self) -> ServeProcess:
        self.proc = subprocess.Popen(self.argv, stdout=self.stdout_path.open("wb"),
                                     stderr=self.stderr_path.open("wb"), env=self.env)
        return self

    def wait_ready(self, timeout: float = 60.0) -> ServeProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv} exited {self.proc.returncode}: {self.stderr()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"{self.argv} not healthy after {timeout}s: {self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def log_lines(self) -> list[dict]:
        lines = []
        for line in self.stderr().splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
        return lines

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
