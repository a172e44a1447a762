"""The front door in front of the real `vllm serve --tokens-only` (vLLM 0.32, tiny-qwen3, random weights).

Skipped unless the oracle engine answers on 127.0.0.1:8200 (see ../shared/oracle). The weights are
random, so the text is noise; with a fixed seed it is the same noise every time, which lets the
tests check that streamed and non-streamed answers agree and that stop strings cut where the text
says they should.
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.proxy.frontdoor_stack import PARSERS, Stack

ORACLE_ENGINE = "http://127.0.0.1:8200"
MESSAGES = [{"role": "user", "content": "Tell me a story."}]


def engine_up(url: str = ORACLE_ENGINE) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def engine_alone(url: str) -> Iterator[None]:
    """Hold the engine for this test against the other test processes (`-n`): greedy answers
    compared across requests are only the same when the engine does not batch them with others
    (its CPU numerics depend on the batch), and the abort tests read its gauges."""
    lock = Path(tempfile.gettempdir()) / f"derender-oracle-{url.rsplit(':', 1)[-1]}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def oracle_marks(url: str) -> list[pytest.MarkDecorator]:
    """A module's marks: `oracle`, skipped unless the engine at `url` answers."""
    return [pytest.mark.oracle,
            pytest.mark.skipif(not engine_up(url), reason=f"vLLM oracle engine not running at {url}")]


pytestmark = oracle_marks(ORACLE_ENGINE)


@pytest.fixture(autouse=True)
def alone_on_the_engine(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test holds its module's engine (its ORACLE_ENGINE); modules that import this get it too."""
    with engine_alone(getattr(request.module, "ORACLE_ENGINE", ORACLE_ENGINE)):
        yield


class OracleStack(Stack):
    """The proxy only; the engine is the real one."""

    def __init__(self, model, engine: str = ORACLE_ENGINE, **config) -> None:
        from proxy.app import create_app
        from proxy.config import ServerConfig
        from tests.proxy.loopback import LoopbackServer

        self.model = model
        self.engines = []
        self.config = ServerConfig(engine_url=[engine], health_check_interval=0, **config)
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


@pytest.mark.parametrize("max_tokens", [0, 6])
def test_completions_stream_echo_logprobs_carry_the_real_prompt_logprobs(stack, qwen3, max_tokens):
    """The tokens-only engine streams no prompt logprobs: the proxy's side request (or, with
    max_tokens 0, its one non-streamed request) must bring the real model's numbers into the first
    echoed chunk, equal to the non-streamed answer's."""
    c = client(stack)
    prompt = "Once upon a time"
    n_prompt = len(qwen3.tokenizer.encode(prompt))
    args = dict(model="tiny-qwen3", prompt=prompt, echo=True, logprobs=2, max_tokens=max_tokens, seed=11)
    full = c.completions.create(**args).choices[0]
    chunks = [ch for ch in c.completions.create(**args, stream=True) if ch.choices]
    first = chunks[0].choices[0]
    assert first.text.startswith(prompt) and "".join(ch.choices[0].text for ch in chunks) == full.text
    streamed, expected = first.logprobs.token_logprobs[:n_prompt], full.logprobs.token_logprobs[:n_prompt]
    assert streamed[0] is None and None not in streamed[1:]
    assert streamed[1:] == pytest.approx(expected[1:], abs=1e-4)
    assert first.logprobs.tokens[:n_prompt] == full.logprobs.tokens[:n_prompt]
