"""DeepSeek V3.2 / V4 / V4.1 through the whole front door: the official openai client -> the proxy
(deepseek_v32 / deepseek_v4 / deepseek_v41 renderer modes and DSML parsers) -> the reference engine and back.
Streamed and non-streamed answers must agree.
"""

from __future__ import annotations

import json

import pytest

from tests.core.parsers.dsml_cases import FAMILIES, block, invoke
from tests.frontier_models import deepseek_model
from tests.proxy.frontdoor_stack import Stack
from tests.proxy.frontier_derender import stream_chat

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
MESSAGES = [{"role": "user", "content": "Weather in Hangzhou for 3 days?"}]
FLAGS = {"v32": {"tool_call_parser": "deepseek_v32", "reasoning_parser": "deepseek_v3"},
         "v4": {"tool_call_parser": "deepseek_v4", "reasoning_parser": "deepseek_v4"},
         "v41": {"tool_call_parser": "deepseek_v41", "reasoning_parser": "deepseek_v41"}}


@pytest.fixture(scope="module", params=["v32", "v4", "v41"])
def stack(request):
    model = deepseek_model(request.param)
    stack = Stack(model, enable_auto_tool_choice=True, served_model_name=[model.name], **FLAGS[request.param])
    stack.version = request.param
    yield stack
    stack.close()


def test_reasoning_then_a_call(stack):
    f = FAMILIES[stack.version]
    thinking = {"chat_template_kwargs": {"thinking": True}}
    stack.set_replies(["I need the weather tool.</think>\n\n"
                       + block(f, invoke(f, "get_weather", {"city": "杭州", "days": 3}))])
    client = stack.client()
    model = deepseek_model(stack.version).name
    answer = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, extra_body=thinking)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.model_extra["reasoning"] == "I need the weather tool."
    [call] = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "杭州", "days": 3})
    streamed = stream_chat(client, model=model, messages=MESSAGES, tools=TOOLS, extra_body=thinking)
    assert (streamed[1], streamed[3]) == ("I need the weather tool.", "tool_calls")
    assert [(c["name"], c["arguments"]) for c in streamed[2]] == [("get_weather", call.function.arguments)]
    assert streamed[0] == choice.message.content  # whitespace before the call: dropped both ways
    prompt = deepseek_model(stack.version).tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert prompt.startswith("<｜begin▁of▁sentence｜>") and prompt.endswith("<｜Assistant｜><think>")
    assert f["open"].replace("<", "\"<", 1) in prompt  # the tools section names the block


def test_plain_answer(stack):
    stack.set_replies(["Sunny all week."])
    client = stack.client()
    model = deepseek_model(stack.version).name
    nothink = {"chat_template_kwargs": {"thinking": False}}
    answer = client.chat.completions.create(model=model, messages=MESSAGES, extra_body=nothink)
    assert answer.choices[0].message.content == "Sunny all week."
    assert stream_chat(client, model=model, messages=MESSAGES, extra_body=nothink) == ("Sunny all week.", None, [], "stop")
