"""POST /v1/messages in front of the real `vllm serve --tokens-only` (vLLM 0.32, tiny-qwen3, random
weights), with the anthropic SDK.

Skipped unless the oracle engine answers on 127.0.0.1:8201 (`cd ~/vllm-oracle && ./start-engine.sh
tiny-qwen3 8201`). The weights are random, so the text is noise; with temperature 0 it is the same
noise every time, which lets the tests check that `messages.create` and `messages.stream` agree
(thinking, text, tools), that a stop sequence cuts where the text says it should, and that the
engine saw the prompt count_tokens counts. A forced tool call needs structured outputs, which a
tokens-only engine refuses: its 400 reaches the client in Anthropic's shape.
The noise these weights make is the one vLLM recorded in tests/fixtures/oracle/serve_messages_*.json.
"""

from __future__ import annotations

import anthropic
import pytest

from tests.proxy.frontdoor_stack import PARSERS
from tests.proxy.test_messages_front import comparable
from tests.proxy.test_openai_oracle import OracleStack, alone_on_the_engine, oracle_marks  # noqa: F401 (autouse)

ORACLE_ENGINE = "http://127.0.0.1:8201"
MODEL = "tiny-qwen3"
USER = [{"role": "user", "content": "Say something."}]
GREEDY = {"temperature": 0}  # the SDK has no sampling parameters any more: sent as extra body fields
SET_UNIT = {"name": "set_unit", "description": "Pick a unit", "input_schema": {
    "type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["unit"]}}


pytestmark = oracle_marks(ORACLE_ENGINE)


@pytest.fixture(scope="module")
def stack(qwen3):
    s = OracleStack(qwen3, ORACLE_ENGINE, **PARSERS)
    yield s
    s.close()


def client(stack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key="unused", max_retries=0, timeout=120)


def both(stack, **request) -> anthropic.types.Message:
    c = client(stack)
    created = c.messages.create(model=MODEL, extra_body=GREEDY, **request)
    with c.messages.stream(model=MODEL, extra_body=GREEDY, **request) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert comparable(final) == comparable(created)
    assert text == "".join(b.text for b in created.content if b.type == "text")
    return created


def test_thinking_by_default(stack):
    message = both(stack, max_tokens=24, messages=USER)
    assert message.content[0].type == "thinking" and message.content[0].thinking
    assert (message.stop_reason, message.usage.output_tokens) == ("max_tokens", 24)
    assert message.usage.input_tokens == 11  # vLLM's recorded prompt length for this request


def test_text_and_a_stop_sequence(stack):
    off = {"type": "disabled"}
    message = both(stack, max_tokens=24, messages=USER, thinking=off)
    (block,) = message.content
    assert block.type == "text" and message.stop_reason == "max_tokens" and message.usage.input_tokens == 15
    words = block.text.split()
    assert words, block.text
    stop = words[min(2, len(words) - 1)]
    cut = both(stack, max_tokens=24, messages=USER, thinking=off, stop_sequences=[stop])
    assert (cut.stop_reason, cut.stop_sequence) == ("stop_sequence", stop)
    assert cut.content[0].text == block.text[:block.text.index(stop)]
    assert cut.usage.output_tokens < 24


def test_tools(stack):
    message = both(stack, max_tokens=40, messages=USER, thinking={"type": "disabled"}, tools=[SET_UNIT])
    assert message.stop_reason in ("max_tokens", "end_turn", "tool_use")


def test_a_forced_call_is_the_engines_400_in_anthropic_shape(stack):
    """A forced call needs structured outputs, which a tokens-only vLLM 0.32 engine refuses (it has no
    tokenizer): its 400 reaches the client as an Anthropic error, streamed or not."""
    c = client(stack)
    request = dict(model=MODEL, max_tokens=40, messages=USER, tools=[SET_UNIT], tool_choice={"type": "any"})
    with pytest.raises(anthropic.BadRequestError) as err:
        c.messages.create(**request)
    assert err.value.body["error"]["type"] == "invalid_request_error"
    assert "Structured outputs requires a tokenizer" in err.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError):
        with c.messages.stream(**request) as stream:
            stream.get_final_message()


def test_count_tokens_is_what_the_engine_was_sent(stack):
    c = client(stack)
    counted = c.messages.count_tokens(model=MODEL, messages=USER, tools=[SET_UNIT], system="Be brief.")
    created = c.messages.create(model=MODEL, max_tokens=1, messages=USER, tools=[SET_UNIT], system="Be brief.")
    assert counted.input_tokens == created.usage.input_tokens
