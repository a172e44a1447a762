"""Record vLLM's render answers (issue 2) as golden fixtures under tests/fixtures/oracle/render/.

Dev tool, never run in CI. Writes:
  render/chat.json         POST /v1/chat/completions/render, 200s (Qwen3 + parsers, Qwen3 plain, Llama-3)
  render/completions.json  POST /v1/completions/render, 200s
  render/errors.json       every 4xx of docs/vllm-wire-spec.md §2.1 / 2.2 we reproduce (status + exact body)
  render/tokenize.json     POST /tokenize and /detokenize

Servers (see tests/oracle/README.md):
  8110  vLLM 0.33 render, tiny-qwen3, hermes + qwen3 + --enable-auto-tool-choice   ("q3-parsers")
  8111  vLLM 0.33 render, tiny-qwen3, no parser flags                               ("q3-plain")
  8112  vLLM 0.33 render, tiny-llama3, no parsers, --max-model-len 256             ("l3-256")
  8101  vLLM 0.32 render, tiny-llama3, llama3_json + --enable-auto-tool-choice     ("l3-parsers-032")

Long prompts are stored compactly: a string value {"$repeat": [text, n]} in a request stands for
text * n (see `expand`); the replay test expands it the same way.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import FIXTURE_DIR, Recorder, http  # noqa: E402

SCRIPT = "tests/oracle/record_render.py"
Q3P, Q3, L3, L3P = 8110, 8111, 8112, 8101
CHAT, CMPL = "/v1/chat/completions/render", "/v1/completions/render"
L3_KW = {"date_string": "26 Jul 2024"}


def expand(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$repeat"}:
            text, n = value["$repeat"]
            return text * n
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def call(rec: Recorder, name: str, server: str, path: str, body: Any, description: str = "",
         headers: dict[str, str] | None = None, raw: bytes | None = None) -> None:
    port = rec.servers[server]["port_when_recorded"]
    status, resp, _ = http(port, path, expand(copy.deepcopy(body)), headers=headers, raw=raw)
    case: dict[str, Any] = {"name": name, "server": server, "description": description, "method": "POST",
                            "path": path, "request": body}
    if headers:
        case["request_headers"] = headers
    if raw is not None:
        case["request_raw"] = raw.decode("utf-8", "replace")
    case.update({"status": status, "response": resp})
    rec.add(case)


def servers(rec: Recorder) -> None:
    rec.server("q3-parsers", Q3P, "tiny-qwen3",
               ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3", "--enable-auto-tool-choice"])
    rec.server("q3-plain", Q3, "tiny-qwen3", [])
    rec.server("l3-256", L3, "tiny-llama3", ["--max-model-len", "256"])
    rec.server("l3-parsers-032", L3P, "tiny-llama3", ["--tool-call-parser", "llama3_json",
                                                       "--enable-auto-tool-choice"])


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}, "strict": True}}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
HISTORY = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Weather in Paris and Tokyo?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"東京\", \"unit\": \"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "22C"}, {"type": "text",
                                                                                          "text": "sunny"}]},
    {"role": "user", "content": "Thanks! And London?"},
]
EVERY_KNOB = {
    "temperature": 0.7, "top_p": 0.8, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": 1234, "stop": "STOP", "stop_token_ids": [42, 151643],
    "ignore_eos": True, "min_tokens": 3, "max_completion_tokens": 64, "include_stop_str_in_output": True,
    "skip_special_tokens": True, "spaces_between_special_tokens": False,
    "logit_bias": {"100": 5, "200": -500}, "allowed_token_ids": [1, 2, 3, 100, 200],
    "bad_words": ["foo", "bar", "foo"], "logprobs": True, "top_logprobs": 5, "n": 3,
    "cache_salt": "salt-123", "priority": 5, "return_token_ids": True, "vllm_xargs": {"a": 1, "b": ["x", 2.5]},
    "kv_transfer_params": {"do_remote_decode": True}, "thinking_token_budget": 100,
    "repetition_detection": {"max_pattern_size": 8, "min_pattern_size": 2, "min_count": 3},
    "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}, "stream_interval": 4,
    "watermarking": True, "routed_experts_prompt_start": 5, "user": "u1", "unknown_field": {"ignored": True},
}


def record_chat() -> None:
    rec = Recorder("render_chat", "POST /v1/chat/completions/render answers (200) of vLLM", SCRIPT)
    servers(rec)
    for server in ("q3-parsers", "q3-plain"):
        s = "p" if server == "q3-parsers" else "plain"
        call(rec, f"{s}_simple", server, CHAT, {"messages": USER})
        call(rec, f"{s}_system_multiturn", server, CHAT, {"messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell a joke."}]})
        call(rec, f"{s}_enable_thinking_false", server, CHAT,
             {"messages": USER, "chat_template_kwargs": {"enable_thinking": False}})
        call(rec, f"{s}_tools_none", server, CHAT, {"messages": USER, "tools": [WEATHER], "tool_choice": "none"})
        call(rec, f"{s}_history_tool_results", server, CHAT,
             {"messages": HISTORY, "tools": [WEATHER], "tool_choice": "none" if s == "plain" else "auto"})
        call(rec, f"{s}_every_knob", server, CHAT, {"messages": USER, **EVERY_KNOB})
        call(rec, f"{s}_knobs_prompt_logprobs", server, CHAT, {
            "messages": USER, "prompt_logprobs": 2, "temperature": 1, "top_p": 1, "presence_penalty": 0,
            "max_tokens": 16, "skip_special_tokens": False, "logit_bias": {}, "vllm_xargs": {"k": "v"},
            "ec_transfer_params": {"x": 1}, "kv_transfer_params": {}, "stop_token_ids": None, "stop": None})
        call(rec, f"{s}_long_prompt", server, CHAT, {"messages": [
            {"role": "user", "content": {"$repeat": ["The quick brown fox jumps over the lazy dog. ", 1200]}}],
            "max_tokens": 100})
    # parser server only
    P = "q3-parsers"
    call(rec, "p_tools_auto", P, CHAT, {"messages": USER, "tools": [WEATHER, SEARCH]})
    call(rec, "p_reasoning_effort_none", P, CHAT, {"messages": USER, "reasoning_effort": "none"})
    call(rec, "p_reasoning_effort_high", P, CHAT, {"messages": USER, "reasoning_effort": "high"})
    call(rec, "p_effort_vs_kwargs", P, CHAT, {"messages": USER, "reasoning_effort": "low",
                                               "chat_template_kwargs": {"enable_thinking": False}})
    call(rec, "p_tools_required", P, CHAT, {"messages": USER, "tools": [WEATHER, SEARCH], "tool_choice": "required"})
    call(rec, "p_tools_named", P, CHAT, {"messages": USER, "tools": [WEATHER, SEARCH],
                                         "tool_choice": {"type": "function", "function": {"name": "search"}}})
    call(rec, "p_tools_parallel_false", P, CHAT, {"messages": USER, "tools": [WEATHER], "parallel_tool_calls": False})
    call(rec, "p_history_reasoning_content", P, CHAT, {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Simple arithmetic."},
        {"role": "user", "content": "3+3?"}]})
    call(rec, "p_unicode", P, CHAT, {"messages": [
        {"role": "user", "content": "Ünïcödé ✓ — 你好，世界 🎉👩‍👩‍👧 العربية \u200b tab\there\nnew line \\n \"quotes\""}]})
    call(rec, "p_content_parts", P, CHAT, {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Rule 1."}, {"type": "text", "text": "Rule 2."}]},
        {"role": "user", "content": [{"type": "text", "text": "Part A"}, "Part B", {"type": "text", "text": None}]}]})
    call(rec, "p_empty_text_parts", P, CHAT, {"messages": [
        {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "after empty"}, ""]},
        {"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "r"}]},
        {"role": "user", "content": []}]})
    call(rec, "p_reused_prompt_ids", P, CHAT, {"messages": USER, "kv_transfer_params": {
        "prompt_token_ids": [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198], "remote_host": "h"}})
    call(rec, "p_reused_prompt_ids_only_key", P, CHAT, {"messages": USER, "kv_transfer_params": {
        "prompt_token_ids": [1, 2, 3]}, "max_tokens": 5})
    call(rec, "p_reused_prompt_ids_echo_ignored", P, CHAT, {"messages": USER, "echo": True, "kv_transfer_params": {
        "prompt_token_ids": [1, 2, 3]}})
    call(rec, "p_developer_role", P, CHAT, {"messages": [
        {"role": "developer", "content": "Dev instructions."}, {"role": "user", "content": "Hi"}]})
    call(rec, "p_continue_final_message", P, CHAT, {"messages": [
        {"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn moonlight -"}],
        "continue_final_message": True, "add_generation_prompt": False})
    call(rec, "p_no_generation_prompt", P, CHAT, {"messages": USER, "add_generation_prompt": False})
    call(rec, "p_kwargs_overridden_by_fields", P, CHAT, {"messages": USER, "chat_template_kwargs": {
        "add_generation_prompt": False, "custom_var": 1, "enable_thinking": True}})
    call(rec, "p_greedy", P, CHAT, {"messages": USER, "temperature": 0, "top_p": 0.5, "top_k": 5, "min_p": 0.2})
    call(rec, "p_tiny_temperature", P, CHAT, {"messages": USER, "temperature": 0.005})
    call(rec, "p_include_reasoning_false", P, CHAT, {"messages": USER, "include_reasoning": False})
    call(rec, "p_header_request_id", P, CHAT, {"messages": USER, "request_id": "body-id"},
         headers={"X-Request-Id": "hdr-1"})
    call(rec, "p_body_request_id", P, CHAT, {"messages": USER, "request_id": "my-id-42"})
    call(rec, "p_documents", P, CHAT, {"messages": USER, "documents": [{"title": "Doc", "text": "Paris is sunny."}]})
    call(rec, "p_truncate_prompt_tokens", P, CHAT, {"messages": HISTORY, "truncate_prompt_tokens": 20})
    call(rec, "p_truncate_left", P, CHAT, {"messages": HISTORY, "truncate_prompt_tokens": 20,
                                           "truncation_side": "left"})
    call(rec, "p_token_offsets", P, CHAT, {"messages": USER, "return_token_offsets": True})
    call(rec, "p_model_name", P, CHAT, {"messages": USER, "model": "tiny-qwen3"})
    call(rec, "p_max_tokens_clamped", P, CHAT, {"messages": USER, "max_tokens": 40950})
    call(rec, "p_echo_logprobs", P, CHAT, {"messages": USER, "echo": True, "logprobs": True, "top_logprobs": 2})
    call(rec, "p_stop_list", P, CHAT, {"messages": USER, "stop": ["\n\n", "END OF TEXT"], "max_tokens": 16})
    call(rec, "p_structured_json", P, CHAT, {"messages": USER, "structured_outputs": {"json": {"type": "object"}}})
    call(rec, "p_response_format_schema", P, CHAT, {"messages": USER, "response_format": {
        "type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}})
    call(rec, "p_response_format_object", P, CHAT, {"messages": USER, "response_format": {"type": "json_object"}})
    call(rec, "p_structured_choice_regex", P, CHAT, {"messages": USER, "structured_outputs": {"choice": ["a", "b"]},
                                                     "seed": -1})
    call(rec, "p_stream_no_options", P, CHAT, {"messages": USER, "stream": True})
    call(rec, "p_logprobs_zero", P, CHAT, {"messages": USER, "logprobs": True, "top_logprobs": 0, "n": 1,
                                           "max_tokens": 16, "min_tokens": 0, "top_k": 0})
    call(rec, "p_empty_assistant_tool_calls", P, CHAT, {"messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey", "tool_calls": []},
        {"role": "user", "content": "Bye"}]})
    call(rec, "p_tool_call_bad_arguments", P, CHAT, {"messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}], "tools": [WEATHER]})
    # Llama-3 (0.33, no parsers, max_model_len 256; and 0.32 with llama3_json)
    call(rec, "l3_simple", "l3-256", CHAT, {"messages": USER, "chat_template_kwargs": L3_KW})
    call(rec, "l3_system_tools_none", "l3-256", CHAT, {"messages": [{"role": "system", "content": "Sys."}, *USER],
                                                       "chat_template_kwargs": L3_KW, "max_tokens": 20})
    call(rec, "l3_032_tools_auto", "l3-parsers-032", CHAT, {"messages": USER, "tools": [WEATHER],
                                                            "chat_template_kwargs": L3_KW})
    call(rec, "l3_032_history", "l3-parsers-032", CHAT, {"messages": HISTORY[1:], "tools": [WEATHER],
                                                         "chat_template_kwargs": L3_KW})
    call(rec, "l3_032_add_special_tokens", "l3-parsers-032", CHAT, {"messages": USER, "add_special_tokens": True,
                                                                    "chat_template_kwargs": L3_KW})
    rec.write("render/chat.json")


def record_completions() -> None:
    rec = Recorder("render_completions", "POST /v1/completions/render answers (200) of vLLM", SCRIPT)
    servers(rec)
    for server, s in (("q3-parsers", "p"), ("l3-256", "l3")):
        call(rec, f"{s}_string", server, CMPL, {"prompt": "Once upon a time"})
        call(rec, f"{s}_list_of_strings", server, CMPL, {"prompt": ["Hello", "Bonjour le monde", "你好"]})
        call(rec, f"{s}_token_ids", server, CMPL, {"prompt": [9707, 1879, 0]})
        call(rec, f"{s}_list_of_token_lists", server, CMPL, {"prompt": [[1, 2], [3, 4, 5]], "max_tokens": 5})
        call(rec, f"{s}_echo_logprobs", server, CMPL, {"prompt": "Echo me", "echo": True, "logprobs": 3})
        call(rec, f"{s}_echo_max_tokens_0", server, CMPL, {"prompt": "Echo only", "echo": True, "max_tokens": 0})
        call(rec, f"{s}_null_max_tokens", server, CMPL, {"prompt": "x", "max_tokens": None, "n": 2})
        call(rec, f"{s}_no_special_tokens", server, CMPL, {"prompt": "Hi there", "add_special_tokens": False})
        call(rec, f"{s}_knobs_stream", server, CMPL, {
            "prompt": "Knobs", "stream": True, "stream_options": {"include_usage": True}, "temperature": 1.5,
            "top_p": 0.9, "seed": 5, "stop": ["a", "bcd"], "stop_token_ids": [7, 7, 8], "logprobs": 0,
            "max_tokens": 100, "logit_bias": {"5": 150}, "request_id": "cmp-1"})
        call(rec, f"{s}_truncate", server, CMPL, {"prompt": "one two three four five six seven eight",
                                                  "truncate_prompt_tokens": 3})
        call(rec, f"{s}_truncate_left", server, CMPL, {"prompt": "one two three four five six seven eight",
                                                       "truncate_prompt_tokens": 3, "truncation_side": "left"})
        call(rec, f"{s}_token_offsets", server, CMPL, {"prompt": "Offsets, please!", "return_token_offsets": True})
        call(rec, f"{s}_header_id_multi", server, CMPL, {"prompt": ["a", "b"]}, headers={"X-Request-Id": "h-7"})
    call(rec, "p_long_prompt", "q3-parsers", CMPL, {
        "prompt": {"$repeat": ["lorem ipsum dolor sit amet ", 500]}, "max_tokens": 10})
    rec.write("render/completions.json")


def record_errors() -> None:
    rec = Recorder("render_errors", "Error answers (status + body) of vLLM's render endpoints", SCRIPT)
    servers(rec)
    P = "q3-parsers"
    e = lambda name, body, server=P, path=CHAT, **kw: call(rec, name, server, path, body, **kw)  # noqa: E731
    e("unknown_model", {"messages": USER, "model": "nope"})
    e("stream_options_without_stream", {"messages": USER, "stream_options": {"include_usage": True}})
    e("tools_empty", {"messages": USER, "tools": []})
    e("tool_choice_without_tools", {"messages": USER, "tool_choice": "auto"})
    e("tool_choice_named_unknown", {"messages": USER, "tools": [WEATHER],
                                    "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    e("tool_choice_invalid", {"messages": USER, "tools": [WEATHER], "tool_choice": "sometimes"})
    e("tool_choice_named_no_name", {"messages": USER, "tools": [WEATHER],
                                    "tool_choice": {"type": "function", "function": {}}})
    e("continue_and_generation_prompt", {"messages": USER, "continue_final_message": True})
    e("top_logprobs_without_logprobs", {"messages": USER, "top_logprobs": 2})
    e("prompt_logprobs_with_stream", {"messages": USER, "prompt_logprobs": 1, "stream": True})
    e("cache_salt_bad_chars", {"messages": USER, "cache_salt": "a/b"})
    e("cache_salt_empty", {"messages": USER, "cache_salt": ""})
    e("untrusted_template", {"messages": USER, "chat_template": "{{ messages }}"})
    e("untrusted_template_in_kwargs", {"messages": USER, "chat_template_kwargs": {"chat_template": "x"}})
    e("beam_search", {"messages": USER, "use_beam_search": True})
    e("greedy_n2", {"messages": USER, "temperature": 0, "n": 2})
    e("max_tokens_too_big", {"messages": USER, "max_tokens": 50000})
    e("max_completion_tokens_too_big", {"messages": USER, "max_completion_tokens": 50000})
    e("temperature_too_high", {"messages": USER, "temperature": 3})
    e("top_p_zero", {"messages": USER, "top_p": 0})
    e("min_tokens_gt_max", {"messages": USER, "min_tokens": 10, "max_tokens": 5})
    e("presence_penalty_range", {"messages": USER, "presence_penalty": 5})
    e("repetition_penalty_zero", {"messages": USER, "repetition_penalty": 0})
    e("top_k_bad", {"messages": USER, "top_k": -5})
    e("min_p_bad", {"messages": USER, "min_p": 2})
    e("max_tokens_zero", {"messages": USER, "max_tokens": 0})
    e("stop_empty_string", {"messages": USER, "stop": [""]})
    e("too_many_stops", {"messages": USER, "stop": ["a", "b", "c", "d", "e"]})
    e("logit_bias_bad_key", {"messages": USER, "logit_bias": {"abc": 1}})
    e("stream_interval_zero", {"messages": USER, "stream_interval": 0})
    e("thinking_budget_bad", {"messages": USER, "thinking_token_budget": -3})
    e("messages_missing", {})
    e("messages_empty", {"messages": []})
    e("n_wrong_type", {"messages": USER, "n": "two"})
    e("seed_too_big", {"messages": USER, "seed": 2**63})  # (orjson reads ints >= 2**64 as floats)
    e("structured_outputs_empty", {"messages": USER, "structured_outputs": {}})
    e("structured_outputs_two", {"messages": USER, "structured_outputs": {"json": {}, "regex": "a"}})
    e("response_format_schema_missing", {"messages": USER, "response_format": {"type": "json_schema"}})
    e("image_part_text_model", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://example.com/x.png"}}]}]})
    e("template_raise_exception", {"messages": [{"role": "assistant", "content": "x"},
                                                {"role": "system", "content": "late system"}]})
    e("continue_final_no_content", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant"}],
                                    "continue_final_message": True, "add_generation_prompt": False})
    e("auto_without_parser", {"messages": USER, "tools": [WEATHER]}, server="q3-plain")
    e("required_without_parser", {"messages": USER, "tools": [WEATHER], "tool_choice": "required"}, server="q3-plain")
    e("named_without_parser", {"messages": USER, "tools": [WEATHER],
                               "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
      server="q3-plain")
    e("prompt_too_long_l3", {"messages": [{"role": "user", "content": {"$repeat": ["word ", 300]}}],
                             "chat_template_kwargs": L3_KW}, server="l3-256")
    e("max_tokens_gt_len_l3", {"messages": USER, "max_tokens": 300, "chat_template_kwargs": L3_KW}, server="l3-256")
    e("truncate_gt_len_l3", {"messages": USER, "truncate_prompt_tokens": 300, "chat_template_kwargs": L3_KW},
      server="l3-256")
    e("bad_content_type", None, raw=b'{"messages": []}', headers={"Content-Type": "text/plain"})
    e("invalid_json", None, raw=b'{"messages": [', headers={"Content-Type": "application/json"})
    e("list_body", [1, 2])
    # completions
    e("reused_ids_empty", {"messages": USER, "kv_transfer_params": {"prompt_token_ids": []}})
    e("reused_ids_bad", {"messages": USER, "kv_transfer_params": {"prompt_token_ids": [1, True, -2]}})
    e("reused_ids_out_of_vocab", {"messages": USER, "kv_transfer_params": {"prompt_token_ids": [1, 151936]}})
    e("reused_ids_too_long_l3", {"messages": USER, "kv_transfer_params": {"prompt_token_ids": [9906] * 300},
                                 "chat_template_kwargs": L3_KW}, server="l3-256")
    e("cmpl_suffix", {"prompt": "a", "suffix": "b"}, path=CMPL)
    e("cmpl_echo_suffix", {"prompt": "a", "suffix": "b", "echo": True}, path=CMPL)
    e("cmpl_no_prompt", {"max_tokens": 5}, path=CMPL)
    e("cmpl_empty_prompt", {"prompt": ""}, path=CMPL)
    e("cmpl_unknown_model", {"prompt": "a", "model": "other"}, path=CMPL)
    e("cmpl_empty_list", {"prompt": []}, path=CMPL)
    e("cmpl_negative_token", {"prompt": [1, -2]}, path=CMPL)
    e("cmpl_logprobs_negative", {"prompt": "a", "logprobs": -3}, path=CMPL)
    e("cmpl_stream_options", {"prompt": "a", "stream_options": {"include_usage": True}}, path=CMPL)
    e("cmpl_prompt_too_long_l3", {"prompt": {"$repeat": ["word ", 300]}}, server="l3-256", path=CMPL)
    e("cmpl_token_prompt_too_long_l3", {"prompt": [5] * 300}, server="l3-256", path=CMPL)
    e("cmpl_max_tokens_gt_len_l3", {"prompt": "hi", "max_tokens": 257}, server="l3-256", path=CMPL)
    e("cmpl_greedy_n3", {"prompt": "a", "n": 3, "temperature": 0}, path=CMPL)
    e("cmpl_prompt_embeds", {"prompt_embeds": "AAAA"}, path=CMPL)
    e("cmpl_logprob_token_ids_without_logprobs", {"prompt": "a", "logprob_token_ids": [1]}, path=CMPL)
    rec.write("render/errors.json")


def record_tokenize() -> None:
    rec = Recorder("render_tokenize", "POST /tokenize and /detokenize answers of vLLM", SCRIPT)
    servers(rec)
    P = "q3-parsers"
    call(rec, "tok_prompt", P, "/tokenize", {"prompt": "hello world"})
    call(rec, "tok_prompt_strs", P, "/tokenize", {"prompt": "héllo 世界", "return_token_strs": True,
                                                  "add_special_tokens": False})
    call(rec, "tok_messages", P, "/tokenize", {"messages": USER})
    call(rec, "tok_messages_tools", P, "/tokenize", {"messages": USER, "tools": [WEATHER],
                                                     "add_generation_prompt": False})
    call(rec, "tok_messages_empty_tools", P, "/tokenize", {"messages": USER, "tools": []})
    call(rec, "tok_l3_prompt", "l3-256", "/tokenize", {"prompt": "hello world", "return_token_strs": True})
    call(rec, "tok_l3_long_no_limit", "l3-256", "/tokenize", {"prompt": {"$repeat": ["word ", 300]}})
    call(rec, "tok_unknown_model", P, "/tokenize", {"prompt": "a", "model": "x"})
    call(rec, "tok_empty", P, "/tokenize", {})
    call(rec, "tok_untrusted_template", P, "/tokenize", {"messages": USER, "chat_template": "x"})
    call(rec, "detok", P, "/detokenize", {"tokens": [151644, 872, 198, 6023, 151645, 198]})
    call(rec, "detok_unicode", P, "/detokenize", {"tokens": [108386, 3837, 99489, 6313, 11162, 236, 231]})
    call(rec, "detok_out_of_vocab", P, "/detokenize", {"tokens": [999999999]})
    call(rec, "detok_negative", P, "/detokenize", {"tokens": [-1]})
    call(rec, "detok_l3", "l3-256", "/detokenize", {"tokens": [128000, 9906, 1917]})
    rec.write("render/tokenize.json")


if __name__ == "__main__":
    (FIXTURE_DIR / "render").mkdir(parents=True, exist_ok=True)
    record_chat()
    record_completions()
    record_errors()
    record_tokenize()
