"""Lifecycle of the real `derender-proxy serve` process: SIGTERM, drain, workers, JSON logs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.error
import urllib.request

import aiohttp
import pytest

from tests.proxy.serve_process import ServeProcess

pytestmark = pytest.mark.slow  # real serve processes, signals, graceful drains: seconds each


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


# --- SIGTERM during a stream: the real proxy in front of the real reference engine ------------------

LONG_REPLY = " ".join(f"word{i}" for i in range(80))  # ~160 tokens


def start_stack(tmp_path, token_delay_ms: float, shutdown_timeout: float) -> tuple[ServeProcess, ServeProcess]:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([LONG_REPLY]))
    engine = ServeProcess("--replies", str(replies), "--token-delay-ms", str(token_delay_ms),
                          "--log-level", "warning", tmp_path=tmp_path, subcommand="reference-engine")
    proxy = ServeProcess("--engine-url", engine.url, "--shutdown-timeout", str(shutdown_timeout),
                         tmp_path=tmp_path)
    try:  # both start at once: half the start-up time
        engine.launch()
        proxy.launch()
        engine.wait_ready()
        proxy.wait_ready()
    except BaseException:
        proxy.stop()
        engine.stop()
        raise
    return engine, proxy


async def open_stream(session: aiohttp.ClientSession, proxy: ServeProcess, request_id: str):
    resp = await session.post(proxy.url + "/v1/chat/completions", headers={"X-Request-Id": request_id}, json={
        "model": "Qwen/Qwen3-0.6B", "stream": True, "max_tokens": 400,
        "messages": [{"role": "user", "content": "Count for me."}]})
    assert resp.status == 200
    assert resp.headers["X-Request-Id"] == request_id
    return resp


async def read_events(resp: aiohttp.ClientResponse, first_only: bool = False) -> list[str]:
    events = []
    async for line in resp.content:
        line = line.strip()
        if line.startswith(b"data: "):
            events.append(line[6:].decode())
            if first_only:
                break
    return events


def connection_refused(url: str) -> bool:
    """True when a new connection is refused (or reset: it was queued as the listener closed)."""
    try:
        urllib.request.urlopen(url + "/health", timeout=2)
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, (ConnectionRefusedError, ConnectionResetError))
    except ConnectionResetError:
        return True
    return False


async def test_sigterm_lets_a_stream_finish_within_the_shutdown_timeout(tmp_path):
    engine, proxy = start_stack(tmp_path, token_delay_ms=15, shutdown_timeout=20)  # ~2.5 s stream
    try:
        async with aiohttp.ClientSession() as session:
            resp = await open_stream(session, proxy, "drain-1")
            head = await read_events(resp, first_only=True)
            started = time.monotonic()
            proxy.signal(signal.SIGTERM)
            deadline = time.monotonic() + 1.5
            while not connection_refused(proxy.url) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            # stopped accepting while still serving the stream
            assert connection_refused(proxy.url) and proxy.proc.poll() is None
            events = head + await read_events(resp)
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert "error" not in chunks[-1]
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text == LONG_REPLY  # the whole answer, not cut by the shutdown
        assert proxy.wait(15) == 0
        assert time.monotonic() - started < 10  # exits once the stream is done, not after 20 s
        assert engine_aborts(engine, wait=0.3) == []
    finally:
        proxy.stop()
        engine.stop()
    access = [line for line in proxy.log_lines() if line["logger"] == "derender_proxy.access"]
    assert [(a["request_id"], a["status"], a["route"]) for a in access] == [("drain-1", 200, "/v1/chat/completions")]
    assert access[0]["completion_tokens"] > 100 and access[0]["prompt_tokens"] > 5


async def test_sigterm_aborts_streams_that_outlast_the_shutdown_timeout(tmp_path):
    engine, proxy = start_stack(tmp_path, token_delay_ms=100, shutdown_timeout=1)  # ~16 s stream
    try:
        async with aiohttp.ClientSession() as session:
            resp = await open_stream(session, proxy, "drain-2")
            head = await read_events(resp, first_only=True)
            started = time.monotonic()
            proxy.signal(signal.SIGTERM)
            events = head + await read_events(resp)
            ended = time.monotonic() - started
        assert 0.9 < ended < 4  # the drain waited ~1 s, then the stream was ended
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2])
        assert error["error"]["code"] == 503 and "shutting down" in error["error"]["message"]
        assert proxy.wait(15) == 0
        aborted = engine_aborts(engine)
        # the engine request was aborted, not left generating (the dropped connection and the
        # abort post may both reach the engine before the proxy exits)
        assert len({a["request_id"] for a in aborted}) == 1
    finally:
        proxy.stop()
        engine.stop()
    messages = [line["message"] for line in proxy.log_lines()]
    assert "shutdown timeout reached: aborting streams" in messages


def engine_aborts(engine: ServeProcess, wait: float = 2.0) -> list[dict]:
    deadline = time.monotonic() + wait
    while True:
        with urllib.request.urlopen(engine.url + "/debug/aborted", timeout=5) as resp:
            aborted = json.loads(resp.read())
        if aborted or time.monotonic() > deadline:
            return aborted
        time.sleep(0.05)


def test_shutdown_aborts_are_counted_once_per_stream(qwen3):
    """In-process: the drain of a stopping app aborts both streams and counts cause="shutdown" twice."""
    import threading

    from proxy.metrics import metrics_of
    from tests.proxy.frontdoor_stack import Stack

    stack = Stack(qwen3, shutdown_timeout=0.3)
    stack.set_replies([LONG_REPLY], token_delay_ms=50)
    results: list[list[str]] = []

    def stream() -> None:
        req = urllib.request.Request(stack.base_url + "/chat/completions", method="POST", data=json.dumps({
            "model": "tiny-qwen3", "stream": True,
            "messages": [{"role": "user", "content": "Count."}]}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            results.append([line.decode().strip()[6:] for line in resp if line.startswith(b"data: ")])

    threads = [threading.Thread(target=stream) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(stack.engine_state.live) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        app = stack.proxy.app
        stack.proxy.stop()  # runs the app's shutdown: drain 0.3 s, then abort
        for t in threads:
            t.join(10)
        aborted = stack.wait_aborted()
    finally:
        stack.close()
    assert len(results) == 2
    for events in results:
        assert events[-1] == "[DONE]" and "shutting down" in json.loads(events[-2])["error"]["message"]
    assert len(aborted) >= 1
    text = metrics_of(app).render().decode()
    assert 'derender_proxy_aborts_total{cause="shutdown"} 2.0' in text
