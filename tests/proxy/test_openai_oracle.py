"""The front door in front of the real `vllm serve --tokens-only` (vLLM 0.32, tiny-qwen3, random weights).

Skipped unless the oracle engine answers on 127.0.0.1:8200 (see ../shared/oracle). The weights are
random, so the text is noise; with a fixed seed it is the same noise every time, which lets the
tests check that streamed and non-streamed answers agree and that stop strings cut where the text
says they should.
"""

from __future__ import annotations

import urllib.request

import openai
import pytest

from tests.proxy.frontdoor_stack import PARSERS, Stack

ORACLE_ENGINE = "http://127.0.0.1:8200"
MESSAGES = [{"role": "user", "content": "Tell me a story."}]


def _engine_up() -> bool:
    try:
        with urllib.request.urlopen(ORACLE_ENGINE + "/health", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


pytestmark = [pytest.mark.oracle, pytest.mark.skipif(not _engine_up(), reason="vLLM oracle engine not running")]


class OracleStack(Stack):
    """The proxy only; the engine is the real one."""

    def __init__(self, model, **config) -> None:
        from proxy.app import create_app
        from proxy.config import ServerConfig
        from tests.proxy.loopback import LoopbackServer

        self.model = model
        self.engines = []
        self.config = ServerConfig(engine_url=[ORACLE_ENGINE], health_check_interval=0, **config)
        self.proxy = LoopbackServer(lambda: create_app(self.config, model)).start()
        self.url = self.proxy.url
        self.base_url = self.url + "/v1"


@pytest.fixture(scope="module")
def stack(qwen3):
    s = OracleStack(qwen3, **PARSERS)
    yield s
    s.close()


def client(stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0, timeout=120)


def stream_text(chunks) -> tuple[str, str, str | None, object]:
    content, reasoning, finish, stop_reason = "", "", None, None
    for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning", None) or ""
            if choice.finish_reason:
                finish, stop_reason = choice.finish_reason, getattr(choice, "stop_reason", None)
    return content, reasoning, finish, stop_reason


def test_chat_stream_equals_non_stream(stack):
    c = client(stack)
    args = dict(model="tiny-qwen3", messages=MESSAGES, max_tokens=12, seed=1234,
                extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    full = c.chat.completions.create(**args)
    assert full.usage.completion_tokens == 12 and full.choices[0].finish_reason == "length"
    chunks = list(c.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    content, reasoning, finish, _ = stream_text(chunks)
    assert content == (full.choices[0].message.content or "")
    assert reasoning == (full.choices[0].message.model_extra.get("reasoning") or "")
    assert finish == "length" and chunks[-1].usage.completion_tokens == 12


def test_chat_n2_and_logprobs(stack):
    r = client(stack).chat.completions.create(model="tiny-qwen3", messages=MESSAGES, max_tokens=5, n=2, seed=7,
                                              logprobs=True, top_logprobs=2)
    assert sorted(ch.index for ch in r.choices) == [0, 1]
    for choice in r.choices:
        assert len(choice.logprobs.content) == 5
        assert all(len(e.top_logprobs) <= 2 for e in choice.logprobs.content)


def test_stop_string_cut_against_real_engine(stack):
    c = client(stack)
    args = dict(model="tiny-qwen3", prompt="Once upon a time", max_tokens=24, seed=99)
    full = c.completions.create(**args).choices[0].text
    assert len(full) > 6
    stop = full[3:6]
    cut = c.completions.create(**args, stop=[stop], stream=True)
    text, finish, stop_reason = "", None, None
    for chunk in cut:
        for choice in chunk.choices:
            text += choice.text
            if choice.finish_reason:
                finish, stop_reason = choice.finish_reason, choice.model_extra.get("stop_reason")
    assert text == full[:full.index(stop)]
    assert (finish, stop_reason) == ("stop", stop)


def test_completions_stream_equals_non_stream(stack):
    c = client(stack)
    args = dict(model="tiny-qwen3", prompt=["Hello", "Bonjour"], max_tokens=6, seed=5)
    full = c.completions.create(**args)
    chunks = list(c.completions.create(**args, stream=True))
    texts: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert texts == {ch.index: ch.text for ch in full.choices}
