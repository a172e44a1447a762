"""`derender-proxy serve --workers 2`: one /metrics for all workers (prometheus-client's multiprocess
mode), whichever worker answers the scrape, after requests spread over both."""

from __future__ import annotations

import glob
import json
import os
import re
import time
import urllib.request

import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from tests.proxy.serve_process import ServeProcess

CHAT = "/v1/chat/completions"
REQUESTS = 24  # each on a new connection: the kernel spreads them over the two workers


def post(url: str, body: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.read()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    req = urllib.request.Request(url + "/metrics", headers={"Connection": "close"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def wait_for_workers(proxy: ServeProcess, count: int = 2) -> set[int]:
    """The pids of the workers once all are listening (/health answers as soon as the first is)."""
    deadline = time.monotonic() + 60
    pids: set[int] = set()
    while len(pids) < count and time.monotonic() < deadline:
        pids = {line["pid"] for line in proxy.log_lines() if line.get("message") == "listening"}
        time.sleep(0.1)
    assert len(pids) == count
    return pids


def chat_requests(samples: dict, status: str = "200") -> float:
    return samples.get(("derender_proxy_requests_total",
                        (("method", "POST"), ("route", CHAT), ("status", status))), 0.0)


def per_worker_chat_requests(directory: str) -> dict[str, float]:
    """Each worker's own count, read from its file (prometheus-client's format) alone."""
    counts = {}
    for path in glob.glob(os.path.join(directory, "counter_*.db")):
        pid = re.search(r"counter_(\d+)\.db", path).group(1)
        total = 0.0
        for metric in MultiProcessCollector.merge([path]):
            for s in metric.samples:
                if s.name == "derender_proxy_requests_total" and s.labels.get("route") == CHAT:
                    total += s.value
        counts[pid] = total
    return counts


@pytest.mark.slow
def test_one_metrics_endpoint_for_two_workers(tmp_path):
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    (metrics_dir / "counter_1.db").write_bytes(b"left over by an earlier run")  # cleared at start
    engine = ServeProcess("--token-delay-ms", "0", tmp_path=tmp_path, subcommand="reference-engine").start()
    proxy = ServeProcess("--workers", "2", "--engine-url", engine.url, "--tool-call-parser", "hermes",
                         "--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--health-check-interval", "0",
                         tmp_path=tmp_path, env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)})
    try:
        pids = wait_for_workers(proxy.start())
        prompt_tokens = completion_tokens = streamed = 0
        for i in range(REQUESTS):
            stream = i % 2 == 1
            status, body = post(proxy.url + CHAT, {
                "model": "Qwen/Qwen3-0.6B", "stream": stream, "max_tokens": 8 + i % 5,
                "stream_options": {"include_usage": True} if stream else None,
                "messages": [{"role": "user", "content": "count " * (1 + i)}]})
            assert status == 200
            if stream:
                streamed += 1
                events = [json.loads(line[6:]) for line in body.decode().splitlines()
                          if line.startswith("data: {")]
                usage = events[-1]["usage"]
            else:
                usage = json.loads(body)["usage"]
            prompt_tokens += usage["prompt_tokens"]
            completion_tokens += usage["completion_tokens"]

        # a stream's request is counted when its handler returns, just after the client read its last
        # byte: wait (bounded) for the last one to land rather than race it
        deadline = time.monotonic() + 20
        by_worker = per_worker_chat_requests(str(metrics_dir))
        while sum(by_worker.values()) < REQUESTS and time.monotonic() < deadline:
            time.sleep(0.05)
            by_worker = per_worker_chat_requests(str(metrics_dir))
        assert set(by_worker) == {str(pid) for pid in pids}
        assert all(count > 0 for count in by_worker.values()), by_worker
        assert sum(by_worker.values()) == REQUESTS

        for _ in range(6):  # each scrape on a new connection: either worker answers, with the same sums
            s = scrape(proxy.url)
            assert chat_requests(s) == REQUESTS
            assert s[("derender_proxy_e2e_request_latency_seconds_count", (("route", CHAT),))] == REQUESTS
            assert s[("derender_proxy_e2e_request_latency_seconds_bucket", (("le", "+Inf"), ("route", CHAT)))] \
                == REQUESTS
            assert s[("derender_proxy_prompt_tokens_total", ())] == prompt_tokens
            assert s[("derender_proxy_generation_tokens_total", ())] == completion_tokens
            assert s[("derender_proxy_time_to_first_token_seconds_count", ())] == streamed
            # the gauge sums the live workers: the scrape being answered is the one request in flight
            assert s[("derender_proxy_requests_in_flight", ())] == 1
            assert s[("derender_proxy_engine_circuit_state", (("engine", engine.url),))] == 0
            assert s[("derender_proxy_engine_outstanding_requests", (("engine", engine.url),))] == 0
    finally:
        proxy.stop()
        engine.stop()
    assert proxy.proc.returncode == 0
    assert not glob.glob(str(metrics_dir / "gauge_live*.db"))  # exited workers leave no live gauges


@pytest.mark.slow
def test_the_supervisor_removes_its_own_metrics_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    proxy = ServeProcess("--workers", "2", tmp_path=tmp_path)
    proxy.env = env
    try:
        wait_for_workers(proxy.start())
        deadline = time.monotonic() + 10
        directory = None
        while directory is None and time.monotonic() < deadline:
            directory = next((line["metrics_dir"] for line in proxy.log_lines() if "metrics_dir" in line), None)
            time.sleep(0.05)
        assert directory and os.path.isdir(directory)
        assert scrape(proxy.url)[("derender_proxy_requests_in_flight", ())] == 1
    finally:
        proxy.stop()
    assert proxy.proc.returncode == 0
    assert not os.path.exists(directory)
