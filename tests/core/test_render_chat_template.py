"""Chat templates: our sandbox renders exactly what transformers' apply_chat_template renders.

vLLM renders through transformers, so transformers (installed here) is the reference for the
environment; vLLM's message preprocessing and kwargs rules are covered by the recorded render
answers (tests/proxy/test_render_oracle.py), and the unit tests below pin the rules one by one.
"""

from __future__ import annotations

import copy

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from core.chat_template import build_conversation, developer_to_system, load_template, render
from core.errors import RequestError
from core.protocol.chat import ChatCompletionRequest
from core.render import RenderOptions, render_chat

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@pytest.fixture(scope="module")
def hf_tokenizers(model_dirs):
    return {name: AutoTokenizer.from_pretrained(str(model_dirs[name])) for name in ("qwen3", "llama3")}


def message_strategy():
    plain = st.builds(lambda role, text: {"role": role, "content": text},
                      st.sampled_from(["user", "assistant", "system"]), TEXT)
    call = st.builds(lambda text, city: {"role": "assistant", "content": text, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}]},
        TEXT, TEXT)
    result = st.builds(lambda text: {"role": "tool", "tool_call_id": "c1", "content": text}, TEXT)
    reasoning = st.builds(lambda text, why: {"role": "assistant", "content": text, "reasoning_content": why},
                          TEXT, TEXT)
    return st.lists(st.one_of(plain, call, result, reasoning), min_size=1, max_size=6)


def hf_render(tok, conversation, tools, kwargs):
    try:
        return tok.apply_chat_template(copy.deepcopy(conversation), tools=tools, tokenize=False, **kwargs)
    except jinja2.TemplateError as exc:
        return ("error", str(exc))


def our_render(model, conversation, tools, kwargs):
    template = load_template(model.tokenizer.chat_template)
    try:
        return render(template, copy.deepcopy(conversation), tools=tools, kwargs=dict(kwargs),
                      special_tokens=model.tokenizer.special_tokens_map)
    except RequestError as exc:
        return ("error", exc.message)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=message_strategy(), with_tools=st.booleans(), generation_prompt=st.booleans(),
       thinking=st.sampled_from([None, True, False]))
def test_qwen3_template_matches_transformers(qwen3, hf_tokenizers, messages, with_tools, generation_prompt, thinking):
    conversation = build_conversation(messages, "string", "tiny-qwen3")
    kwargs = {"add_generation_prompt": generation_prompt}
    if thinking is not None:
        kwargs["enable_thinking"] = thinking
    tools = [WEATHER] if with_tools else None
    assert our_render(qwen3, conversation, tools, kwargs) == hf_render(hf_tokenizers["qwen3"], conversation, tools,
                                                                      kwargs)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=message_strategy(), with_tools=st.booleans(), generation_prompt=st.booleans())
def test_llama3_template_matches_transformers(llama3, hf_tokenizers, messages, with_tools, generation_prompt):
    conversation = build_conversation(messages, "string", "tiny-llama3")
    kwargs = {"add_generation_prompt": generation_prompt, "date_string": "26 Jul 2024"}
    tools = [WEATHER] if with_tools else None
    assert our_render(llama3, conversation, tools, kwargs) == hf_render(hf_tokenizers["llama3"], conversation, tools,
                                                                       kwargs)


@pytest.mark.parametrize("final", ["Autumn moonlight -", "trailing space ", "line\n"])
def test_continue_final_message_matches_transformers(qwen3, hf_tokenizers, final):
    conversation = build_conversation([{"role": "user", "content": "Haiku?"},
                                       {"role": "assistant", "content": final}], "string", "tiny-qwen3")
    kwargs = {"add_generation_prompt": False, "continue_final_message": True}
    ours = our_render(qwen3, conversation, None, kwargs)
    assert ours == hf_render(hf_tokenizers["qwen3"], conversation, None, kwargs)
    assert ours.rstrip().endswith(final.rstrip())


# -- the environment ----------------------------------------------------------------------


def render_source(source: str, **kwargs):
    return render(load_template(source), [{"role": "user", "content": "x"}], tools=None, kwargs=kwargs,
                  special_tokens={"eos_token": "</s>"})


def test_tojson_keeps_unicode_and_html():
    assert render_source("{{ {'k': '<é>&'} | tojson }}") == '{"k": "<é>&"}'
    assert render_source("{{ [1, 2] | tojson(indent=2) }}") == "[\n  1,\n  2\n]"


def test_raise_exception_is_a_400_with_the_template_message():
    with pytest.raises(RequestError) as info:
        render_source("{{ raise_exception('Only user and assistant roles are supported!') }}")
    assert info.value.status == 400 and info.value.message == "Only user and assistant roles are supported!"


def test_sandbox_refuses_unsafe_attributes():
    with pytest.raises(RequestError) as info:
        render_source("{{ messages.__class__.__mro__ }}")
    assert info.value.status == 400


def test_trim_blocks_loop_controls_generation_tag_like_transformers():
    from transformers.utils.chat_template_utils import _compile_jinja_template

    source = ("{% for m in messages %}\n  {% if loop.first %}{% continue %}{% endif %}{% generation %}"
              "{{ m.content }}{% endgeneration %}\n{% break %}{% endfor %}{{ eos_token }}"
              "{% set ns = namespace(n=0) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}")
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    out = render(load_template(source), messages, tools=None, kwargs={}, special_tokens={"eos_token": "</s>"})
    expected = _compile_jinja_template(source).render(messages=messages, tools=None, documents=None,
                                                      add_generation_prompt=False, eos_token="</s>")
    assert out == expected and "b" in out and "a" not in out


def test_unreferenced_kwargs_are_dropped_and_known_ones_pass():
    template = load_template("{{ custom | default('unset') }}|{{ other | default('unset') }}")
    out = render(template, [{"role": "user", "content": "x"}], tools=None,
                 kwargs={"custom": "yes", "unrelated": 1}, special_tokens={})
    assert out == "yes|unset"


def test_syntax_error_is_a_400():
    with pytest.raises(RequestError):
        load_template("{% for %}")


# -- the conversation -----------------------------------------------------------------------


def test_conversation_normalisation():
    conversation = build_conversation([
        {"role": "system", "content": [{"type": "text", "text": "a"}, "b", {"type": "text", "text": None}]},
        {"role": "user", "content": None, "name": "bob", "extra": 1},
        {"role": "assistant", "content": "c", "reasoning": "why", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
            {"id": "2", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            {"id": "3", "type": "function", "function": {"name": "h", "arguments": "[1]"}}]},
        {"role": "assistant", "content": "d", "tool_calls": []},
        {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}]},
    ], "string", "m")
    assert conversation == [
        {"role": "system", "content": "a\nb"},
        {"role": "user", "content": "", "name": "bob"},
        {"role": "assistant", "content": "c", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
            {"id": "2", "type": "function", "function": {"name": "g", "arguments": {}}},
            {"id": "3", "type": "function", "function": {"name": "h", "arguments": {}}}],
         "reasoning": "why", "reasoning_content": "why"},
        {"role": "assistant", "content": "d"},
        {"role": "tool", "content": "r1\nr2", "tool_call_id": "1"},
    ]


def test_openai_format_keeps_typed_parts():
    conversation = build_conversation([{"role": "user", "content": [{"type": "text", "text": "a", "cache": 1}]}],
                                      "openai", "m")
    assert conversation == [{"role": "user", "content": [{"type": "text", "text": "a", "cache": 1}]}]


def test_request_is_not_mutated_by_argument_parsing():
    messages = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    build_conversation(messages, "string", "m")
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_developer_becomes_system_and_systems_merge():
    converted = developer_to_system([{"role": "user", "content": "u"}, {"role": "developer", "content": "d",
                                                                         "tools": None},
                                     {"role": "system", "content": "s"}])
    assert converted == [{"role": "system", "content": "d\n\ns"}, {"role": "user", "content": "u"}]


def test_media_parts_are_refused_for_text_models():
    with pytest.raises(RequestError) as info:
        build_conversation([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
                           "string", "tiny-qwen3")
    assert info.value.message == "tiny-qwen3 is not a multimodal model"


# -- kwargs precedence (docs/vllm-wire-spec.md §7.1) -------------------------------------------------------------


def test_kwargs_precedence(qwen3):
    options = RenderOptions.build(default_chat_template_kwargs={"enable_thinking": False, "server_only": 1,
                                                                "add_generation_prompt": False})
    request = ChatCompletionRequest.model_validate({
        "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "high",
        "chat_template_kwargs": {"server_only": 2, "add_generation_prompt": False, "unset": None}})
    out = render_chat(qwen3, options, request)
    kwargs = out["parse_context"]["chat_template_kwargs"]
    # server defaults underneath; request kwargs over them; request fields over both; None skipped;
    # reasoning_effort adds enable_thinking only when the request's own kwargs lack it
    assert kwargs == {"enable_thinking": True, "server_only": 2, "add_generation_prompt": True,
                      "cohere_format": "cmd4", "continue_final_message": False, "reasoning_effort": "high"}
    assert out["token_ids"][-3:] != [151668, 271, 271]  # thinking left on: no empty think block

    effort_none = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}],
                                                         "reasoning_effort": "none"})
    prompt = qwen3.tokenizer.decode(render_chat(qwen3, RenderOptions.build(), effort_none)["token_ids"])
    assert prompt.endswith("<think>\n\n</think>\n\n")  # enable_thinking=False from reasoning_effort none


# -- server flags --------------------------------------------------------------------------------


def chat(**fields):
    return ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **fields})


def test_exclude_tools_when_tool_choice_none(qwen3):
    plain = render_chat(qwen3, RenderOptions.build(), chat())
    with_tools = render_chat(qwen3, RenderOptions.build(), chat(tools=[WEATHER], tool_choice="none"))
    excluded = render_chat(qwen3, RenderOptions.build(exclude_tools_when_tool_choice_none=True),
                           chat(tools=[WEATHER], tool_choice="none"))
    assert with_tools["token_ids"] != plain["token_ids"]  # the template lists the tools by default
    assert excluded["token_ids"] == plain["token_ids"]  # with the flag it sees none
    assert excluded["parse_context"]["tools"] == with_tools["parse_context"]["tools"] == [
        {"type": "function", "function": WEATHER["function"]}]


def test_trusted_request_template_is_used(qwen3, hf_tokenizers):
    source = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"
    with pytest.raises(RequestError):
        render_chat(qwen3, RenderOptions.build(), chat(chat_template=source))
    out = render_chat(qwen3, RenderOptions.build(trust_request_chat_template=True), chat(chat_template=source))
    expected = hf_tokenizers["qwen3"].apply_chat_template([{"role": "user", "content": "hi"}], chat_template=source,
                                                          tokenize=False)
    assert out["token_ids"] == qwen3.tokenizer.encode(expected)
    via_kwargs = render_chat(qwen3, RenderOptions.build(trust_request_chat_template=True),
                             chat(chat_template_kwargs={"chat_template": source}))
    assert via_kwargs["token_ids"] == out["token_ids"]


def test_reasoning_effort_map(qwen3):
    options = RenderOptions.build(reasoning_effort_map={"minimal": "none"})
    out = render_chat(qwen3, options, chat(reasoning_effort="minimal"))
    assert out["parse_context"]["chat_template_kwargs"]["reasoning_effort"] == "none"
    assert out["parse_context"]["chat_template_kwargs"]["enable_thinking"] is False
