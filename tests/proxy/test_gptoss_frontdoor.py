"""gpt-oss through the whole front door: the official openai client -> the proxy (Harmony render,
`openai_gptoss` + `openai` parsers) -> the reference engine (tokens only) and back.

The engine replies with real Harmony token ids (the reply texts below are encoded with the
model's tokenizer, special tokens recognized); streamed and non-streamed answers must agree.
"""

from __future__ import annotations

import json

import pytest

from tests.frontier_models import gptoss_model
from tests.proxy.frontdoor_stack import Stack
from tests.proxy.frontier_derender import stream_chat

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather; call the tool.<|end|>"
CALL = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
        '{"city":"東京"}<|call|>')
FINAL = ("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>commentary<|message|>Sure.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>It is sunny in Tokyo.<|return|>")
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Tokyo?"}]


@pytest.fixture(scope="module")
def stack():
    stack = Stack(gptoss_model(), tool_call_parser="openai", reasoning_parser="openai_gptoss",
                  enable_auto_tool_choice=True)
    yield stack
    stack.close()


def test_tool_call_streamed_and_not(stack):
    stack.set_replies([ANALYSIS + CALL])
    client = stack.client()
    answer = client.chat.completions.create(model="tiny-gptoss", messages=MESSAGES, tools=TOOLS)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.model_extra["reasoning"] == "The user wants the weather; call the tool."
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert call.function.arguments == json.dumps({"city": "東京"})  # vLLM's json.dumps form
    content, reasoning, calls, finish = stream_chat(client, model="tiny-gptoss", messages=MESSAGES, tools=TOOLS)
    assert (content, reasoning, finish) == (None, choice.message.model_extra["reasoning"], "tool_calls")
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_weather", call.function.arguments)]
    assert calls[0]["id"].startswith("chatcmpl-tool-")
    # the engine got the Harmony prompt: system, developer (instructions + tools), user, then assistant
    prompt = stack.last_engine_request()["token_ids"]
    text = gptoss_model().tokenizer.decode(prompt)
    assert text.startswith("<|start|>system<|message|>You are ChatGPT")
    assert "# Instructions\n\nBe brief." in text and "type get_weather = (_: {" in text
    assert text.endswith("<|start|>user<|message|>Weather in Tokyo?<|end|><|start|>assistant")


def test_final_answer_joins_messages_like_vllm(stack):
    stack.set_replies([FINAL])
    client = stack.client()
    answer = client.chat.completions.create(model="tiny-gptoss", messages=MESSAGES)
    message = answer.choices[0].message
    assert message.content == "Sure.\nIt is sunny in Tokyo."  # preamble and final, "\n"-joined
    assert message.model_extra["reasoning"] == "Easy."
    assert answer.choices[0].finish_reason == "stop"
    streamed = stream_chat(client, model="tiny-gptoss", messages=MESSAGES)
    assert streamed == (message.content, "Easy.", [], "stop")


def test_tool_choice_none_drops_the_call_and_required_keeps_it(stack):
    stack.set_replies([ANALYSIS + CALL])
    client = stack.client()
    none = client.chat.completions.create(model="tiny-gptoss", messages=MESSAGES, tools=TOOLS, tool_choice="none")
    assert none.choices[0].message.tool_calls in (None, []) and none.choices[0].finish_reason == "stop"
    required = client.chat.completions.create(model="tiny-gptoss", messages=MESSAGES, tools=TOOLS,
                                              tool_choice="required")
    assert required.choices[0].message.content == ""
    assert required.choices[0].message.tool_calls[0].function.name == "get_weather"
    sent = stack.last_engine_request()["sampling_params"]["structured_outputs"]["structural_tag"]
    assert " to=functions.get_weather<|channel|>commentary json<|message|>" in sent


def test_reasoning_effort_none_is_a_400(stack):
    import openai

    with pytest.raises(openai.BadRequestError, match="Harmony does not support reasoning_effort='none'"):
        stack.client().chat.completions.create(model="tiny-gptoss", messages=MESSAGES, reasoning_effort="none")


def test_stop_strings_end_the_answer_but_do_not_cut_harmony_content(stack):
    """vLLM stops at the token that completes the stop string, and its Harmony parser reads that
    token's whole text (the content is not cut at the string itself)."""
    stack.set_replies([FINAL])
    client = stack.client()
    answer = client.chat.completions.create(model="tiny-gptoss", messages=MESSAGES, stop=["sun"])
    choice = answer.choices[0]
    assert choice.finish_reason == "stop" and choice.model_extra["stop_reason"] == "sun"
    assert choice.message.content == "Sure.\nIt is sunny"
    streamed = stream_chat(client, model="tiny-gptoss", messages=MESSAGES, stop=["sun"])
    assert streamed[0] == choice.message.content
