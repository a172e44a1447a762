"""Aborts reach the real `vllm serve --tokens-only` (vLLM 0.32, tiny-qwen3): the GPU is freed.

Skipped unless the oracle engine answers on 127.0.0.1:8201 (`cd ~/vllm-oracle && ./start-engine.sh
tiny-qwen3 8201`). Each request asks for 20000 tokens (minutes of decoding on a CPU), so it can
only end early if the proxy aborts it: a client that leaves a stream of any of the three front
doors, and a stop string (stop sequence) the proxy finds, must each leave the engine idle again
having generated far fewer tokens than were asked for (the engine's own `vllm:num_requests_running`
and `vllm:generation_tokens_total`; vLLM counts no aborted request in `request_success_total`).

The gauges are the engine's, for all its requests: other tests using 8201 at the same time (`-n`)
only add their own short answers' tokens and their wait; a stray long request would show as a
failure, never as a pass.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

import anthropic
import openai
import pytest

from tests.proxy.frontdoor_stack import PARSERS
from tests.proxy.test_openai_oracle import OracleStack, alone_on_the_engine, oracle_marks  # noqa: F401 (autouse)

ORACLE_ENGINE = "http://127.0.0.1:8201"
MODEL = "tiny-qwen3"
LONG = 20000
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
METRIC = re.compile(r'^vllm:(num_requests_running|num_requests_waiting|generation_tokens_total)\{[^}]*\} ([0-9.e+]+)$',
                    re.M)

pytestmark = oracle_marks(ORACLE_ENGINE)


@pytest.fixture(scope="module")
def stack(qwen3):
    s = OracleStack(qwen3, ORACLE_ENGINE, response_store="none", **PARSERS)
    yield s
    s.close()


def engine_metrics() -> dict[str, float]:
    with urllib.request.urlopen(ORACLE_ENGINE + "/metrics", timeout=10) as resp:
        return {name: float(value) for name, value in METRIC.findall(resp.read().decode())}


def generated_until_idle(before: dict[str, float], timeout: float = 300.0) -> float:
    """Wait until the engine runs nothing (an unaborted request would take minutes); the tokens it
    generated since `before`."""
    deadline = time.monotonic() + timeout
    while True:
        now = engine_metrics()
        if now["num_requests_running"] + now["num_requests_waiting"] == 0 or time.monotonic() > deadline:
            return now["generation_tokens_total"] - before["generation_tokens_total"]
        time.sleep(0.05)


def leave_after_first_event(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=60) as resp:
        return resp.readline()  # the connection closes here, with the answer far from done


ROUTES = {
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Talk."}], "max_tokens": LONG},
             b"data: "),
    "responses": ("/v1/responses", {"input": "Talk.", "max_output_tokens": LONG}, b"event: response.created"),
    "messages": ("/v1/messages", {"messages": [{"role": "user", "content": "Talk."}], "max_tokens": LONG},
                 b"event: message_start"),
}


@pytest.mark.parametrize("api", sorted(ROUTES))
def test_a_client_that_leaves_a_stream_aborts_the_engine_request(stack, api):
    path, body, first = ROUTES[api]
    before = engine_metrics()
    line = leave_after_first_event(stack.url + path, {"model": MODEL, "stream": True, "temperature": 0, **body})
    assert line.startswith(first)
    assert generated_until_idle(before) < LONG / 2


# stop strings that sampled noise holds within a few tokens. Not a word of an earlier greedy answer:
# greedy decoding is not the same twice when the engine batches it with other requests (CPU
# numerics), and with random weights it can loop on one token that holds none of these, so the
# answers here are sampled (temperature 1)
COMMON = [" ", "e", "a", "."]


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_found_by_the_proxy_aborts_the_engine_request(stack, stream):
    c = openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0, timeout=120)
    before = engine_metrics()
    answer = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Talk."}], max_tokens=LONG,
                                       temperature=1, stop=COMMON, stream=stream, extra_body=NO_THINKING)
    finish = [choice.finish_reason for chunk in answer for choice in chunk.choices if choice.finish_reason] \
        if stream else [answer.choices[0].finish_reason]
    assert finish == ["stop"]
    assert generated_until_idle(before) < LONG / 2


def test_a_stop_sequence_of_a_message_aborts_the_engine_request(stack):
    c = anthropic.Anthropic(base_url=stack.url, api_key="unused", max_retries=0, timeout=120)
    before = engine_metrics()
    with c.messages.stream(model=MODEL, max_tokens=LONG, messages=[{"role": "user", "content": "Talk."}],
                           thinking={"type": "disabled"}, stop_sequences=COMMON,
                           extra_body={"temperature": 1}) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "stop_sequence" and message.stop_sequence in COMMON
    assert generated_until_idle(before) < LONG / 2
