"""What the README tells a vLLM user, checked with the real clients: the model-name spellings that
work with the openai-agents SDK when the served name has a slash, and which reasoning parser fits
which Qwen3 checkpoint (an answer without `</think>` under `--reasoning-parser qwen3`)."""

from __future__ import annotations

import json

import pytest

from proxy.model_loader import load_model
from tests.proxy.frontdoor_stack import Stack, post_raw

SLASHED = "Qwen/Qwen3-0.6B"
ANSWER = "Paris is the capital of France."


@pytest.fixture(scope="module")
def stack(model_dirs):
    model = load_model(str(model_dirs["qwen3"]), served_model_names=[SLASHED, "qwen3-0.6b"])
    stack = Stack(model, response_store="none", tool_call_parser="hermes", enable_auto_tool_choice=True)
    yield stack
    stack.close()


@pytest.mark.slow
async def test_openai_agents_model_name_spellings(stack):
    from agents import Agent, MultiProvider, OpenAIResponsesModel, RunConfig, Runner, set_tracing_disabled
    from agents.exceptions import UserError

    set_tracing_disabled(True)
    stack.set_replies([ANSWER] * 3)
    config = RunConfig(model_provider=MultiProvider(openai_client=stack.async_client()))

    async def ask(model) -> str:
        result = await Runner.run(Agent(name="geo", instructions="Answer briefly.", model=model), "Capital of France?",
                                  run_config=config)
        return result.final_output

    with pytest.raises(UserError, match="Unknown prefix: Qwen"):  # the slash read as a provider prefix
        await ask(SLASHED)
    assert await ask("openai/" + SLASHED) == ANSWER  # the SDK strips `openai/`, the proxy gets the real name
    assert await ask("qwen3-0.6b") == ANSWER  # a name without a slash, served as well
    assert await ask(OpenAIResponsesModel(model=SLASHED, openai_client=stack.async_client())) == ANSWER


def chat(url: str, **extra) -> dict:
    status, _, body = post_raw(url + "/v1/chat/completions", {
        "model": "tiny-qwen3", "messages": [{"role": "user", "content": "Capital of France?"}], **extra})
    assert status == 200, body
    return json.loads(body)["choices"][0]["message"]


@pytest.mark.parametrize("flags,request_extra,reasoning,content", [
    # a checkpoint that never thinks, served with the qwen3 parser: all of it is reasoning (as vLLM 0.33)
    ({"reasoning_parser": "qwen3"}, {}, ANSWER, None),
    # the README's advice for such checkpoints: no reasoning parser
    ({}, {}, None, ANSWER),
    # a hybrid Qwen3 with thinking turned off, per request or by default
    ({"reasoning_parser": "qwen3"}, {"chat_template_kwargs": {"enable_thinking": False}}, None, ANSWER),
    ({"reasoning_parser": "qwen3", "default_chat_template_kwargs": {"enable_thinking": False}}, {}, None, ANSWER),
])
def test_which_reasoning_parser_for_which_qwen3(qwen3, flags, request_extra, reasoning, content):
    stack = Stack(qwen3, **flags)
    try:
        stack.set_replies([ANSWER])
        message = chat(stack.url, **request_extra)
        assert (message.get("reasoning"), message["content"]) == (reasoning, content)
        # a thinking checkpoint's answer splits at </think> with the qwen3 parser
        if flags.get("reasoning_parser") and not request_extra and not flags.get("default_chat_template_kwargs"):
            stack.set_replies(["The user asks a capital.</think>" + ANSWER])
            message = chat(stack.url)
            assert (message["reasoning"], message["content"]) == ("The user asks a capital.", ANSWER)
    finally:
        stack.close()
