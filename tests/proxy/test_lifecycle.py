"""Lifecycle of the real `derender-proxy serve` process: SIGTERM, drain, workers, JSON logs."""

from __future__ import annotations

import os
import signal
import time
import urllib.request

from tests.proxy.serve_process import ServeProcess


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, dict(resp.headers), resp.read()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_idle_server_exits_0_on_sigterm_with_json_logs(tmp_path):
    server = ServeProcess(tmp_path=tmp_path).start()
    try:
        status, headers, _ = get(server.url + "/v1/models")
        assert status == 200 and len(headers["X-Request-Id"]) == 32
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait(15) == 0
        assert time.monotonic() - started < 5  # nothing in flight: no drain wait
    finally:
        server.stop()
    lines = server.log_lines()
    listening = [line for line in lines if line["message"] == "listening"]
    assert len(listening) == 1
    try:
        import uvloop  # noqa: F401
        assert listening[0]["event_loop"] == "uvloop"
    except ImportError:
        assert listening[0]["event_loop"] == "asyncio"
    access = [line for line in lines if line["logger"] == "derender_proxy.access"]
    assert [(a["route"], a["status"]) for a in access] == [("/v1/models", 200)]
    assert access[0]["request_id"] == headers["X-Request-Id"]


def test_workers_share_one_port_and_stop_together(tmp_path):
    server = ServeProcess("--workers", "2", tmp_path=tmp_path).start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # both workers announce themselves once listening
            pids = {line["pid"] for line in server.log_lines() if line["message"] == "listening"}
            if len(pids) == 2:
                break
            time.sleep(0.2)
        assert len(pids) == 2 and server.proc.pid not in pids
        for _ in range(20):  # a fresh connection each: the kernel spreads them over the workers
            assert get(server.url + "/health")[0] == 200
        server.signal(signal.SIGTERM)
        assert server.wait(20) == 0
        time.sleep(0.2)
        assert not any(pid_alive(pid) for pid in pids)
    finally:
        server.stop()


def test_workers_need_a_fixed_port(tmp_path):
    import subprocess

    from tests.proxy.serve_process import command

    result = subprocess.run([*command(), "serve", "--workers", "2", "--port", "0"], capture_output=True,
                            timeout=60, text=True)
    assert result.returncode == 2
    assert "--workers needs a fixed --port" in result.stderr


def test_workers_exit_when_the_supervisor_is_killed(tmp_path):
    server = ServeProcess("--workers", "2", tmp_path=tmp_path).start()
    try:
        deadline = time.monotonic() + 60
        pids: set[int] = set()
        while time.monotonic() < deadline and len(pids) < 2:
            pids = {line["pid"] for line in server.log_lines() if line["message"] == "listening"}
            time.sleep(0.2)
        assert len(pids) == 2
        server.signal(signal.SIGKILL)  # no chance to forward anything
        server.wait(5)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
            time.sleep(0.2)
        assert not any(pid_alive(pid) for pid in pids)
    finally:
        server.stop()
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
