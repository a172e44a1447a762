"""The Responses API as agent frameworks use it: the openai-agents SDK's default model
(`OpenAIResponsesModel`) finishing a tool loop with `Runner.run` and `Runner.run_streamed`,
LangChain's `ChatOpenAI(use_responses_api=True)` with `bind_tools`, and `litellm.responses`,
each against the proxy in front of a reference engine with scripted qwen3 reasoning + hermes calls."""

from __future__ import annotations

import os

import pytest

from tests.proxy.frontdoor_stack import PARSERS, Stack
from tests.proxy.test_responses_front import tool_loop

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm fetches a price list otherwise
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(qwen3, tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "responses.db"
    stack = Stack(qwen3, response_store=f"sqlite:///{store}", **PARSERS)
    yield stack
    stack.close()


def _agent(stack: Stack, calls: list[str]):
    from agents import Agent, OpenAIResponsesModel, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """Weather in a city."""
        calls.append(city)
        return "sunny"

    model = OpenAIResponsesModel(model="tiny-qwen3", openai_client=stack.async_client())
    return Agent(name="weather", instructions="Answer with the weather tool.", tools=[get_weather], model=model)


async def test_openai_agents_runner_finishes_a_tool_loop(stack):
    from agents import Runner

    tool_loop(stack)
    calls: list[str] = []
    result = await Runner.run(_agent(stack, calls), "What is the weather in Paris?")
    assert calls == ["Paris"]
    assert result.final_output.strip() == "It is sunny in Paris."


async def test_openai_agents_runner_streamed_finishes_a_tool_loop(stack):
    from agents import Runner

    tool_loop(stack)
    calls: list[str] = []
    result = Runner.run_streamed(_agent(stack, calls), "What is the weather in Paris?")
    kinds = [event.type async for event in result.stream_events()]
    assert calls == ["Paris"] and "raw_response_event" in kinds
    assert result.final_output.strip() == "It is sunny in Paris."


def test_langchain_chat_openai_on_the_responses_api_calls_the_bound_tool(stack):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Weather in a city."""
        return "sunny"

    tool_loop(stack)
    llm = ChatOpenAI(model="tiny-qwen3", base_url=stack.base_url, api_key="unused", use_responses_api=True,
                     max_retries=0)
    message = llm.bind_tools([get_weather]).invoke("What is the weather in Paris?")
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_litellm_responses(stack):
    import litellm

    tool_loop(stack)
    response = litellm.responses(model="openai/tiny-qwen3", input="What is the weather in Paris?",
                                 api_base=stack.base_url, api_key="unused",
                                 tools=[{"type": "function", "name": "get_weather",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])
    calls = [item for item in response.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
