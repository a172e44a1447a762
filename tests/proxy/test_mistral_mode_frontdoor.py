"""`--tokenizer-mode mistral` through the whole front door: the official openai client -> the proxy
(mistral-common render, Mistral's decoding, the mistral tool parser) -> the reference engine, which
answers with the real `[TOOL_CALLS]` control token, and back. Streamed and non-streamed answers agree.
"""

from __future__ import annotations

import json

import pytest

from core.reference_engine import Reply
from proxy.reference_engine import REFERENCE
from tests.proxy.frontdoor_stack import Stack
from tests.proxy.frontier_derender import stream_chat
from tests.proxy.test_mistral_mode import NAME, mistral_model  # noqa: F401  (the model fixture)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}, "days": {"type": "integer"}}}}}]
MESSAGES = [{"role": "user", "content": "Weather in Paris for 3 days?"}]
CALL = '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]'


@pytest.fixture(scope="module")
def stack(mistral_model):  # noqa: F811
    stack = Stack(mistral_model, tool_call_parser="mistral", enable_auto_tool_choice=True, tokenizer_mode="mistral",
                  served_model_name=[NAME])
    yield stack
    stack.close()


def reply_with_control_token(stack: Stack, text_after: str) -> None:
    """The engine's reply: the `[TOOL_CALLS]` control token (which encoding text never gives) then text."""
    stack.set_replies([text_after])
    tok = stack.model.tokenizer
    ids = (tok.token_to_id("[TOOL_CALLS]"), *tok.encode(text_after))
    for server in stack.engines:
        server.app[REFERENCE].replies.replies = [Reply("[TOOL_CALLS]" + text_after, ids)]


def test_a_tool_call(stack):
    reply_with_control_token(stack, CALL)
    client = stack.client()
    answer = client.chat.completions.create(model=NAME, messages=MESSAGES, tools=TOOLS)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris", "days": 3})
    assert len(call.id) == 9 and call.id.isalnum()  # Mistral's ids
    assert choice.message.content is None
    content, reasoning, calls, finish = stream_chat(client, model=NAME, messages=MESSAGES, tools=TOOLS)
    assert (content, reasoning, finish) == (None, None, "tool_calls")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("get_weather", {"city": "Paris", "days": 3})]
    sent = stack.last_engine_request()
    assert sent["token_ids"][:2] == [1, 5]  # <s>[AVAILABLE_TOOLS]: mistral-common's prompt, not a template's
    assert sent["sampling_params"].get("skip_special_tokens") is False  # the marker must survive decoding


def test_plain_answer_and_history(stack):
    stack.set_replies(["Sunny all week, 東京 too."])
    client = stack.client()
    history = [*MESSAGES, {"role": "assistant", "tool_calls": [{"id": "call_0123456789abcdef", "type": "function",
                                                                "function": {"name": "get_weather",
                                                                             "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "tool_call_id": "call_0123456789abcdef", "content": "sunny"}]
    answer = client.chat.completions.create(model=NAME, messages=history, tools=TOOLS)
    assert answer.choices[0].message.content == "Sunny all week, 東京 too."
    assert stream_chat(client, model=NAME, messages=history, tools=TOOLS) == ("Sunny all week, 東京 too.", None, [],
                                                                              "stop")


def test_mistral_common_refusal_is_a_400(stack):
    import openai

    bad = [*MESSAGES, {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                                            "function": {"name": "get_weather", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "r"}]
    with pytest.raises(openai.BadRequestError, match="Tool call id was call_1 but must be a-z, A-Z, 0-9, with a "
                                                     "length of 9"):
        stack.client().chat.completions.create(model=NAME, messages=bad, tools=TOOLS)
