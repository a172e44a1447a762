"""core.render_responses: what the front door builds on (the wire answers are in the oracle replay,
tests/proxy/test_responses_render_oracle.py).

* `prior_items` (a stored previous response's items) render exactly as the same items sent inline;
  stored items survive a JSON round trip (`dump_item` -> `validate_items`);
* the chat-equivalent request renders, through the chat render, to the same token ids and the same
  engine constraint as the Responses render (the front door derenders with it);
* namespace and custom tools map back from the model's flat names (`ToolNames`);
* whatever items and fields a client sends, render answers or raises a RequestError (hypothesis).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.errors import RequestError
from core.protocol.chat import ChatCompletionRequest
from core.protocol.responses import ResponsesRequest, validate_items
from core.render import RenderOptions, render_chat
from core.render_responses import conversation, dump_item, render_responses

PARSERS = RenderOptions.build(tool_call_parser="hermes", reasoning_parser="qwen3", enable_auto_tool_choice=True)
PLAIN = RenderOptions.build()
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
STRICT = {"type": "function", "name": "search", "strict": True,
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
CRM = {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
    {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]}
NOTE = {"type": "custom", "name": "note"}
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Use the tool."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 18C."}]},
]
# the output items of a finished response, as the front door builds and stores them
STORED_OUTPUT = [
    {"id": "rs_1", "type": "reasoning", "summary": [], "status": None,
     "content": [{"type": "reasoning_text", "text": "Again the tool."}]},
    {"id": "fc_1", "type": "function_call", "call_id": "call_2", "name": "get_weather", "namespace": None,
     "arguments": "{\"city\": \"Lyon\"}", "status": "completed"},
]


def req(**body) -> ResponsesRequest:
    return ResponsesRequest.model_validate(body)


def ids(model, options, request, **kw) -> list[int]:
    return render_responses(model, options, request, **kw).generate_request["token_ids"]


# -- previous_response_id: prior items ----------------------------------------------------


def test_prior_items_render_as_the_same_items_inline(qwen3):
    follow_up = {"role": "user", "content": "And in Lyon?"}
    inline = req(input=[*HISTORY, follow_up], tools=[WEATHER], instructions="Be brief.")
    continued = req(input=[follow_up], tools=[WEATHER], instructions="Be brief.")
    got = ids(qwen3, PARSERS, continued, prior_items=validate_items(HISTORY))
    assert got == ids(qwen3, PARSERS, inline)
    # the prior items really are in the prompt (not silently dropped)
    assert len(got) > len(ids(qwen3, PARSERS, continued)) + 20


def test_prior_items_before_a_string_input(qwen3):
    inline = req(input=[*HISTORY, {"role": "user", "content": "Thanks"}])
    continued = req(input="Thanks")
    assert ids(qwen3, PARSERS, continued, prior_items=validate_items(HISTORY)) == ids(qwen3, PARSERS, inline)


def test_instructions_do_not_carry_over(qwen3):
    """Only the new request's instructions are rendered; earlier ones are not items."""
    messages = conversation(req(input="next", instructions="New rule."), validate_items(HISTORY))
    assert [m["content"] for m in messages if m["role"] == "system"] == ["New rule."]


def test_stored_items_survive_a_json_round_trip(qwen3):
    validated = validate_items([*HISTORY, *STORED_OUTPUT])
    stored = json.loads(orjson.dumps([dump_item(item) for item in validated]))
    again = validate_items(stored)
    request = req(input="And now?")
    assert conversation(request, again) == conversation(request, validated)
    # the stored output's reasoning and call stay one assistant turn after the history
    last_assistant = conversation(request, again)[-2]
    assert last_assistant["role"] == "assistant"
    assert last_assistant["reasoning"] == "Again the tool."
    assert last_assistant["tool_calls"][0]["function"] == {"name": "get_weather",
                                                           "arguments": "{\"city\": \"Lyon\"}"}


def test_invalid_stored_items_are_a_validation_error():
    with pytest.raises(ValidationError):
        validate_items([{"type": "no_such_item"}])


# -- the chat-equivalent request -----------------------------------------------------------


CHAT_TWINS = [
    # (responses body, the chat body a client would send for the same thing)
    ({"input": "Hi"}, {"messages": [{"role": "user", "content": "Hi"}]}),
    ({"input": HISTORY[:5], "tools": [WEATHER], "instructions": "Sys."},
     {"messages": [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "Checking.", "reasoning": "Use the tool.", "tool_calls": [
                       {"id": "call_1", "type": "function", "function": {
                           "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "18C"}],
      "tools": [{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}]}),
    ({"input": "Hi", "tools": [WEATHER, STRICT], "tool_choice": "required", "parallel_tool_calls": False},
     {"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required", "parallel_tool_calls": False,
      "tools": [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
                for t in (WEATHER, STRICT)]}),
    ({"input": "Hi", "tools": [STRICT], "tool_choice": {"type": "function", "name": "search"}},
     {"messages": [{"role": "user", "content": "Hi"}], "tool_choice": {"type": "function",
                                                                        "function": {"name": "search"}},
      "tools": [{"type": "function", "function": {k: v for k, v in STRICT.items() if k != "type"}}]}),
    ({"input": "Hi", "reasoning": {"effort": "none"}, "text": {"format": {"type": "json_object"}},
      "include": ["message.output_text.logprobs"], "top_logprobs": 3},
     {"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none",
      "response_format": {"type": "json_object"}, "logprobs": True, "top_logprobs": 3}),
]


@pytest.mark.parametrize("responses_body,chat_body", CHAT_TWINS)
def test_chat_equivalent_renders_like_the_chat_request(qwen3, responses_body, chat_body):
    rendered = render_responses(qwen3, PARSERS, ResponsesRequest.model_validate(responses_body))
    chat_out = render_chat(qwen3, PARSERS, ChatCompletionRequest.model_validate(chat_body))
    ours = rendered.generate_request
    assert ours["token_ids"] == chat_out["token_ids"]  # Qwen3 adds no special tokens: same ids
    for key in ("structured_outputs", "skip_special_tokens", "logprobs", "temperature", "max_tokens"):
        assert ours["sampling_params"].get(key) == chat_out["sampling_params"].get(key), key
    assert ours["reasoning_parser_kwargs"] == chat_out["reasoning_parser_kwargs"]
    # what the derender reads from the chat-equivalent request matches the chat request's parse_context
    context = chat_out["parse_context"]
    chat = rendered.chat
    assert [t.to_template() for t in chat.tools or []] or None == context["tools"]
    tool_choice = chat.tool_choice if isinstance(chat.tool_choice, str) else {
        "function": {"name": chat.tool_choice.function.name}, "type": "function"}
    assert tool_choice == context["tool_choice"]
    assert chat.parallel_tool_calls == context["parallel_tool_calls"]
    assert chat.include_reasoning == context["include_reasoning"]
    assert rendered.chat_template_kwargs == context["chat_template_kwargs"]
    assert chat.history_tool_call_count() == context["history_tool_call_cnt"]
    assert chat.logprobs == bool(chat_body.get("logprobs")) and chat.top_logprobs == chat_body.get("top_logprobs", 0)


def test_llama3_adds_its_bos_twice_unlike_chat(llama3):
    """vLLM tokenizes a Responses prompt with add_special_tokens on (chat: off)."""
    kwargs = {"date_string": "26 Jul 2024"}
    rendered = ids(llama3, PLAIN, req(input="Hi", chat_template_kwargs=kwargs))
    chat = render_chat(llama3, PLAIN, ChatCompletionRequest.model_validate(
        {"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": kwargs}))["token_ids"]
    assert rendered == [128000, *chat]


def test_exclude_tools_when_tool_choice_none(qwen3):
    options = RenderOptions.build(exclude_tools_when_tool_choice_none=True)
    with_tools = req(input="Hi", tools=[WEATHER], tool_choice="none")
    assert ids(qwen3, options, with_tools) == ids(qwen3, options, req(input="Hi"))
    assert ids(qwen3, PLAIN, with_tools) != ids(qwen3, PLAIN, req(input="Hi"))


def test_tool_names_map_flat_names_back(qwen3):
    rendered = render_responses(qwen3, PARSERS, req(input="Hi", tools=[CRM, NOTE, WEATHER]))
    assert [t.function.name for t in rendered.chat.tools] == ["crm__lookup", "note", "get_weather"]
    names = rendered.tool_names
    assert names.resolve("crm__lookup") == ("crm", "lookup")
    assert names.resolve("get_weather") == (None, "get_weather")
    assert names.custom == frozenset({"note"})
    assert rendered.chat.tools[1].function.parameters["required"] == ["input"]


def test_request_id_override_and_default(qwen3):
    request = req(input="Hi", request_id="resp_abc")
    assert render_responses(qwen3, PLAIN, request).generate_request["request_id"] == "resp_abc"
    assert render_responses(qwen3, PLAIN, request, request_id="engine-1").generate_request["request_id"] == "engine-1"


def test_named_tool_choice_sets_the_parser_constraint_on_the_chat_request(qwen3):
    rendered = render_responses(qwen3, PARSERS, req(input="Hi", tools=[WEATHER],
                                                    tool_choice={"type": "function", "name": "get_weather"}))
    structured = rendered.chat.structured_outputs
    assert structured is not None and structured.structural_tag is not None
    tags = json.loads(structured.structural_tag)["format"]["tags"]
    assert {tag["begin"] for tag in tags} == {'<tool_call>\n{"name": "get_weather", "arguments": ',
                                              '<tool_call>{"name": "get_weather", "arguments": '}
    assert rendered.generate_request["sampling_params"]["structured_outputs"] == structured.as_wire()
    assert rendered.chat.skip_special_tokens is False


# -- robustness ----------------------------------------------------------------------------


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
ITEM_TYPES = ["message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
              "custom_tool_call_output", "item_reference", "web_search_call", None]
ITEM = st.fixed_dictionaries(
    {"type": st.sampled_from(ITEM_TYPES)},
    optional={"role": st.sampled_from(["user", "assistant", "system", "developer", "tool"]),
              "content": st.one_of(st.text(max_size=6), st.lists(st.fixed_dictionaries(
                  {"type": st.sampled_from(["input_text", "output_text", "refusal", "input_image", "x"])},
                  optional={"text": st.text(max_size=6), "refusal": st.text(max_size=4)}), max_size=2), JSON),
              "call_id": st.text(max_size=4), "name": st.sampled_from(["get_weather", "note", "crm__lookup", ""]),
              "namespace": st.sampled_from(["crm", None]), "arguments": st.sampled_from(["{}", "{\"a\": 1}", "x"]),
              "output": st.one_of(st.text(max_size=6), JSON), "input": st.text(max_size=4),
              "status": st.sampled_from(["completed", "incomplete", "in_progress"]),
              "summary": st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": st.text(max_size=4)}),
                                  max_size=1),
              "encrypted_content": st.sampled_from([None, "", "e"]), "id": st.text(max_size=4)})
FIELDS = sorted(set(ResponsesRequest.model_fields) - {"input"})
TOOLS = st.lists(st.sampled_from([WEATHER, STRICT, CRM, NOTE, {"type": "web_search"}]), max_size=3)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(ITEM, max_size=4), tools=TOOLS, overrides=st.dictionaries(st.sampled_from(FIELDS), JSON,
                                                                                   max_size=3),
       options=st.sampled_from([PLAIN, PARSERS]))
def test_render_answers_or_raises_a_request_error(qwen3, items, tools, overrides, options):
    body = {"input": items, "tools": tools, **overrides}
    try:
        request = ResponsesRequest.model_validate(body)
    except (ValidationError, RequestError):
        return
    try:
        rendered = render_responses(qwen3, options, request)
    except RequestError as exc:
        assert 400 <= exc.status < 500
        return
    orjson.dumps(rendered.generate_request)
    assert rendered.generate_request["token_ids"]


# -- the plain-message fast path of `input` validation -------------------------------------------

_ROLE = st.one_of(st.sampled_from(["user", "assistant", "system", "developer", "tool", "User", ""]),
                  st.lists(st.text(max_size=2), max_size=1), st.none())
_CONTENT = st.one_of(st.text(max_size=8), st.lists(st.fixed_dictionaries({"type": st.just("input_text"),
                                                                         "text": st.text(max_size=4)}), max_size=1),
                     st.integers(), st.none())
_ITEM = st.dictionaries(st.sampled_from(["role", "content", "type", "id", "status"]),
                        st.one_of(_ROLE, _CONTENT, st.sampled_from(["message", "function_call", "completed"])),
                        max_size=4)

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_ITEM, st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "developer", "tool", "User", ""]), "content": st.text()},
    optional={"type": st.sampled_from(["message", "function_call", "input_text"]), "id": st.just("m")})),
    min_size=1, max_size=3))
def test_plain_messages_validate_as_the_union_does(items):
    """The fast path for text messages gives what the union of item types gives (the same items
    followed by one with list content take the union, item by item), and what the union refuses
    is refused."""
    def validated(values: list[Any]) -> Any:
        try:
            out = ResponsesRequest.model_validate({"model": "m", "input": values}).input
        except ValidationError:
            return "refused"
        return [v if isinstance(v, dict) else v.model_dump() for v in out]

    with_list_item = validated([*json.loads(json.dumps(items)),
                                {"role": "user", "content": [{"type": "input_text", "text": "x"}]}])
    expected = with_list_item if with_list_item == "refused" else with_list_item[:-1]
    assert validated(items) == expected
