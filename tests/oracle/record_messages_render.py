"""Record vLLM 0.33's POST /v1/messages/render answers as golden fixtures (render_messages.json).

Dev tool, never run in CI. Servers (start them from /root/vllm-oracle; the symlinked names keep
their log and pid files apart from other users of tiny-qwen3 / tiny-llama3):

  8112  ln -sfn tiny-qwen3 models/msgs-qwen3;
        ./start-render033.sh msgs-qwen3 8112 --served-model-name tiny-qwen3     ("q3-parsers":
        hermes + qwen3 + --enable-auto-tool-choice, added by the script for *qwen3* names)
  8114  ln -sfn tiny-llama3 models/msgs-llama3;
        ./start-render033.sh msgs-llama3 8114 --served-model-name tiny-llama3   ("l3-parsers":
        llama3_json + --enable-auto-tool-choice)

Llama 3.2's template prints today's date unless `date_string` is given: every Llama case passes
`chat_template_kwargs.date_string`. Long prompts use the `{"$repeat": [text, n]}` shorthand of
record_render.py. `tests/proxy/test_messages_render_oracle.py` replays every case through our app.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import record_render  # noqa: E402
from oracle_client import Recorder  # noqa: E402

SCRIPT = "tests/oracle/record_messages_render.py"
PATH = "/v1/messages/render"
Q3, L3 = "q3-parsers", "l3-parsers"
L3_KW = {"date_string": "26 Jul 2024"}

WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                             "unit": {"type": "string", "enum": ["c", "f"]}},
                            "required": ["city"]}}
SEARCH = {"name": "search", "description": "Web search", "input_schema": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOL_HISTORY = [
    {"role": "user", "content": "Weather in Paris and Tokyo?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check both."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {"city": "東京", "unit": "c"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C, cloudy"},
        {"type": "tool_result", "tool_use_id": "toolu_02",
         "content": [{"type": "text", "text": "22C"}, {"type": "text", "text": "sunny"}]}]},
]


def base(server: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "tiny-qwen3" if server == Q3 else "tiny-llama3", "max_tokens": 256}
    if server == L3:
        body["chat_template_kwargs"] = dict(L3_KW)
    body.update(fields)
    return body


def call(rec: Recorder, name: str, server: str, body: Any, description: str = "",
         headers: dict[str, str] | None = None, raw: bytes | None = None) -> None:
    record_render.call(rec, name, server, PATH, body, description, headers, raw)


def record_shapes(rec: Recorder) -> None:
    """200s on Qwen3 (hermes + qwen3): every request shape the issue lists."""
    def c(name: str, description: str = "", headers: dict[str, str] | None = None, **fields: Any) -> None:
        call(rec, name, Q3, base(Q3, **fields), description, headers)

    c("simple", "content as a string", messages=USER)
    c("request_id_header", "X-Request-Id names the request (chatcmpl-<id>)", headers={"X-Request-Id": "msg-test-1"},
      messages=USER)
    c("request_id_header_empty", "an empty X-Request-Id is still used: chatcmpl-", headers={"X-Request-Id": ""},
      messages=USER)
    c("system_string", system="You are terse.", messages=USER)
    c("system_blocks", "text blocks joined with no separator; cache_control ignored",
      system=[{"type": "text", "text": "You are terse. "},
              {"type": "text", "text": "Answer in French.", "cache_control": {"type": "ephemeral"}}],
      messages=USER)
    c("system_billing_header_block", "a system block starting with x-anthropic-billing-header is dropped",
      system=[{"type": "text", "text": "x-anthropic-billing-header: cc_version=1.0; cch=abc123"},
              {"type": "text", "text": "You are Claude Code."}], messages=USER)
    c("system_string_billing_header", "a string system keeps it; the chat layer drops the header line",
      system="x-anthropic-billing-header: cch=1\nYou are Claude Code.", messages=USER)
    c("system_empty_string", system="", messages=USER)
    c("content_blocks", "two text blocks stay a list of parts",
      messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "world"}]}])
    c("content_single_block", "one text block collapses to a string",
      messages=[{"role": "user", "content": [{"type": "text", "text": "Hello",
                                              "cache_control": {"type": "ephemeral"}}]}])
    c("content_empty_text_block", "empty text blocks are skipped",
      messages=[{"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "Hi"}]}])
    c("multi_turn", messages=[{"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello! How can I help?"},
                              {"role": "user", "content": "Tell me a joke."}])
    c("assistant_prefill", "last message from the assistant: rendered as a closed turn plus a new prompt",
      messages=[{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn moon"}])
    c("assistant_prefill_blocks", messages=[{"role": "user", "content": "JSON please"},
                                            {"role": "assistant", "content": [{"type": "text", "text": "{"}]}])
    c("inline_system_message", "a system message inside messages stays in place (the Qwen3 template accepts it)",
      system="Top.", messages=[{"role": "user", "content": "Hi"}, {"role": "system", "content": "Reminder: be kind."},
                               {"role": "user", "content": "Again"}])
    c("inline_system_blocks_billing", messages=[
        {"role": "system", "content": [{"type": "text", "text": "x-anthropic-billing-header: a"},
                                       {"type": "text", "text": "Inline."}]},
        {"role": "user", "content": "Hi"}])
    c("empty_assistant_blocks", "an assistant message without content", messages=[
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": []}, {"role": "user", "content": "Hm?"}])
    c("unicode", messages=[{"role": "user", "content": "Grüße aus 東京 🌸 — ça va? Привет"}],
      system="Réponds en 日本語.")
    # tools
    c("tools_default_choice", "tools without tool_choice: auto", messages=USER, tools=[WEATHER, SEARCH])
    c("tool_choice_auto", messages=USER, tools=[WEATHER], tool_choice={"type": "auto"})
    c("tool_choice_any", "required: hermes structural tag", messages=USER, tools=[WEATHER, SEARCH],
      tool_choice={"type": "any"})
    c("tool_choice_tool", "named: hermes structural tag for one tool", messages=USER, tools=[WEATHER, SEARCH],
      tool_choice={"type": "tool", "name": "search"})
    c("tool_choice_none", messages=USER, tools=[WEATHER], tool_choice={"type": "none"})
    c("tool_choice_auto_no_parallel", "disable_parallel_tool_use: parallel_tool_calls false, single-call tag",
      messages=USER, tools=[WEATHER, SEARCH], tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    c("tool_choice_any_no_parallel", messages=USER, tools=[WEATHER, SEARCH],
      tool_choice={"type": "any", "disable_parallel_tool_use": True})
    c("tool_choice_auto_without_tools", "tool_choice auto without tools: accepted", messages=USER,
      tool_choice={"type": "auto"})
    c("tool_choice_none_without_tools", messages=USER, tool_choice={"type": "none"})
    c("tools_empty_list", "tools [] is accepted and stays [] in parse_context", messages=USER, tools=[])
    c("tool_cache_control_strict", "cache_control on a tool ignored; strict tool: its schema in the auto tag",
      messages=USER, tools=[{**WEATHER, "cache_control": {"type": "ephemeral"}, "strict": True}])
    c("tool_schema_defs", "input_schema with $defs and $ref", messages=USER, tools=[{
        "name": "create_event", "input_schema": {
            "type": "object", "properties": {"when": {"$ref": "#/$defs/time"},
                                             "who": {"type": "array", "items": {"$ref": "#/$defs/person"}}},
            "$defs": {"time": {"type": "string", "format": "date-time"},
                      "person": {"type": "object", "properties": {"name": {"type": "string"}}}}}}],
      tool_choice={"type": "any"})
    c("tool_schema_without_type", "an input_schema without type gets type object", messages=USER,
      tools=[{"name": "ping", "input_schema": {"properties": {}}}])
    c("many_tools", "30 tools", messages=USER, tools=[
        {"name": f"tool_{i}", "description": f"Tool number {i}",
         "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}} for i in range(30)])
    c("tool_addition_removal", "tool_addition / tool_removal blocks in system messages change the tools",
      tools=[WEATHER, SEARCH], messages=[
          {"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "search"}},
                                         {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {
                                             "name": "calc", "input_schema": {"type": "object"}}}}]},
          *USER])
    # tool history
    c("tool_history", "tool_use (unicode input) then tool_result with string and text-block content",
      messages=TOOL_HISTORY, tools=[WEATHER])
    c("tool_result_is_error_and_text", "is_error is not rendered; the user's text follows the tool message",
      tools=[WEATHER], messages=[
          {"role": "user", "content": "Weather?"},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "get_weather",
                                             "input": {"city": "Nowhere"}}]},
          {"role": "user", "content": [
              {"type": "tool_result", "tool_use_id": "toolu_9", "is_error": True,
               "content": [{"type": "text", "text": "city not found", "cache_control": {"type": "ephemeral"}}]},
              {"type": "text", "text": "Try Paris instead."}]}])
    c("tool_result_empty", tools=[WEATHER], messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}])
    c("tool_result_tool_reference", "tool_reference items of a tool_result: a second tool message", tools=[WEATHER],
      messages=[{"role": "user", "content": "Find a tool"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                                                   "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "found"}, {"type": "tool_reference", "tool_name": "get_weather"}]}]}])
    c("tool_result_in_assistant", "an assistant's tool_result becomes 'Tool result: ...' text", messages=[
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x",
                                           "content": [{"type": "text", "text": "r"}]}]},
        {"role": "user", "content": "ok"}])
    # thinking
    c("thinking_enabled", "budget_tokens -> thinking_token_budget", max_tokens=4096, messages=USER,
      thinking={"type": "enabled", "budget_tokens": 2048})
    c("thinking_enabled_display", max_tokens=4096, messages=USER,
      thinking={"type": "enabled", "budget_tokens": 1024, "display": "omitted"})
    c("thinking_disabled", "reasoning_effort none (Qwen3 honours it): enable_thinking false", messages=USER,
      thinking={"type": "disabled"})
    c("thinking_budget_prefill_leg", "do_remote_decode (a P/D prefill leg) skips the budget < max_tokens check",
      max_tokens=1, messages=USER, thinking={"type": "enabled", "budget_tokens": 1024},
      kv_transfer_params={"do_remote_decode": True})
    c("thinking_adaptive", messages=USER, thinking={"type": "adaptive"})
    c("thinking_adaptive_effort", messages=USER, thinking={"type": "adaptive"}, output_config={"effort": "high"})
    c("thinking_disabled_over_effort", "disabled wins over output_config.effort", messages=USER,
      thinking={"type": "disabled"}, output_config={"effort": "max"})
    c("thinking_blocks_in_history", "thinking blocks become the assistant's reasoning; redacted ones vanish",
      messages=[{"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Simple ", "signature": "sig1"},
                    {"type": "redacted_thinking", "data": "AAAA"},
                    {"type": "thinking", "thinking": "arithmetic.", "signature": "sig2"},
                    {"type": "text", "text": "4"}]},
                {"role": "user", "content": "And 3+3?"}])
    c("thinking_then_tool_use_history", tools=[WEATHER], messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "Need the tool.", "signature": "s"},
                                          {"type": "tool_use", "id": "t1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}])
    c("output_format_json_schema", "output_config.format -> response_format json_schema", messages=USER,
      output_config={"format": {"type": "json_schema", "schema": {
          "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
    c("output_format_with_tools_auto", messages=USER, tools=[WEATHER],
      output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}})
    # sampling and extras
    c("sampling_fields", temperature=0.3, top_p=0.8, top_k=5, messages=USER)
    c("sampling_zero_temperature", temperature=0.0, messages=USER)
    c("stop_sequences", stop_sequences=["\n\nHuman:", "END", "停"], messages=USER)
    c("stop_sequences_empty", stop_sequences=[], messages=USER)
    c("metadata", "metadata is ignored", metadata={"user_id": "user-123"}, messages=USER)
    c("stream_true", "stream adds include_usage + continuous_usage_stats", stream=True, messages=USER)
    c("max_tokens_16", "16 is SamplingParams' default: dropped from sampling_params", max_tokens=16, messages=USER)
    c("max_tokens_1", max_tokens=1, messages=USER)
    c("max_tokens_is_max_model_len", max_tokens=40960, messages=USER)
    c("unknown_fields_ignored", "top-level unknown fields and cache_control are ignored", messages=USER,
      service_tier="auto", cache_control={"type": "ephemeral"}, container=None)
    c("vllm_extras", "cache_salt, kv/ec transfer params, vllm_xargs, watermarking", messages=USER,
      cache_salt="salt-1", kv_transfer_params={"do_remote_decode": True}, ec_transfer_params={"x": 1},
      vllm_xargs={"a": 1, "b": ["x", 2.5]}, watermarking=True, mm_payload="none")
    c("chat_template_kwargs_enable_thinking_false", messages=USER, chat_template_kwargs={"enable_thinking": False})
    c("tool_use_without_id", "a tool_use without id gets vLLM's call_<time> id (not rendered by Qwen3)",
      tools=[WEATHER], messages=[
          {"role": "user", "content": "Weather?"},
          {"role": "assistant", "content": [{"type": "tool_use", "name": "get_weather", "input": {"city": "Rome"}}]},
          {"role": "user", "content": [{"type": "tool_result", "content": "warm"}]}])


def record_llama(rec: Recorder) -> None:
    """Llama 3.2 template, llama3_json tools."""
    def c(name: str, description: str = "", **fields: Any) -> None:
        call(rec, name, L3, base(L3, **fields), description)

    c("l3_simple", messages=USER)
    c("l3_system_and_inline_system", "Llama's template takes a later system message: not merged",
      system="Be brief.", messages=[{"role": "user", "content": "Hi"}, {"role": "system", "content": "Inline."},
                                    {"role": "user", "content": "Again"}])
    c("l3_thinking_disabled", "the template ignores reasoning_effort none: vLLM uses low",
      messages=USER, thinking={"type": "disabled"})
    c("l3_thinking_enabled", max_tokens=4096, messages=USER, thinking={"type": "enabled", "budget_tokens": 1024})
    c("l3_tools_auto", messages=USER, tools=[WEATHER, SEARCH])
    c("l3_tool_choice_any", messages=USER, tools=[WEATHER, SEARCH], tool_choice={"type": "any"})
    c("l3_tool_choice_tool", messages=USER, tools=[WEATHER, SEARCH],
      tool_choice={"type": "tool", "name": "get_weather"})
    c("l3_tool_choice_none", messages=USER, tools=[WEATHER], tool_choice={"type": "none"})
    c("l3_tool_history", "two calls in one turn: Llama 3.2's template raises (400)", messages=TOOL_HISTORY,
      tools=[WEATHER])
    c("l3_tool_history_single_call", tools=[WEATHER], messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                                           "input": {"city": "Zürich"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "9C"}]}]}])
    c("l3_assistant_prefill", messages=[{"role": "user", "content": "Count to 3."},
                                        {"role": "assistant", "content": "1, 2,"}])
    c("l3_sampling_stop", temperature=0.9, top_k=40, stop_sequences=["<|eot_id|>", "Observation:"], messages=USER)


def record_errors(rec: Recorder) -> None:
    """Every invalid shape: status + exact body."""
    def e(name: str, body: Any, description: str = "", server: str = Q3, **kw: Any) -> None:
        call(rec, name, server, body, description, **kw)

    b = base(Q3)
    e("err_missing_max_tokens", {"model": "tiny-qwen3", "messages": USER})
    e("err_max_tokens_zero", {**b, "max_tokens": 0, "messages": USER})
    e("err_max_tokens_negative", {**b, "max_tokens": -5, "messages": USER})
    e("err_max_tokens_string", {**b, "max_tokens": "many", "messages": USER})
    e("err_max_tokens_over_max_model_len", {**b, "max_tokens": 40961, "messages": USER})
    e("err_max_tokens_huge", {**b, "max_tokens": 10**12, "messages": USER})
    e("err_missing_model", {"max_tokens": 10, "messages": USER})
    e("err_empty_model", {**b, "model": "", "messages": USER})
    e("err_unknown_model", {**b, "model": "claude-3-5-sonnet", "messages": USER})
    e("err_missing_messages", {**b})
    e("err_messages_not_list", {**b, "messages": "hi"})
    e("err_empty_messages", {**b, "messages": []})
    e("err_only_empty_user_content", {**b, "messages": [{"role": "user", "content": []}]})
    e("err_bad_role", {**b, "messages": [{"role": "tool", "content": "x"}]})
    e("err_missing_content", {**b, "messages": [{"role": "user"}]})
    e("err_content_number", {**b, "messages": [{"role": "user", "content": 42}]})
    e("err_bad_block_type", {**b, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]})
    e("err_block_without_type", {**b, "messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    e("err_block_not_object", {**b, "messages": [{"role": "user", "content": ["hi"]}]})
    e("err_text_not_string", {**b, "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]})
    e("err_tool_use_input_list", {**b, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": [1]}]}]})
    e("err_tool_result_content_number", {**b, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": 3}]}]})
    e("err_tool_result_text_not_string", {**b, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [
            {"type": "text", "text": "ok"}, {"type": "text", "text": None}]}]}]})
    e("err_system_number", {**b, "system": 5, "messages": USER})
    e("err_image_block", {**b, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "What is this?"}]}]}, "text-only model: 400")
    e("err_image_url_block", {**b, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}]}]})
    e("err_image_in_tool_result", {**b, "tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]}]})
    e("err_tool_choice_unknown_tool", {**b, "messages": USER, "tools": [WEATHER],
                                       "tool_choice": {"type": "tool", "name": "search"}})
    e("err_tool_choice_tool_without_name", {**b, "messages": USER, "tools": [WEATHER], "tool_choice": {"type": "tool"}})
    e("err_tool_choice_bad_type", {**b, "messages": USER, "tools": [WEATHER], "tool_choice": {"type": "required"}})
    e("err_tool_choice_string", {**b, "messages": USER, "tools": [WEATHER], "tool_choice": "auto"})
    e("err_tool_without_schema", {**b, "messages": USER, "tools": [{"name": "x"}]})
    e("err_tool_without_name", {**b, "messages": USER, "tools": [{"input_schema": {"type": "object"}}]})
    e("err_server_tool", {**b, "messages": USER, "tools": [{"type": "web_search_20250305", "name": "web_search",
                                                            "max_uses": 3}]}, "server tools have no input_schema")
    e("err_tool_addition_in_user", {**b, "messages": [{"role": "user", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "x"}}]}]})
    e("err_tool_addition_without_tool", {**b, "messages": [{"role": "system", "content": [
        {"type": "tool_addition"}]}, *USER]})
    e("err_tool_removal_definition", {**b, "messages": [{"role": "system", "content": [
        {"type": "tool_removal", "tool": {"type": "tool_definition", "definition": WEATHER}}]}, *USER]})
    e("err_tool_addition_unknown_reference", {**b, "messages": [{"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "nope"}}]}, *USER]})
    e("err_tool_addition_in_top_system", {**b, "system": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "x"}}], "messages": USER})
    e("err_thinking_budget_too_small", {**b, "messages": USER, "thinking": {"type": "enabled", "budget_tokens": 100}})
    e("err_thinking_budget_not_below_max_tokens", {**b, "max_tokens": 2048, "messages": USER,
                                                   "thinking": {"type": "enabled", "budget_tokens": 2048}})
    e("err_thinking_missing_budget", {**b, "messages": USER, "thinking": {"type": "enabled"}})
    e("err_thinking_unknown_type", {**b, "messages": USER, "thinking": {"type": "auto"}})
    e("err_thinking_bad_display", {**b, "messages": USER, "thinking": {"type": "adaptive", "display": "full"}})
    e("err_output_effort_bad", {**b, "messages": USER, "output_config": {"effort": "none"}})
    e("err_too_many_stop_sequences", {**b, "messages": USER, "stop_sequences": ["a", "b", "c", "d", "e"]})
    e("err_stop_sequences_string", {**b, "messages": USER, "stop_sequences": "END"})
    e("err_temperature_negative", {**b, "messages": USER, "temperature": -1})
    e("err_top_p_zero", {**b, "messages": USER, "top_p": 0})
    e("err_top_k_negative", {**b, "messages": USER, "top_k": -3})
    e("err_cache_salt_empty", {**b, "messages": USER, "cache_salt": ""})
    e("err_cache_salt_slash", {**b, "messages": USER, "cache_salt": "a/b"})
    e("err_vllm_xargs_nested", {**b, "messages": USER, "vllm_xargs": {"a": {"b": 1}}})
    e("err_prompt_too_long", {**b, "messages": [{"role": "user", "content": {"$repeat": ["hi ", 41000]}}]})
    e("err_untrusted_chat_template", {**b, "messages": USER, "chat_template_kwargs": {"chat_template": "{{ 1 }}"}})
    e("err_body_list", [b])
    e("err_not_json", None, raw=b"{not json")
    e("err_wrong_content_type", None, raw=b'{"model": "tiny-qwen3"}', headers={"Content-Type": "text/plain"})
    # accepted by vLLM, a 400 here (test_messages_render_oracle.DEVIATIONS)
    e("dev_tool_choice_any_without_tools", {**b, "messages": USER, "tool_choice": {"type": "any"}},
      "vLLM drops the forced choice silently (no tools to force)")
    e("dev_tool_result_image_source_not_object", {**b, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [
            {"type": "image", "source": "https://example.com/a.png"}]}]}]}, "vLLM: a 500 (AttributeError)")
    e("dev_tool_choice_tool_without_tools", {**b, "messages": USER, "tool_choice": {"type": "tool", "name": "x"}},
      "vLLM renders no constraint for a tool that does not exist")
    e("l3_err_tool_choice_unknown_tool", base(L3, messages=USER, tools=[WEATHER],
                                              tool_choice={"type": "tool", "name": "search"}), server=L3)


if __name__ == "__main__":
    rec = Recorder("render_messages", "POST /v1/messages/render answers of vLLM 0.33 (Anthropic Messages API)",
                   SCRIPT)
    rec.server(Q3, 8112, "tiny-qwen3",
               ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3", "--enable-auto-tool-choice"])
    rec.server(L3, 8114, "tiny-llama3", ["--tool-call-parser", "llama3_json", "--enable-auto-tool-choice"])
    record_shapes(rec)
    record_llama(rec)
    record_errors(rec)
    rec.write()
