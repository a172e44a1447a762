"""Record vLLM 0.33's `POST /v1/responses/render` answers (issue 12) as tests/fixtures/oracle/render_responses.json.

Dev tool, never run in CI. Servers (in /root/vllm-oracle; stop them afterwards):
  8111  ./start-render033.sh tiny-qwen3 8111    hermes + qwen3 reasoning + auto tool choice  ("q3-parsers")
  8113  ./start-render033.sh tiny-llama3 8113   llama3_json + auto tool choice              ("l3-parsers")
  8113  ln -sfn tiny-llama3 models/rr-plain-l3; ./start-render033.sh rr-plain-l3 8113 \
            --served-model-name tiny-llama3 --max-model-len 256   no parsers, short context ("l3-256")
The two 8113 servers run one after the other: `record_responses_render.py GROUP...` records only
the groups named (q3, l3, l3-256) and keeps the other groups' cases from the existing file.

Every case is one exchange: `request` (long strings stored as {"$repeat": [text, n]}), optional
`request_headers` / `request_raw`, and vLLM's `status` and `response`. A case where we answer
differently on purpose also has `deviation` (why) and `expected` ({"status", "response"}: our
answer). `expected` is written here by hand for our 400s; where our answer is a 200, it is vLLM's
own answer to `expected_request` (an equivalent request vLLM renders correctly), recorded too.
Render request ids are random (`resp_<16 hex>`) unless the body sets `request_id`.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, http  # noqa: E402
from record_render import call, expand  # noqa: E402

SCRIPT = "tests/oracle/record_responses_render.py"
PATH = "/v1/responses/render"
Q3, L3, L3S = "q3-parsers", "l3-parsers", "l3-256"
PORTS = {Q3: 8111, L3: 8113, L3S: 8113}
L3_KW = {"date_string": "26 Jul 2024"}

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                           "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}
SEARCH = {"type": "function", "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                                "required": ["q"], "additionalProperties": False},
          "strict": True}
NOTE = {"type": "custom", "name": "write_note", "description": "Write a free-form note"}
CRM = {"type": "namespace", "name": "crm", "description": "Customer records", "tools": [
    {"type": "function", "name": "lookup", "description": "Find a customer",
     "parameters": {"type": "object", "properties": {"email": {"type": "string"}}}},
    {"type": "function", "name": "search", "parameters": {"type": "object", "properties": {}}}]}
ASK = "What is the weather in Paris?"
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}
CALL_OUT = {"type": "function_call_output", "call_id": "call_1", "output": "18C, cloudy"}
USER = {"role": "user", "content": ASK}


def invalid_request(message: str, param: str) -> dict[str, Any]:
    """Our 400 body for what vLLM accepts silently (see core/render_responses.py)."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": 400}}


def unsupported_tool(tool_type: str, index: int = 0) -> dict[str, Any]:
    return invalid_request(f"Tool type '{tool_type}' is not supported: this server runs no built-in tools. "
                           "Supported tool types: function, custom, namespace.", f"tools[{index}].type")


class Cases:
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def __call__(self, name: str, server: str, body: Any, description: str = "", *,
                 headers: dict[str, str] | None = None, raw: bytes | None = None, deviation: str | None = None,
                 expected: dict[str, Any] | None = None, expected_request: Any = None) -> None:
        call(self.rec, name, server, PATH, body, description, headers=headers, raw=raw)
        if deviation is None:
            return
        case = self.rec.cases[-1]
        case["deviation"] = deviation
        if expected_request is not None:
            status, resp, _ = http(PORTS[server], PATH, expand(copy.deepcopy(expected_request)))
            assert status == 200, (name, resp)
            case["expected_request"] = expected_request
            expected = {"status": status, "response": resp}
        assert expected is not None, name
        case["expected"] = expected


def record_qwen3(c: Cases) -> None:
    # -- input shapes ---------------------------------------------------------------------
    c("q_string_input", Q3, {"input": ASK}, "a plain string is one user message")
    c("q_model_name", Q3, {"model": "tiny-qwen3", "input": ASK})
    c("q_body_request_id", Q3, {"input": ASK, "request_id": "resp_client-chosen"}, "used as is, no prefix added")
    c("q_header_request_id_ignored", Q3, {"input": ASK}, "vLLM's responses render ignores X-Request-Id",
      headers={"X-Request-Id": "hdr-1"})
    c("q_message_items", Q3, {"input": [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"type": "message", "role": "developer", "content": "Prefer metric units."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"},
                                                         {"type": "input_text", "text": "there"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": ASK}]}, "system / developer / user / assistant items, input_text / output_text")
    c("q_easy_messages", Q3, {"input": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell a joke."}]},
      "role + string content, no type")
    c("q_assistant_output_message_full", Q3, {"input": [
        USER, {"type": "message", "id": "msg_abc", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "Sunny.", "annotations": [], "logprobs": []},
                           {"type": "output_text", "text": "second part (vLLM keeps only the first)"}]},
        {"role": "user", "content": "Thanks"}]}, "an output message as the API returned it; only part 0 is used")
    c("q_assistant_input_text_parts", Q3, {"input": [
        USER, {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "Cloudy."}]},
        {"role": "user", "content": "Thanks"}]}, "assistant with input_text parts: not an output message")
    c("q_assistant_without_type_output_text", Q3, {"input": [
        USER, {"role": "assistant", "content": [{"type": "output_text", "text": "Cloudy."}]}]},
      "output_text parts need type message: without it no union member fits (vLLM's 400)")
    c("q_instructions", Q3, {"instructions": "You are a weather bot.", "input": ASK})
    c("q_instructions_and_system_item", Q3, {"instructions": "Top rule.", "input": [
        {"role": "system", "content": "Second rule."}, USER]}, "two system messages: the template sees both")
    c("q_empty_instructions", Q3, {"instructions": "", "input": ASK}, "empty instructions add no message")
    c("q_empty_string_input", Q3, {"input": ""})
    c("q_unicode", Q3, {"instructions": "Réponds en français ✓", "input": [
        {"role": "user", "content": "Ünïcödé ✓ — 你好，世界 🎉👩‍👩‍👧 العربية \u200b tab\there\nnew line \\n \"quotes\""}]})
    c("q_stream", Q3, {"input": ASK, "stream": True}, "output_kind 1; no stream_options")
    # -- tool calls and reasoning in the history -------------------------------------------
    c("q_function_call_roundtrip", Q3, {"input": [USER, CALL, CALL_OUT], "tools": [WEATHER]},
      "function_call + function_call_output become an assistant tool call and a tool message")
    c("q_parallel_calls_history", Q3, {"input": [
        {"role": "user", "content": "Paris and Tokyo?"}, CALL,
        {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\": \"東京\"}"},
        CALL_OUT, {"type": "function_call_output", "call_id": "call_2", "output": "22C"}], "tools": [WEATHER]},
      "consecutive calls merge into one assistant message")
    c("q_function_call_full_item", Q3, {"input": [
        USER, {**CALL, "id": "fc_1", "status": "completed"}, {**CALL_OUT, "id": "fco_1", "status": "completed"},
        {"role": "user", "content": "And tomorrow?"}], "tools": [WEATHER]}, "items as the API returned them")
    c("q_function_call_output_parts", Q3, {"input": [
        USER, CALL, {"type": "function_call_output", "call_id": "call_1",
                     "output": [{"type": "input_text", "text": "18C"}, {"type": "input_text", "text": "cloudy"}]}],
        "tools": [WEATHER]}, "a tool output given as input_text parts")
    c("q_message_then_call", Q3, {"input": [
        USER, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        CALL, CALL_OUT], "tools": [WEATHER]}, "a call after assistant text joins that message")
    c("q_reasoning_history", Q3, {"input": [
        {"role": "user", "content": "2+2?"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Simple arithmetic."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]},
        {"role": "user", "content": "3+3?"}]}, "reasoning then text: one assistant message with reasoning")
    c("q_reasoning_summary_only", Q3, {"input": [
        {"role": "user", "content": "2+2?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Add them."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]},
        {"role": "user", "content": "3+3?"}]}, "without content the first summary text is the reasoning")
    c("q_reasoning_then_call", Q3, {"input": [
        USER, {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Need the tool."}]},
        CALL, CALL_OUT], "tools": [WEATHER]}, "reasoning and a call form one assistant turn")
    c("q_reasoning_after_message", Q3, {"input": [
        {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "late reasoning"}]},
        {"role": "user", "content": "3+3?"}]}, "reasoning after the text still joins that assistant message")
    c("q_encrypted_reasoning", Q3, {"input": [
        USER, {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA..."}]})
    c("q_continue_final_message", Q3, {"input": [
        {"role": "user", "content": "Write a haiku."},
        {"type": "message", "role": "assistant", "status": "incomplete",
         "content": [{"type": "output_text", "text": "Autumn moonlight -"}]}]},
      "a last assistant message that is incomplete is continued (no generation prompt)")
    c("q_continue_in_progress_dict", Q3, {"input": [
        {"role": "user", "content": "Write a haiku."},
        {"type": "message", "role": "assistant", "status": "in_progress", "content": "Autumn moonlight -"}]})
    c("q_custom_tool_history", Q3, {"input": [
        {"role": "user", "content": "Note this."},
        {"type": "custom_tool_call", "call_id": "call_9", "name": "write_note", "input": "buy milk ✓"},
        {"type": "custom_tool_call_output", "call_id": "call_9", "output": "saved"}], "tools": [NOTE]},
      "a custom tool call is the shim function call with {\"input\": ...} arguments")
    c("q_namespace_call_history", Q3, {"input": [
        {"role": "user", "content": "Find bob"},
        {"type": "function_call", "call_id": "call_3", "namespace": "crm", "name": "lookup",
         "arguments": "{\"email\": \"bob@x.org\"}"},
        {"type": "function_call_output", "call_id": "call_3", "output": "found"}], "tools": [CRM]},
      "a namespaced call is replayed under its flat crm__lookup name")
    c("q_tool_call_bad_arguments", Q3, {"input": [
        USER, {**CALL, "arguments": "not json"}, CALL_OUT], "tools": [WEATHER]})
    # -- tools -----------------------------------------------------------------------------
    c("q_tools_auto", Q3, {"input": ASK, "tools": [WEATHER, SEARCH]}, "tool_choice defaults to auto")
    c("q_tools_auto_explicit_not_strict", Q3, {"input": ASK, "tools": [WEATHER], "tool_choice": "auto"})
    c("q_tools_strict_auto", Q3, {"input": ASK, "tools": [SEARCH]}, "a strict tool under auto gets a structural tag")
    c("q_tool_choice_none", Q3, {"input": ASK, "tools": [WEATHER], "tool_choice": "none"})
    c("q_tool_choice_required", Q3, {"input": ASK, "tools": [WEATHER, SEARCH], "tool_choice": "required"})
    c("q_tool_choice_named", Q3, {"input": ASK, "tools": [WEATHER, SEARCH],
                                  "tool_choice": {"type": "function", "name": "search"}})
    c("q_parallel_false", Q3, {"input": ASK, "tools": [WEATHER], "parallel_tool_calls": False})
    c("q_parallel_false_required", Q3, {"input": ASK, "tools": [WEATHER, SEARCH], "tool_choice": "required",
                                        "parallel_tool_calls": False})
    c("q_tools_empty_list", Q3, {"input": ASK, "tools": []}, "no tools: tool_choice becomes none")
    c("q_tool_choice_required_no_tools", Q3, {"input": ASK, "tool_choice": "required"})
    c("q_tool_choice_named_no_tools", Q3, {"input": ASK, "tool_choice": {"type": "function", "name": "x"}})
    c("q_tool_choice_named_missing", Q3, {"input": ASK, "tools": [WEATHER],
                                          "tool_choice": {"type": "function", "name": "nope"}})
    c("q_tool_choice_invalid_string", Q3, {"input": ASK, "tools": [WEATHER], "tool_choice": "sometimes"})
    c("q_tools_not_a_list", Q3, {"input": ASK, "tools": 5}, "vLLM's validator calls len() on it")
    c("q_tools_null", Q3, {"input": ASK, "tools": None})
    c("q_tool_choice_null", Q3, {"input": ASK, "tool_choice": None})
    c("q_tool_not_object", Q3, {"input": ASK, "tools": [5]})
    c("q_tool_missing_name", Q3, {"input": ASK, "tools": [{"type": "function", "parameters": {}}]})
    c("q_tool_no_parameters", Q3, {"input": ASK, "tools": [{"type": "function", "name": "ping"}],
                                   "tool_choice": "required"})
    c("q_custom_tool", Q3, {"input": ASK, "tools": [NOTE, WEATHER]}, "a custom tool is shown as a one-string function")
    c("q_custom_tool_named", Q3, {"input": ASK, "tools": [NOTE], "tool_choice": {"type": "custom",
                                                                                 "name": "write_note"}})
    c("q_custom_tool_grammar", Q3, {"input": ASK, "tools": [{**NOTE, "format": {
        "type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]})
    c("q_namespace_tools", Q3, {"input": ASK, "tools": [CRM, WEATHER]}, "namespace functions become crm__<name>")
    c("q_namespace_parameters_not_object", Q3, {"input": ASK, "tools": [
        {**CRM, "tools": [{"type": "function", "name": "f", "parameters": [1, 2]}]}]},
      "vLLM validates the flattened function as a FunctionTool: pydantic's own text, a 400")
    c("q_namespace_named_local", Q3, {"input": ASK, "tools": [CRM],
                                      "tool_choice": {"type": "function", "name": "lookup"}},
      "a local name resolves to the flat crm__lookup")
    c("q_namespace_named_ambiguous", Q3, {"input": ASK, "tools": [CRM, {**CRM, "name": "erp"}],
                                          "tool_choice": {"type": "function", "name": "lookup"}})
    # -- text.format and reasoning --------------------------------------------------------
    c("q_text_format_text", Q3, {"input": ASK, "text": {"format": {"type": "text"}}})
    c("q_text_format_json_object", Q3, {"input": ASK, "text": {"format": {"type": "json_object"}}})
    c("q_text_format_json_schema", Q3, {"input": ASK, "text": {"format": {
        "type": "json_schema", "name": "weather", "strict": True, "schema": {
            "type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}},
        "verbosity": "low"}})
    c("q_text_format_with_tools_parallel_false", Q3, {"input": ASK, "tools": [WEATHER], "parallel_tool_calls": False,
                                                     "text": {"format": {"type": "json_object"}}},
      "auto + a JSON format: the tag is or-ed with the format")
    c("q_text_format_and_structured_outputs", Q3, {"input": ASK, "text": {"format": {"type": "json_object"}},
                                                   "structured_outputs": {"regex": "[a-z]+"}})
    c("q_structured_outputs", Q3, {"input": ASK, "structured_outputs": {"choice": ["yes", "no"]}})
    c("q_text_format_invalid", Q3, {"input": ASK, "text": {"format": {"type": "yaml"}}})
    c("q_reasoning_effort_low", Q3, {"input": ASK, "reasoning": {"effort": "low", "summary": "auto"}})
    c("q_reasoning_effort_none", Q3, {"input": ASK, "reasoning": {"effort": "none"}},
      "effort none turns thinking off")
    c("q_reasoning_effort_vs_kwargs", Q3, {"input": ASK, "reasoning": {"effort": "high"},
                                           "chat_template_kwargs": {"enable_thinking": False}})
    c("q_reasoning_invalid_effort", Q3, {"input": ASK, "reasoning": {"effort": "extreme"}})
    c("q_enable_thinking_false", Q3, {"input": ASK, "chat_template_kwargs": {"enable_thinking": False}})
    c("q_include_reasoning_false", Q3, {"input": ASK, "include_reasoning": False})
    # -- sampling ---------------------------------------------------------------------------
    c("q_every_knob", Q3, {"input": ASK, "temperature": 0.7, "top_p": 0.8, "top_k": 40, "min_p": 0.05,
                           "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
                           "seed": 1234, "stop": ["STOP", "\n\n"], "stop_token_ids": [42, 151643, 42],
                           "ignore_eos": True, "include_stop_str_in_output": True, "skip_special_tokens": True,
                           "spaces_between_special_tokens": False, "logit_bias": {"100": 5, "200": -500},
                           "watermarking": True, "priority": 5, "vllm_xargs": {"a": 1, "b": ["x", 2.5]},
                           "max_output_tokens": 64, "user": "u1", "metadata": {"k": "v"},
                           "service_tier": "flex", "store": False, "safety_identifier": "sid",
                           "prompt_cache_key": "pck", "prompt_cache_retention": "in-memory",
                           "prompt_cache_options": {"mode": "explicit"}, "max_tool_calls": 3,
                           "unknown_field": {"ignored": True}})
    c("q_greedy", Q3, {"input": ASK, "temperature": 0, "top_p": 0.5, "top_k": 5, "min_p": 0.2})
    c("q_tiny_temperature", Q3, {"input": ASK, "temperature": 0.005})
    c("q_stop_string", Q3, {"input": ASK, "stop": "END"})
    c("q_too_many_stop_strings", Q3, {"input": ASK, "stop": ["a", "b", "c", "d", "e"]})
    c("q_temperature_out_of_range", Q3, {"input": ASK, "temperature": 3})
    c("q_presence_penalty_out_of_range", Q3, {"input": ASK, "presence_penalty": 3})
    c("q_max_output_tokens", Q3, {"input": ASK, "max_output_tokens": 100})
    c("q_max_output_tokens_clamped", Q3, {"input": ASK, "max_output_tokens": 40950},
      "more than the room left: the room left")
    c("q_max_output_tokens_over_context", Q3, {"input": ASK, "max_output_tokens": 50000})
    c("q_max_output_tokens_zero", Q3, {"input": ASK, "max_output_tokens": 0})
    c("q_prompt_over_context", Q3, {"input": {"$repeat": ["The quick brown fox jumps over the lazy dog. ", 4200]}},
      "a prompt longer than max_model_len")
    c("q_prompt_over_context_truncation_auto", Q3, {
        "input": {"$repeat": ["The quick brown fox jumps over the lazy dog. ", 4200]}, "truncation": "auto"},
      "truncation auto keeps the last max_model_len - 1 tokens")
    c("q_long_prompt", Q3, {"input": {"$repeat": ["The quick brown fox jumps over the lazy dog. ", 1200]},
                            "max_output_tokens": 100})
    c("q_top_logprobs_included", Q3, {"input": ASK, "top_logprobs": 5, "include": ["message.output_text.logprobs"]})
    c("q_top_logprobs_not_included", Q3, {"input": ASK, "top_logprobs": 5}, "without include no logprobs are asked")
    c("q_logprobs_zero_included", Q3, {"input": ASK, "include": ["message.output_text.logprobs"]})
    c("q_top_logprobs_null", Q3, {"input": ASK, "top_logprobs": None, "include": ["message.output_text.logprobs"]})
    c("q_include_invalid", Q3, {"input": ASK, "include": ["output_text.everything"]})
    c("q_cache_salt", Q3, {"input": ASK, "cache_salt": "salt-123"})
    c("q_cache_salt_invalid", Q3, {"input": ASK, "cache_salt": "a/b"})
    c("q_cache_salt_empty", Q3, {"input": ASK, "cache_salt": ""})
    c("q_metadata_user", Q3, {"input": ASK, "metadata": {"session": "abc", "n": "1"}, "user": "user-42"},
      "metadata and user are echoed by the front door, not rendered")
    c("q_metadata_not_strings", Q3, {"input": ASK, "metadata": {"n": 1}})
    c("q_kv_transfer", Q3, {"input": ASK, "kv_transfer_params": {"do_remote_decode": True},
                            "ec_transfer_params": {"x": 1}}, "hoisted to the top level")
    c("q_reused_prompt_ids", Q3, {"input": ASK, "kv_transfer_params": {
        "prompt_token_ids": [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198], "remote_host": "h"}})
    c("q_reused_prompt_ids_invalid", Q3, {"input": ASK, "kv_transfer_params": {"prompt_token_ids": [1, -2]}})
    # -- refusals ---------------------------------------------------------------------------
    c("q_previous_response_id", Q3, {"input": ASK, "previous_response_id": "resp_123"})
    c("q_previous_response_id_unknown_model", Q3, {"input": ASK, "previous_response_id": "resp_123",
                                                   "model": "other"}, "the model is checked first")
    c("q_model_unknown", Q3, {"model": "gpt-5", "input": ASK})
    c("q_untrusted_template", Q3, {"input": ASK, "chat_template_kwargs": {"chat_template": "{{ 1 }}"}})
    c("q_mm_processor_kwargs", Q3, {"input": ASK, "mm_processor_kwargs": {"num_crops": 4}})
    c("q_background_without_store", Q3, {"input": ASK, "background": True, "store": False})
    c("q_prompt_template", Q3, {"input": ASK, "prompt": {"id": "pmpt_1"}})
    # -- invalid shapes ----------------------------------------------------------------------
    c("q_missing_input", Q3, {"model": "tiny-qwen3"})
    c("q_input_not_list", Q3, {"input": 42})
    c("q_empty_input_list", Q3, {"input": []})
    c("q_unknown_item_type", Q3, {"input": [{"type": "foo", "content": "x"}]})
    c("q_item_without_type_or_role", Q3, {"input": [{"content": "x"}]})
    c("q_item_not_object", Q3, {"input": ["hello"]})
    c("q_item_reference", Q3, {"input": [USER, {"type": "item_reference", "id": "msg_123"}]})
    c("q_function_call_missing_arguments", Q3, {"input": [
        USER, {"type": "function_call", "call_id": "call_1", "name": "get_weather"}]})
    c("q_function_call_output_missing_call_id", Q3, {"input": [
        USER, CALL, {"type": "function_call_output", "output": "x"}]})
    c("q_user_role_invalid", Q3, {"input": [{"role": "robot", "content": "x"}]})
    c("q_input_image", Q3, {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": "https://x.org/a.png"}]}]})
    c("q_input_file", Q3, {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}]})
    c("q_not_json", Q3, None, raw=b"{not json")
    c("q_body_array", Q3, [ASK])
    c("q_wrong_content_type", Q3, {"input": ASK}, headers={"Content-Type": "text/plain"})
    # -- deviations: vLLM accepts silently or fails with a 500 ------------------------------
    for tool, label in ((
            {"type": "web_search"}, "web_search"), ({"type": "web_search_preview"}, "web_search_preview"),
            ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "file_search"),
            ({"type": "computer_use_preview", "display_width": 1024, "display_height": 768,
              "environment": "linux"}, "computer_use_preview"),
            ({"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp"}, "mcp"),
            ({"type": "code_interpreter", "container": {"type": "auto"}}, "code_interpreter")):
        c(f"q_tool_{label}", Q3, {"input": ASK, "tools": [WEATHER, tool]},
          deviation=f"vLLM 0.33 renders as if the {label} tool were absent (the model never sees it) and answers "
                    "200; we answer 400 naming the supported tool types", expected={
                        "status": 400, "response": unsupported_tool(label, 1)})
    c("q_tool_namespace_custom_member", Q3, {"input": ASK, "tools": [
        {**CRM, "tools": [*CRM["tools"], {"type": "custom", "name": "free"}]}]},
      deviation="vLLM drops a custom tool inside a namespace silently; we answer 400", expected={
          "status": 400, "response": invalid_request(
              "Tool type 'custom' is not supported inside a namespace. Supported tool types in a namespace: "
              "function.", "tools[0].tools[2].type")})
    c("q_tool_choice_allowed_tools", Q3, {"input": ASK, "tools": [WEATHER, SEARCH], "tool_choice": {
        "type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "search"}]}},
      deviation="vLLM ignores the allowed_tools restriction (renders every tool, no constraint); we answer 400",
      expected={"status": 400, "response": invalid_request(
          "tool_choice of type 'allowed_tools' is not supported. Supported: \"none\", \"auto\", \"required\", "
          "or a function or custom tool by name.", "tool_choice")})
    c("q_tool_choice_builtin_type", Q3, {"input": ASK, "tools": [WEATHER], "tool_choice": {"type": "file_search"}},
      deviation="vLLM ignores a tool_choice naming a built-in tool type; we answer 400",
      expected={"status": 400, "response": invalid_request(
          "tool_choice of type 'file_search' is not supported. Supported: \"none\", \"auto\", \"required\", "
          "or a function or custom tool by name.", "tool_choice")})
    c("q_assistant_refusal_history", Q3, {"input": [
        USER, {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
        {"role": "user", "content": "Please?"}]},
      deviation="vLLM 0.33 answers 500 ('ResponseOutputRefusal' object has no attribute 'text'); we render the "
                "refusal text as the assistant's content",
      expected_request={"input": [
          USER, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "I can't."}]},
          {"role": "user", "content": "Please?"}]})
    c("q_assistant_empty_content", Q3, {"input": [
        USER, {"type": "message", "role": "assistant", "content": []}, {"role": "user", "content": "Hello?"}]},
      deviation="vLLM 0.33 answers 500 (list index out of range); we render an empty assistant message",
      expected_request={"input": [USER, {"role": "assistant", "content": ""}, {"role": "user", "content": "Hello?"}]})


def record_llama3(c: Cases) -> None:
    kw = {"chat_template_kwargs": L3_KW}
    c("l_string_input", L3, {"input": ASK, **kw}, "add_special_tokens is on for Responses: the BOS appears twice")
    c("l_instructions", L3, {"instructions": "You are a weather bot.", "input": ASK, **kw})
    c("l_tools_auto", L3, {"input": ASK, "tools": [WEATHER, SEARCH], **kw})
    c("l_tool_choice_required", L3, {"input": ASK, "tools": [WEATHER, SEARCH], "tool_choice": "required", **kw})
    c("l_tool_choice_named", L3, {"input": ASK, "tools": [WEATHER, SEARCH],
                                  "tool_choice": {"type": "function", "name": "get_weather"}, **kw})
    c("l_parallel_false", L3, {"input": ASK, "tools": [WEATHER], "parallel_tool_calls": False, **kw})
    c("l_function_call_roundtrip", L3, {"input": [USER, CALL, CALL_OUT], "tools": [WEATHER], **kw})
    c("l_single_tool_call_limit", L3, {"input": [
        {"role": "user", "content": "Paris and Tokyo?"}, CALL,
        {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"},
        CALL_OUT, {"type": "function_call_output", "call_id": "call_2", "output": "22C"}], "tools": [WEATHER], **kw},
      "two calls in one assistant turn: the Llama 3 template refuses")
    c("l_text_format_json_schema", L3, {"input": ASK, "text": {"format": {
        "type": "json_schema", "name": "w", "schema": {"type": "object"}}}, **kw})
    c("l_top_logprobs_included", L3, {"input": ASK, "top_logprobs": 3,
                                      "include": ["message.output_text.logprobs"], **kw})
    c("l_reasoning_effort", L3, {"input": ASK, "reasoning": {"effort": "medium"}, **kw},
      "no reasoning parser: no reasoning_parser_kwargs")


def record_llama3_short(c: Cases) -> None:
    kw = {"chat_template_kwargs": L3_KW}
    c("s_string_input", L3S, {"input": ASK, **kw}, "no parsers: no reasoning_parser_kwargs, skip_special_tokens default")
    c("s_tools_auto_without_parser", L3S, {"input": ASK, "tools": [WEATHER], **kw},
      "unlike chat, Responses render does not require --enable-auto-tool-choice for tools")
    c("s_tool_choice_required_without_parser", L3S, {"input": ASK, "tools": [WEATHER], "tool_choice": "required",
                                                     **kw}, "no tool parser: no constraint either")
    c("s_max_output_tokens_fits", L3S, {"input": ASK, "max_output_tokens": 100, **kw})
    c("s_max_output_tokens_clamped", L3S, {"input": ASK, "max_output_tokens": 250, **kw})
    c("s_max_output_tokens_over_context", L3S, {"input": ASK, "max_output_tokens": 300, **kw})
    c("s_prompt_over_context", L3S, {"input": {"$repeat": ["lorem ipsum ", 200]}, **kw})
    c("s_prompt_over_context_chars", L3S, {"input": {"$repeat": ["lorem ipsum ", 20000]}, **kw},
      "far over: the character bound answers first")
    c("s_truncation_auto", L3S, {"input": {"$repeat": ["lorem ipsum ", 200]}, "truncation": "auto", **kw},
      "the prompt keeps its last 255 tokens")
    c("s_truncation_auto_max_output", L3S, {"input": {"$repeat": ["lorem ipsum ", 200]}, "truncation": "auto",
                                            "max_output_tokens": 50, **kw})
    c("s_truncation_null", L3S, {"input": {"$repeat": ["lorem ipsum ", 200]}, "truncation": None, **kw},
      "null is not \"disabled\": it truncates like auto")
    c("s_truncation_auto_short", L3S, {"input": ASK, "truncation": "auto", **kw})


GROUPS = {"q3": (Q3, record_qwen3), "l3": (L3, record_llama3), "l3-256": (L3S, record_llama3_short)}
FLAGS = {Q3: ("tiny-qwen3", ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
                             "--enable-auto-tool-choice"]),
         L3: ("tiny-llama3", ["--tool-call-parser", "llama3_json", "--enable-auto-tool-choice"]),
         L3S: ("tiny-llama3", ["--max-model-len", "256"])}


def main(groups: list[str]) -> None:
    import json

    from oracle_client import FIXTURE_DIR

    rec = Recorder("render_responses", "POST /v1/responses/render answers of vLLM 0.33 (issue 12)", SCRIPT)
    path = FIXTURE_DIR / "render_responses.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"servers": {}, "cases": []}
    cases = Cases(rec)
    for group, (server, record) in GROUPS.items():
        if group in groups:
            model, flags = FLAGS[server]
            rec.server(server, PORTS[server], model, flags)
            record(cases)
        else:  # keep what was recorded before
            if server in old["servers"]:
                rec.servers[server] = old["servers"][server]
            for case in old["cases"]:
                if case["server"] == server:
                    rec.add(case)
    rec.write()


if __name__ == "__main__":
    main(sys.argv[1:] or list(GROUPS))
