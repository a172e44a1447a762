"""`derender-proxy demo` end to end, as the README's first command runs it: a real subprocess."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import time

import openai
import pytest

from tests.proxy.serve_process import command

pytestmark = pytest.mark.slow  # the demo command end to end, in a subprocess


def read_timed(proc: subprocess.Popen, until: str | None = None, timeout: float = 90.0) -> list[tuple[float, str]]:
    """Stdout as (arrival time, bytes read) pieces, until EOF or until `until` appears."""
    fd = proc.stdout.fileno()
    pieces: list[tuple[float, str]] = []
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        data = os.read(fd, 65536)
        if not data:
            break
        pieces.append((time.monotonic(), data.decode()))
        text += pieces[-1][1]
        if until is not None and until in text:
            break
    return pieces


def test_demo_streams_reasoning_content_and_a_tool_call_then_exits_0():
    started = time.monotonic()
    proc = subprocess.Popen([*command(), "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pieces = read_timed(proc)
        assert proc.wait(30) == 0, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - started < 60
    out = "".join(p for _, p in pieces)
    reasoning = re.search(r"\[reasoning\] (.+)", out).group(1)
    content = re.search(r"\[content\] (.+)", out).group(1)
    call = re.search(r"\[tool call (chatcmpl-tool-[0-9a-f]{16}): get_weather\] (.+)", out)
    assert "get_weather tool" in reasoning and "weather in Paris" in content
    assert json.loads(call.group(2)) == {"city": "Paris", "unit": "celsius"}
    assert out.index("[reasoning]") < out.index("[content]") < out.index("[tool call")
    assert "finish_reason: tool_calls" in out
    assert re.search(r"usage: prompt \d+, completion \d+ tokens", out)
    # streamed, not printed at the end: the reasoning arrived in many reads spread over time
    t_reasoning = [t for t, p in pieces if "[reasoning]" in p][0]
    t_finish = [t for t, p in pieces if "finish_reason" in p][0]
    assert t_finish - t_reasoning > 0.3
    assert sum(1 for t, _ in pieces if t_reasoning <= t <= t_finish) >= 10
    stderr = proc.stderr.read().decode()
    assert "Traceback" not in stderr and "PyTorch" not in stderr  # no noise on the console


def test_demo_keep_running_serves_any_openai_client_and_stops_on_ctrl_c():
    proc = subprocess.Popen([*command(), "demo", "--keep-running", "--token-delay-ms", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out = "".join(p for _, p in read_timed(proc, until="Press Ctrl-C"))
        assert "Press Ctrl-C" in out, out
        url = re.search(r"The proxy is listening on (http://\S+)", out).group(1)
        assert f"OPENAI_BASE_URL={url}/v1" in out
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        model = client.models.list().data[0].id
        reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello"}])
        assert reply.choices[0].finish_reason == "stop"
        assert reply.choices[0].message.content
        assert proc.poll() is None  # still up
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        rest = proc.stdout.read().decode()
        assert "stopping" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
