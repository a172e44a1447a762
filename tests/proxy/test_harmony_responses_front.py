"""gpt-oss on the Responses API through the whole front door: the official openai client -> the
proxy (Harmony render, per-message output items) -> the reference engine (tokens only) and back.

The engine replies with real Harmony token ids (texts encoded with the model's tokenizer, special
tokens recognized). Streamed and non-streamed answers must give the same items; a function call
round trip continues through `previous_response_id` with the stored Harmony messages.
"""

from __future__ import annotations

import json

import openai
import pytest

from tests.frontier_models import gptoss_model
from tests.proxy.frontdoor_stack import Stack

TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather; call the tool.<|end|>"
CALL = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
        '{"city":"東京"}<|call|>')
FINAL = ("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>commentary<|message|>Sure.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>It is sunny in Tokyo.<|return|>")
ASK = "Weather in Tokyo?"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "responses.db"
    stack = Stack(gptoss_model(), response_store=f"sqlite:///{store}", tool_call_parser="openai",
                  reasoning_parser="openai_gptoss", enable_auto_tool_choice=True)
    yield stack
    stack.close()


def shape(items) -> list[dict]:
    """Items without their random ids."""
    out = []
    for item in items:
        data = item if isinstance(item, dict) else item.model_dump(mode="json")
        out.append({k: v for k, v in data.items() if k not in ("id", "call_id")})
    return out


def streamed(client: openai.OpenAI, **request):
    """(events, the final response) of a streamed request."""
    events = list(client.responses.create(stream=True, **request))
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return events, events[-1].response


def check_stream_items(events, final) -> None:
    """Every item of the final response was announced and finished at its index, with its id."""
    added = {e.output_index: e.item.id for e in events if e.type == "response.output_item.added"}
    done = {e.output_index: e.item for e in events if e.type == "response.output_item.done"}
    assert list(added) == list(done) == list(range(len(final.output)))
    for index, item in enumerate(final.output):
        assert added[index] == done[index].id == item.id


def test_reasoning_then_call_streamed_and_not(stack):
    stack.set_replies([ANALYSIS + CALL])
    client = stack.client()
    answer = client.responses.create(model="tiny-gptoss", input=ASK, tools=TOOLS, instructions="Be brief.")
    assert answer.status == "completed" and [i.type for i in answer.output] == ["reasoning", "function_call"]
    reasoning, call = answer.output
    assert reasoning.content[0].text == "The user wants the weather; call the tool."
    assert (call.name, call.arguments, call.status) == ("get_weather", '{"city":"東京"}', "completed")  # raw
    assert call.call_id.startswith("call_") and call.id == "fc_" + call.call_id.removeprefix("call_")
    # reasoning tokens: the analysis text and the call's arguments (vLLM's count)
    assert answer.usage.output_tokens_details.reasoning_tokens > 0
    text = gptoss_model().tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert "# Instructions\n\nBe brief." in text and "type get_weather = (_: {" in text
    assert text.endswith("<|start|>user<|message|>Weather in Tokyo?<|end|><|start|>assistant")
    events, final = streamed(client, model="tiny-gptoss", input=ASK, tools=TOOLS, instructions="Be brief.")
    assert shape(final.output) == shape(answer.output)
    assert final.usage == answer.usage
    check_stream_items(events, final)
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert args == call.arguments


def test_each_message_is_its_own_item(stack):
    """A preamble and a final answer are two message items (chat joins them with "\\n")."""
    stack.set_replies([FINAL])
    client = stack.client()
    answer = client.responses.create(model="tiny-gptoss", input=ASK)
    assert [i.type for i in answer.output] == ["reasoning", "message", "message"]
    assert [i.content[0].text for i in answer.output[1:]] == ["Sure.", "It is sunny in Tokyo."]
    assert answer.output_text == "Sure.It is sunny in Tokyo."
    events, final = streamed(client, model="tiny-gptoss", input=ASK)
    assert shape(final.output) == shape(answer.output)
    check_stream_items(events, final)
    with client.responses.stream(model="tiny-gptoss", input=ASK) as stream:  # the SDK's own accumulation
        rebuilt = stream.get_final_response()
    assert [i.type for i in rebuilt.output] == [i.type for i in answer.output]
    assert rebuilt.output_text == answer.output_text


def test_a_length_cut_leaves_the_last_item_incomplete(stack):
    stack.set_replies([FINAL])
    client = stack.client()
    answer = client.responses.create(model="tiny-gptoss", input=ASK, max_output_tokens=12)
    assert answer.status == "incomplete" and answer.incomplete_details.reason == "max_output_tokens"
    assert answer.output[-1].status == "incomplete"
    events, final = streamed(client, model="tiny-gptoss", input=ASK, max_output_tokens=12)
    assert events[-1].type == "response.incomplete"
    assert shape(final.output) == shape(answer.output)


def test_function_call_round_trip_through_previous_response_id(stack):
    stack.set_replies([ANALYSIS + CALL])
    client = stack.client()
    first = client.responses.create(model="tiny-gptoss", input=ASK, tools=TOOLS)
    call = first.output[-1]
    first_prompt = stack.last_engine_request()["token_ids"]
    stack.set_replies([FINAL])
    second = client.responses.create(model="tiny-gptoss", previous_response_id=first.id, tools=TOOLS, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"temp": 21})}])
    assert second.status == "completed" and second.output[-1].content[0].text == "It is sunny in Tokyo."
    prompt = stack.last_engine_request()["token_ids"]
    assert prompt[:len(first_prompt)] == first_prompt  # the stored history, then the new turn
    text = gptoss_model().tokenizer.decode(prompt[len(first_prompt):])
    assert text == ("<|channel|>analysis<|message|>The user wants the weather; call the tool.<|end|>"
                    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                    '{"city":"東京"}<|call|>'
                    '<|start|>functions.get_weather<|channel|>commentary to=assistant<|message|>{"temp": 21}<|end|>'
                    "<|start|>assistant")
    # streamed, the continuation is stored the same way
    stack.set_replies([ANALYSIS + CALL])
    _, streamed_first = streamed(client, model="tiny-gptoss", input=ASK, tools=TOOLS)
    stack.set_replies([FINAL])
    again = client.responses.create(model="tiny-gptoss", previous_response_id=streamed_first.id, input=[
        {"type": "function_call_output", "call_id": streamed_first.output[-1].call_id, "output": '{"temp": 21}'}])
    assert stack.last_engine_request()["token_ids"] == prompt
    assert again.output[-1].content[0].text == "It is sunny in Tokyo."


def test_an_unknown_call_id_is_a_400(stack):
    stack.set_replies([FINAL])
    with pytest.raises(openai.BadRequestError, match="No call message found for nope"):
        stack.client().responses.create(model="tiny-gptoss", input=[
            {"role": "user", "content": ASK}, {"type": "function_call_output", "call_id": "nope", "output": "x"}])


def test_logprobs_are_refused_as_vllm_refuses_them(stack):
    with pytest.raises(openai.BadRequestError, match="logprobs are not supported with gpt-oss models"):
        stack.client().responses.create(model="tiny-gptoss", input=ASK, include=["message.output_text.logprobs"])


def test_a_text_format_constrains_the_final_channel(stack):
    """vLLM wraps the format in a structural tag around the final channel and clears the request's
    `text`, so the response echoes `text: null`."""
    stack.set_replies(["<|channel|>final<|message|>{\"t\": 21}<|return|>"])
    answer = stack.client().responses.create(model="tiny-gptoss", input=ASK, text={"format": {
        "type": "json_schema", "name": "w", "schema": {"type": "object", "properties": {"t": {"type": "number"}}}}})
    assert answer.output_text == '{"t": 21}' and answer.text is None
    tag = json.loads(stack.last_engine_request()["sampling_params"]["structured_outputs"]["structural_tag"])
    assert tag["format"]["elements"][-1]["elements"][0]["begin"] == "<|channel|>final json<|message|>"


def test_background_response_is_stored_with_its_harmony_history(stack):
    import time

    stack.set_replies([ANALYSIS + CALL])
    client = stack.client()
    queued = client.responses.create(model="tiny-gptoss", input=ASK, tools=TOOLS, background=True)
    deadline = time.monotonic() + 10
    while (done := client.responses.retrieve(queued.id)).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert done.status == "completed" and [i.type for i in done.output] == ["reasoning", "function_call"]
    stack.set_replies([FINAL])
    after = client.responses.create(model="tiny-gptoss", previous_response_id=done.id, input=[
        {"type": "function_call_output", "call_id": done.output[-1].call_id, "output": "21"}])
    assert after.output[-1].content[0].text == "It is sunny in Tokyo."
    text = gptoss_model().tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert text.endswith('{"city":"東京"}<|call|><|start|>functions.get_weather<|channel|>commentary to=assistant'
                         "<|message|>21<|end|><|start|>assistant")


def test_an_unknown_previous_response_is_a_404(stack):
    with pytest.raises(openai.NotFoundError, match="Response with id 'resp_nope' not found."):
        stack.client().responses.create(model="tiny-gptoss", input="hi", previous_response_id="resp_nope")


def test_a_call_to_a_tool_the_model_was_not_given_is_an_mcp_call_and_can_be_continued(stack):
    stack.set_replies(['<|channel|>commentary to=browser.search <|constrain|>json<|message|>{"q":"x"}<|call|>'])
    client = stack.client()
    first = client.responses.create(model="tiny-gptoss", input=ASK, tools=TOOLS)
    [item] = first.output
    assert (item.type, item.server_label, item.name, item.arguments) == ("mcp_call", "browser", "search", '{"q":"x"}')
    stack.set_replies([FINAL])
    after = client.responses.create(model="tiny-gptoss", previous_response_id=first.id, input="Go on.")
    assert after.status == "completed"
    text = gptoss_model().tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert text.endswith('{"q":"x"}<|call|><|start|>user<|message|>Go on.<|end|><|start|>assistant')


def test_enable_response_messages_shows_the_harmony_messages(stack):
    stack.set_replies([FINAL])
    client = stack.client()
    answer = client.responses.create(model="tiny-gptoss", input=ASK, extra_body={"enable_response_messages": True})
    shown = answer.model_extra
    assert [m["role"] for m in shown["input_messages"]] == ["system", "user"]
    assert shown["input_messages"][1]["content"] == [{"type": "text", "text": ASK}]
    assert [(m["channel"], m["content"][0]["text"]) for m in shown["output_messages"]] == [
        ("analysis", "Easy."), ("commentary", "Sure."), ("final", "It is sunny in Tokyo.")]
    _, final = streamed(client, model="tiny-gptoss", input=ASK, extra_body={"enable_response_messages": True})
    assert final.model_extra["output_messages"] == shown["output_messages"]
    plain = client.responses.create(model="tiny-gptoss", input=ASK)
    assert plain.model_extra.get("input_messages") is None


@pytest.mark.slow
async def test_openai_agents_runner_finishes_a_tool_loop(stack):
    """The openai-agents SDK sends the whole conversation back each turn (reasoning and call items
    included) and reads our items: its tool loop ends with the final answer."""
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        calls.append(city)
        return "sunny"

    from tests.proxy.test_responses_front import script

    script(stack, (FINAL, "sunny"), (ANALYSIS + CALL, "weather"))  # the reply by what the prompt holds
    model = OpenAIResponsesModel(model="tiny-gptoss", openai_client=stack.async_client())
    agent = Agent(name="weather", instructions="Use the tool.", tools=[get_weather], model=model)
    result = await Runner.run(agent, ASK)
    assert calls == ["東京"]
    assert result.final_output == "It is sunny in Tokyo."
    text = gptoss_model().tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert "<|start|>functions.get_weather<|channel|>commentary to=assistant<|message|>sunny<|end|>" in text
