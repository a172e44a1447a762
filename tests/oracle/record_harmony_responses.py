"""Record vLLM 0.33's `POST /v1/responses/render` for a gpt-oss model (Harmony) as
tests/fixtures/oracle/render_responses_gptoss.json.

Dev tool, never run in CI. Server (in /root/vllm-oracle; VLLM_SYSTEM_START_DATE=2025-06-28 comes
from common.sh; a model name of our own so its pid file is not another recorder's):
  8130  ln -sfn tiny-gptoss models/gptoss-resp; ./start-render033.sh gptoss-resp 8130 --served-model-name tiny-gptoss
        (start-render033.sh adds --tool-call-parser openai --reasoning-parser openai_gptoss
        --enable-auto-tool-choice for a name with "gptoss")

Cases follow record_responses_render.py's form: `request`, vLLM's `status` and `response`; a case
where we answer differently on purpose has `deviation` (why) and `expected` (our answer).
Render request ids are random (`resp_<16 hex>`) unless the body sets `request_id`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder  # noqa: E402
from record_responses_render import (ASK, CALL, CALL_OUT, CRM, NOTE, SEARCH, USER, WEATHER,  # noqa: E402
                                     Cases, invalid_request, unsupported_tool)

SCRIPT = "tests/oracle/record_harmony_responses.py"
GO = "gptoss-parsers"
PORT = 8130
M = "tiny-gptoss"
FLAGS = ["--served-model-name tiny-gptoss", "--tool-call-parser openai", "--reasoning-parser openai_gptoss",
         "--enable-auto-tool-choice"]
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [],
             "content": [{"type": "reasoning_text", "text": "The user wants the weather."}]}
ANSWER = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18C and cloudy."}]}


def record(c: Cases) -> None:
    def case(name: str, body: dict[str, Any], description: str = "", **kw: Any) -> None:
        c(name, GO, {"model": M, **body}, description, **kw)

    # -- input shapes, instructions, effort -------------------------------------------------
    case("string_input", {"input": ASK}, "a string is one user message after the system message")
    case("instructions", {"instructions": "Be brief.", "input": ASK}, "instructions: the developer message")
    case("empty_instructions", {"instructions": "", "input": ASK}, "empty instructions: no developer message")
    case("empty_string_input", {"input": ""}, "an empty user message")
    case("body_request_id", {"input": ASK, "request_id": "resp_mine"})
    case("message_items", {"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"},
                                                         {"type": "input_text", "text": "there"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": ASK}]}, "user parts become one message with two contents; assistant: final")
    case("easy_messages", {"input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                                     {"role": "user", "content": ASK}]}, "role + string content")
    case("system_item_first", {"input": [{"role": "system", "content": "Be brief."}, USER]},
         "no instructions: a leading system item is taken as the instructions")
    case("developer_item_first_parts", {"input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rule A. "},
                                                              {"type": "input_text", "text": "Rule B."}]}, USER]},
         "a leading developer item with parts: joined")
    case("instructions_and_system_item", {"instructions": "Top rule.", "input": [
        {"role": "system", "content": "Second rule."}, USER]}, "with instructions, a system item is a developer message")
    case("system_item_later", {"input": [USER, {"role": "assistant", "content": "Hi"},
                                         {"role": "system", "content": "New rule."}, {"role": "user", "content": "Ok"}]},
         "a system item in the middle: a developer message")
    case("system_item_empty", {"input": [USER, {"role": "system", "content": ""}]}, "an empty system item later: skipped")
    case("unicode", {"instructions": "Réponds en français ✓", "input": "東京の天気は？ 🌧️"})
    for effort in ("low", "medium", "high"):
        case(f"effort_{effort}", {"input": ASK, "reasoning": {"effort": effort}})
    for effort in ("minimal", "none", "xhigh"):
        case(f"effort_{effort}", {"input": ASK, "reasoning": {"effort": effort}}, "not a Harmony effort")
    case("effort_null_summary", {"input": ASK, "reasoning": {"effort": None, "summary": "auto"}})
    case("stream", {"input": ASK, "stream": True})
    case("sampling", {"input": ASK, "max_output_tokens": 7, "temperature": 0.2, "top_p": 0.9, "seed": 3,
                      "stop": ["x"], "top_k": 5})
    case("include_logprobs", {"input": ASK, "include": ["message.output_text.logprobs"], "top_logprobs": 2},
         "render accepts logprobs (the serving path refuses them for gpt-oss)")
    case("chat_template_kwargs", {"input": ASK, "chat_template_kwargs": {"foo": 1}})
    case("untrusted_template", {"input": ASK, "chat_template_kwargs": {"chat_template": "{{ 1 }}"}})
    case("max_output_tokens_over", {"input": ASK, "max_output_tokens": 200000})
    case("truncation_auto", {"input": ASK, "truncation": "auto"})
    # -- tools -------------------------------------------------------------------------------
    case("tools_auto", {"input": ASK, "tools": [WEATHER, SEARCH]}, "function tools: the functions namespace")
    case("tools_instructions", {"instructions": "Be brief.", "input": ASK, "tools": [WEATHER]})
    case("tool_choice_none", {"input": ASK, "tools": [WEATHER], "tool_choice": "none"})
    case("tool_choice_required", {"input": ASK, "tools": [WEATHER, SEARCH], "tool_choice": "required"})
    case("tool_choice_named", {"input": ASK, "tools": [WEATHER, SEARCH],
                               "tool_choice": {"type": "function", "name": "get_weather"}})
    case("parallel_false", {"input": ASK, "tools": [WEATHER], "parallel_tool_calls": False})
    case("strict_tool_auto", {"input": ASK, "tools": [SEARCH]}, "a strict tool: the call tag in auto")
    case("text_format_json_schema", {"input": ASK, "text": {"format": {
        "type": "json_schema", "name": "w", "schema": {"type": "object", "properties": {"t": {"type": "number"}}}}}})
    case("text_format_json_object", {"input": ASK, "text": {"format": {"type": "json_object"}}})
    case("tools_and_text_format", {"input": ASK, "tools": [SEARCH], "text": {"format": {"type": "json_object"}}})
    case("custom_tool", {"input": ASK, "tools": [NOTE]}, "a custom tool: Harmony's developer message refuses it")
    case("namespace_tool", {"input": ASK, "tools": [CRM]}, "a namespace: Harmony's developer message refuses it")
    # -- history -----------------------------------------------------------------------------
    case("function_call_roundtrip", {"input": [USER, CALL, CALL_OUT], "tools": [WEATHER]},
         "function_call: a commentary call (legacy header); its output: a functions.NAME tool message")
    case("reasoning_call_roundtrip", {"input": [USER, REASONING, CALL, CALL_OUT], "tools": [WEATHER]},
         "a reasoning item: an analysis message")
    case("roundtrip_then_answer", {"input": [USER, REASONING, CALL, CALL_OUT, ANSWER,
                                             {"role": "user", "content": "And tomorrow?"}], "tools": [WEATHER]},
         "analysis before the last final answer is dropped")
    case("parallel_calls_history", {"input": [
        {"role": "user", "content": "Paris and Tokyo?"}, CALL,
        {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\": \"東京\"}"},
        CALL_OUT, {"type": "function_call_output", "call_id": "call_2", "output": "22C"}], "tools": [WEATHER]})
    case("function_call_full_item", {"input": [
        USER, {**CALL, "id": "fc_1", "status": "completed"}, {**CALL_OUT, "id": "fco_1", "status": "completed"},
        {"role": "user", "content": "And tomorrow?"}], "tools": [WEATHER]}, "items as the API returned them")
    case("function_call_output_unknown_call", {"input": [USER, CALL_OUT]}, "no call with that id: a 400")
    case("function_call_output_before_call", {"input": [USER, CALL_OUT, CALL]}, "the call must come first")
    case("function_call_output_parts", {"input": [USER, CALL, {
        "type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "18C"}]}]},
         "a tool output as parts")
    case("function_call_namespace", {"input": [USER, {**CALL, "namespace": "crm"}, CALL_OUT]},
         "a namespaced call: the namespace is not in the recipient")
    case("reasoning_multi_content", {"input": [USER, {**REASONING, "content": [
        {"type": "reasoning_text", "text": "One."}, {"type": "reasoning_text", "text": "Two."}]}]},
         "reasoning parts joined with a newline")
    case("reasoning_summary_only", {"input": [USER, {"type": "reasoning", "id": "rs_2", "summary": [
        {"type": "summary_text", "text": "Summary."}]}]}, "a reasoning item without content: skipped")
    case("reasoning_no_id", {"input": [USER, {"type": "reasoning", "summary": [],
                                              "content": [{"type": "reasoning_text", "text": "x"}]}]})
    case("reasoning_encrypted", {"input": [USER, {"type": "reasoning", "id": "rs_3", "summary": [],
                                                  "encrypted_content": "abc"}]})
    case("assistant_last", {"input": [USER, ANSWER]}, "the last item is an assistant message")
    case("assistant_refusal", {"input": [USER, {"type": "message", "role": "assistant", "content": [
        {"type": "refusal", "refusal": "I can't."}]}, {"role": "user", "content": "Please?"}]})
    case("custom_tool_call_item", {"input": [USER, {"type": "custom_tool_call", "call_id": "c1", "name": "write_note",
                                                    "input": "x"}]}, "not a Harmony input item")
    case("item_reference", {"input": [USER, {"type": "item_reference", "id": "msg_1"}]})
    case("input_image", {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": "https://x.org/a.png"}]}]})
    case("previous_input_messages_chat", {"input": "And tomorrow?", "previous_input_messages": [
        {"role": "system", "content": "dropped"}, {"role": "user", "content": ASK},
        {"role": "assistant", "content": "Sunny."}]}, "vLLM's Harmony history extension, chat form")
    case("previous_input_messages_harmony", {"input": "", "previous_input_messages": [
        {"author": {"role": "user"}, "content": [{"type": "text", "text": ASK}]},
        {"author": {"role": "assistant"}, "channel": "commentary", "recipient": "functions.get_weather",
         "content_type": "json", "content": [{"type": "text", "text": "{\"city\": \"Paris\"}"}]},
        {"author": {"role": "tool", "name": "functions.get_weather"}, "channel": "commentary",
         "recipient": "assistant", "content": [{"type": "text", "text": "18C"}]}]},
         "Harmony-format history; an empty string input adds no user message")
    # -- refusals and invalid shapes ---------------------------------------------------------
    case("previous_response_id", {"input": ASK, "previous_response_id": "resp_123"})
    case("model_unknown", {"input": ASK, "model": "gpt-5"})
    case("missing_input", {})
    case("empty_input_list", {"input": []})
    case("unknown_item_type", {"input": [{"type": "foo", "content": "x"}]})
    case("background_without_store", {"input": ASK, "background": True, "store": False})
    # -- deviations --------------------------------------------------------------------------
    case("tool_web_search_preview", {"input": ASK, "tools": [WEATHER, {"type": "web_search_preview"}]},
         deviation="vLLM leaves a built-in tool out of the prompt without a tool server and answers 200; we answer "
                   "400 naming the supported tool types", expected={"status": 400,
                                                                     "response": unsupported_tool("web_search_preview", 1)})
    case("tool_choice_allowed_tools", {"input": ASK, "tools": [WEATHER, SEARCH], "tool_choice": {
        "type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "search"}]}},
         deviation="vLLM ignores the allowed_tools restriction; we answer 400",
         expected={"status": 400, "response": invalid_request(
             "tool_choice of type 'allowed_tools' is not supported. Supported: \"none\", \"auto\", \"required\", "
             "or a function or custom tool by name.", "tool_choice")})


def main() -> None:
    rec = Recorder("render_responses_gptoss", "POST /v1/responses/render answers of vLLM 0.33 for a gpt-oss model "
                   "(Harmony), tiny-gptoss", SCRIPT)
    rec.server(GO, PORT, M, FLAGS)
    import record_responses_render

    record_responses_render.PORTS[GO] = PORT
    record(Cases(rec))
    rec.write()


if __name__ == "__main__":
    main()
