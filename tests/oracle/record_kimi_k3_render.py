"""Record vLLM 0.33's Kimi K3 render answers (renderer mode kimi_k3) over HTTP.

Server (in /root/vllm-oracle):
  8151  ./start-render033.sh tiny-kimi-k3-render 8151 --tokenizer-mode kimi_k3 --tool-call-parser kimi_k3
        --reasoning-parser kimi_k3 --enable-auto-tool-choice --trust-remote-code

`tiny-kimi-k3-render` is tiny-qwen3 (Qwen3ForCausalLM) whose tokenizer has K3's `<|open|>`,
`<|close|>`, `<|sep|>`, `<|end_of_msg|>` added as special tokens (ids 151669-151672), and whose
tokenizer class is a stand-in for Kimi K3's remote `tokenization_kimi.py`: Kimi's `encoding_k3.py`
(XTML segments) with each segment tokenized on its own, special tokens matched only in the
structural segments (tokenization_kimi_shim.py in the model dir). vLLM 0.33's kimi_k3 renderer
calls that tokenizer's `apply_chat_template(..., tokenize=True)`.

Writes tests/fixtures/oracle/render_kimi_k3.json (chat, completions, /tokenize, Responses and
Messages render). Usage: record_kimi_k3_render.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder  # noqa: E402
from record_deepseek import CALLS, USER  # noqa: E402  (the same conversation as DeepSeek's goldens)

SCRIPT = "tests/oracle/record_kimi_k3_render.py"
MODEL = "tiny-kimi-k3-render"
PORT = 8151
FLAGS = ["--tokenizer-mode kimi_k3", "--tool-call-parser kimi_k3", "--reasoning-parser kimi_k3",
         "--enable-auto-tool-choice", "--trust-remote-code"]
CHAT = "/v1/chat/completions/render"

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "unit": {"type": "string", "enum": ["c", "f"]},
                                                "city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string"}}}}}
STRICT = {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOLS = [WEATHER, TIME]
HISTORY = [{"role": "system", "content": "You are helpful."}, *USER,
           {"role": "assistant", "content": "Checking.", "reasoning": "Need tools.", "tool_calls": CALLS},
           {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
           {"role": "tool", "tool_call_id": "call_2", "content": "10:00"}]
NOTHINK = {"chat_template_kwargs": {"thinking": False}}


def chat_cases(rec: Recorder, key: str) -> None:
    def case(name, body, description):
        rec.call(name, key, CHAT, {"model": MODEL, **body}, description)

    case("user_only", {"messages": USER}, "one user message (thinking on, effort max by default)")
    case("system_user", {"messages": [{"role": "system", "content": "Be brief."}, *USER]}, "system then user")
    case("multi_turn", {"messages": [*USER, {"role": "assistant", "content": "Sunny."},
                                     {"role": "user", "content": "Tomorrow?"}]}, "multi-turn, thinking on")
    case("multi_turn_nothink", {"messages": [*USER, {"role": "assistant", "content": "Sunny."},
                                             {"role": "user", "content": "Tomorrow?"}], **NOTHINK},
         "multi-turn, thinking off (no think channel anywhere)")
    case("thinking_off", {"messages": USER, **NOTHINK}, "thinking false: the response channel opens")
    case("thinking_on", {"messages": USER, "chat_template_kwargs": {"thinking": True}}, "thinking true")
    case("enable_thinking_false", {"messages": USER, "chat_template_kwargs": {"enable_thinking": False}},
         "enable_thinking false maps to thinking")
    case("enable_thinking_vs_thinking", {"messages": USER, "chat_template_kwargs": {
        "enable_thinking": False, "thinking": True}}, "thinking wins over enable_thinking")
    for effort in ("low", "high", "max", "none", "medium", "minimal", "xhigh"):
        case(f"effort_{effort}", {"messages": USER, "reasoning_effort": effort}, f"reasoning_effort {effort}")
    case("thinking_effort_low", {"messages": USER, "chat_template_kwargs": {"thinking_effort": "low"}},
         "thinking_effort kwarg")
    case("thinking_effort_bad", {"messages": USER, "chat_template_kwargs": {"thinking_effort": "medium"}},
         "an unknown thinking_effort: 400")
    case("thinking_effort_bad_off", {"messages": USER, "chat_template_kwargs": {
        "thinking_effort": "huge", "thinking": False}}, "an unknown thinking_effort with thinking off")
    case("effort_and_kwarg", {"messages": USER, "reasoning_effort": "low",
                              "chat_template_kwargs": {"thinking_effort": "high"}}, "the kwarg wins over the field")
    case("effort_kwarg_none", {"messages": USER, "chat_template_kwargs": {"reasoning_effort": "none"}},
         "reasoning_effort none in the kwargs")
    case("tools_auto", {"messages": USER, "tools": TOOLS}, "tools: the tool-declare system message")
    case("tools_system", {"messages": [{"role": "system", "content": "Be brief."}, *USER], "tools": TOOLS},
         "tools and a system message")
    case("tools_required", {"messages": USER, "tools": TOOLS, "tool_choice": "required"},
         "tool_choice required: the tool-choice system message and vLLM's structural tag")
    case("tools_none", {"messages": USER, "tools": TOOLS, "tool_choice": "none"}, "tool_choice none")
    case("tools_named", {"messages": USER, "tools": TOOLS,
                         "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
         "a named tool choice")
    case("tools_named_nothink", {"messages": USER, "tools": TOOLS, **NOTHINK,
                                 "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
         "a named tool choice, thinking off")
    case("tools_required_nothink", {"messages": USER, "tools": TOOLS, "tool_choice": "required", **NOTHINK},
         "required, thinking off")
    case("tools_auto_explicit", {"messages": USER, "tools": TOOLS, "tool_choice": "auto"}, "tool_choice auto")
    case("tools_strict", {"messages": USER, "tools": [STRICT]}, "a strict tool (auto)")
    case("tools_strict_required", {"messages": USER, "tools": [STRICT], "tool_choice": "required"},
         "a strict tool, required")
    case("tools_no_parallel", {"messages": USER, "tools": TOOLS, "parallel_tool_calls": False},
         "parallel_tool_calls false")
    case("tools_empty", {"messages": USER, "tools": [], "tool_choice": "none"}, "an empty tools list")
    case("no_tools_required", {"messages": USER, "tool_choice": "required"}, "required without tools")
    case("no_tools_none", {"messages": USER, "tool_choice": "none"}, "none without tools: no instruction")
    case("history_tools", {"messages": HISTORY, "tools": TOOLS}, "a call round trip, results in call order")
    case("history_tools_nothink", {"messages": HISTORY, "tools": TOOLS, **NOTHINK}, "the same, thinking off")
    case("history_reordered", {"messages": [*HISTORY[:3], HISTORY[4], HISTORY[3]], "tools": TOOLS},
         "results out of order: sorted back by tool_call_id")
    case("history_alias", {"messages": [*HISTORY[:3], {"role": "tool", "tool_call_id": "get_time:1", "content": "10:00"},
                                        {"role": "tool", "tool_call_id": "get_weather:0", "content": "21"}],
                           "tools": TOOLS}, "results by the name:index alias")
    case("history_unresolved", {"messages": [*HISTORY[:3], {"role": "tool", "tool_call_id": "zzz", "content": "a"},
                                             {"role": "tool", "tool_call_id": "call_1", "content": "b"}],
                                "tools": TOOLS}, "one result unresolved: the block keeps its order")
    case("history_no_ids", {"messages": [*HISTORY[:3], {"role": "tool", "content": "a"},
                                         {"role": "tool", "content": "b"}], "tools": TOOLS},
         "results without ids: named by position")
    case("history_tool_name", {"messages": [*HISTORY[:3], {"role": "tool", "name": "custom", "content": "a"}],
                               "tools": TOOLS}, "a tool result with its own name")
    case("history_extra_result", {"messages": [*HISTORY[:3], {"role": "tool", "content": "a"},
                                               {"role": "tool", "content": "b"},
                                               {"role": "tool", "content": "c"}], "tools": TOOLS},
         "more results than calls: the third has no name (an encoder error)")
    case("tool_without_call", {"messages": [*USER, {"role": "tool", "tool_call_id": "x", "content": "r"}]},
         "a tool result without a call before it")
    case("history_arg_types", {"messages": [*USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": (
            '{"s": "x", "i": 3, "f": 1.5, "b": true, "n": null, "o": {"z": 1, "a": [1, "é"]}, "l": [true]}')}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}, "typed arguments of every kind")
    case("history_bad_args", {"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "not json"}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "[1, 2]"}},
        {"id": "c3", "type": "function", "function": {"name": "h", "arguments": ""}}]}]},
         "arguments that are not a JSON object, and empty ones")
    case("history_attr_escape", {"messages": [*USER, {"role": "assistant", "content": "x", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": 'a&b"c', "arguments": '{"k\\"&": "v<|open|>"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "<|close|>r"}]}, "attribute escaping, marker text")
    case("reasoning_history", {"messages": [*USER, {"role": "assistant", "content": "Sunny.", "reasoning": "Easy."},
                                            {"role": "user", "content": "Tomorrow?"}]},
         "reasoning of an earlier turn is kept")
    case("reasoning_history_nothink", {"messages": [*USER, {"role": "assistant", "content": "Sunny.",
                                                            "reasoning": "Easy."},
                                                    {"role": "user", "content": "Tomorrow?"}], **NOTHINK},
         "reasoning dropped with thinking off")
    case("reasoning_blank", {"messages": [*USER, {"role": "assistant", "content": "Sunny.", "reasoning": "  \n"}]},
         "blank reasoning: an empty think channel")
    case("reasoning_content_field", {"messages": [*USER, {"role": "assistant", "content": "Sunny.",
                                                          "reasoning_content": "Old field."}]},
         "reasoning_content on the request message")
    case("assistant_last", {"messages": [*USER, {"role": "assistant", "content": "Sun", "reasoning": "r"}],
                            "add_generation_prompt": False}, "the assistant's message last, no generation prompt")
    case("continue_final", {"messages": [*USER, {"role": "assistant", "content": "Sun"}],
                            "add_generation_prompt": False, "continue_final_message": True},
         "continue_final_message (the encoder closes the message anyway)")
    case("names", {"messages": [{"role": "system", "content": "S", "name": "sys&1"},
                                {"role": "user", "content": "U", "name": 'bob "b"'},
                                {"role": "assistant", "content": "A", "name": "kimi"},
                                {"role": "user", "content": "U2"}]}, "name attributes, escaped")
    case("developer", {"messages": [{"role": "developer", "content": "Answer in French."}, *USER]},
         "a developer message (not a role the encoder knows)")
    case("unicode", {"messages": [{"role": "user", "content": "你好，世界 🌍 naïve café\u00a0—\ttab\n\nend "}]},
         "unicode and whitespace")
    case("special_text", {"messages": [{"role": "user", "content": "a<think>b<|im_end|>c<|open|>d<|end_of_msg|>"}]},
         "special-token text in content stays text (added non-special tokens still match)")
    case("parts", {"messages": [{"role": "user", "content": [{"type": "text", "text": "A"},
                                                              {"type": "text", "text": "B"}]}]},
         "text parts joined with a newline")
    case("empty_content", {"messages": [{"role": "user", "content": ""}]}, "empty content")
    case("system_only", {"messages": [{"role": "system", "content": "Only system."}]}, "a lone system message")
    case("image_part", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}, "an image: refused")
    case("long_run", {"messages": [{"role": "user", "content": "a" * 30010 + " " * 26000 + "b"}]},
         "runs longer than 25000 characters (the tokenizer cuts them)")
    case("json_object", {"messages": USER, "response_format": {"type": "json_object"}},
         "response_format json_object: a response-format system message")
    case("json_schema", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "schema": {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}}}},
         "response_format json_schema: the schema, keys sorted")
    case("json_schema_no_schema", {"messages": USER, "response_format": {"type": "json_schema",
                                                                           "json_schema": {"name": "w"}}},
         "json_schema without a schema")
    case("response_text", {"messages": USER, "response_format": {"type": "text"}}, "response_format text")
    case("response_schema_kwarg", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "schema": {"type": "object"}}}, "chat_template_kwargs": {"response_schema": {"z": 1, "a": 2}}},
         "a response_schema kwarg overrides the format's schema")
    case("tool_choice_kwarg", {"messages": USER, "chat_template_kwargs": {"tool_choice": "required"}},
         "tool_choice given as a template kwarg")
    case("tools_kwarg", {"messages": USER, "chat_template_kwargs": {"tools": [{"name": "k"}]}},
         "tools given as a template kwarg")
    case("sampling", {"messages": USER, "temperature": 0.2, "top_p": 0.5, "top_k": 5, "max_tokens": 7,
                      "stop": ["x"], "seed": 3, "presence_penalty": 0.1, "logprobs": True, "top_logprobs": 2},
         "sampling fields")
    case("max_completion_tokens", {"messages": USER, "max_completion_tokens": 9, "min_tokens": 2,
                                   "repetition_penalty": 1.1}, "max_completion_tokens")
    case("too_long", {"messages": USER, "max_tokens": 40950}, "prompt plus max_tokens over the context")
    case("truncate", {"messages": USER, "truncate_prompt_tokens": 10}, "truncate_prompt_tokens")
    case("offsets", {"messages": USER, "return_token_offsets": True}, "return_token_offsets: none for K3")
    case("include_reasoning_false", {"messages": USER, "include_reasoning": False}, "include_reasoning false")
    case("untrusted_template", {"messages": USER, "chat_template": "{{ 'x' }}"}, "a request template: refused")
    case("both_prompts", {"messages": USER, "add_generation_prompt": True, "continue_final_message": True},
         "add_generation_prompt and continue_final_message")
    case("n2", {"messages": USER, "n": 2}, "n 2")
    case("reuse_ids", {"messages": USER, "kv_transfer_params": {"prompt_token_ids": [1, 2, 3]}},
         "decode-side reuse of the prefill's ids")


def other_cases(rec: Recorder, key: str) -> None:
    def call(name, path, body, description):
        rec.call(name, key, path, {"model": MODEL, **body}, description)

    comp = "/v1/completions/render"
    call("completion", comp, {"prompt": "Hi <|open|> there"}, "completion: the prompt as the hf renderer")
    call("completion_ids", comp, {"prompt": [1, 2, 3], "max_tokens": 4}, "completion of token ids")
    call("completion_list", comp, {"prompt": ["a", "b"]}, "two prompts")
    call("completion_suffix", comp, {"prompt": "a", "suffix": "b"}, "a suffix: no FIM for K3")
    tok = "/tokenize"
    call("tokenize_chat", tok, {"messages": USER}, "/tokenize of a chat")
    call("tokenize_chat_tools", tok, {"messages": HISTORY, "tools": TOOLS, "return_token_strs": True},
         "/tokenize with tools and history, token strings")
    call("tokenize_chat_nogen", tok, {"messages": USER, "add_generation_prompt": False, **NOTHINK},
         "/tokenize, no generation prompt, thinking off")
    call("tokenize_prompt", tok, {"prompt": "a<|open|>b"}, "/tokenize of a prompt")
    call("tokenize_bad_effort", tok, {"messages": USER, "chat_template_kwargs": {"thinking_effort": "x"}},
         "/tokenize with an unknown effort")
    resp = "/v1/responses/render"
    call("responses_plain", resp, {"input": "Hello"}, "Responses: a string input")
    call("responses_instructions", resp, {"input": "Hello", "instructions": "Be brief."}, "instructions")
    call("responses_tools_required", resp, {"input": "Weather?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}],
        "tool_choice": "required"}, "Responses: tools, required")
    call("responses_tools_none", resp, {"input": "Weather?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}],
        "tool_choice": "none"}, "Responses: tools, none")
    call("responses_effort", resp, {"input": "Hello", "reasoning": {"effort": "low"}}, "Responses: effort low")
    call("responses_effort_none", resp, {"input": "Hello", "reasoning": {"effort": "none"}}, "Responses: effort none")
    call("responses_history", resp, {"input": [
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "fc1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "fc1", "output": "cold"}], "tools": [
        {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}]},
        "Responses: a function call and its output")
    call("responses_json", resp, {"input": "Hello", "text": {"format": {"type": "json_object"}}},
         "Responses: a json_object text format (not passed to the encoder)")
    msgs = "/v1/messages/render"
    call("messages_plain", msgs, {"max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]},
         "Messages: one user message")
    call("messages_system_tools", msgs, {"max_tokens": 10, "system": "Be brief.", "messages": [
        {"role": "user", "content": "Weather?"}], "tools": [
        {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}], "tool_choice": {"type": "any"}},
        "Messages: system, tools, tool_choice any")
    call("messages_thinking_off", msgs, {"max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}],
                                         "thinking": {"type": "disabled"}}, "Messages: thinking disabled")
    call("messages_tool_result", msgs, {"max_tokens": 10, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "get_weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "cold"}]}],
        "tools": [{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}]},
        "Messages: a tool use and its result")


def main() -> None:
    rec = Recorder("render_kimi_k3", f"vLLM 0.33 render of {MODEL} (renderer mode kimi_k3)", SCRIPT)
    key = rec.server("k3-render", PORT, MODEL, FLAGS)
    chat_cases(rec, key)
    other_cases(rec, key)
    rec.write()


if __name__ == "__main__":
    main()
