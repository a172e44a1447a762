"""Record vLLM 0.33's gpt-oss (Harmony) render and derender answers from its render server.

Servers (in /root/vllm-oracle; VLLM_SYSTEM_START_DATE=2025-06-28 comes from common.sh):
  8130  ./start-render033.sh tiny-gptoss 8130
        (--tool-call-parser openai --reasoning-parser openai_gptoss --enable-auto-tool-choice)
  8131  ln -sfn tiny-gptoss models/plain-go;
        ./start-render033.sh plain-go 8131 --served-model-name tiny-gptoss     (no parser flags; a name
        without "gptoss", which would make start-render033.sh add them; vLLM still defaults
        --reasoning-parser to openai_gptoss for gpt_oss models)

Writes tests/fixtures/oracle/render_gptoss.json (POST /v1/chat/completions/render: token ids,
sampling params with the structural tags, parse_context, errors) and parsers_gptoss.json
(/v1/chat/completions/derender, non-streaming and streamed 1 and 5 tokens per call, in the
compact stream form). Usage: record_harmony.py [render] [derender]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, Tok, healthy  # noqa: E402
from record_parsers import TOOLS, Family  # noqa: E402

SCRIPT = "tests/oracle/record_harmony.py"
RENDER = "/v1/chat/completions/render"
M = "tiny-gptoss"
PARSER_FLAGS = ["--served-model-name tiny-gptoss", "--tool-call-parser openai", "--reasoning-parser openai_gptoss",
                "--enable-auto-tool-choice"]
USER = [{"role": "user", "content": "What is the weather in Tokyo?"}]
STRICT = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
NO_PARAMS = {"type": "function", "function": {"name": "ping"}}
CALL_HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Tokyo?"},
    {"role": "assistant", "content": "Let me check.", "reasoning": "Need the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
]


def render_cases(rec: Recorder, key: str, plain: str | None) -> None:
    def case(name, body, description, server=key):
        rec.call(name, server, RENDER, {"model": M, **body}, description)

    case("user_only", {"messages": USER}, "one user message: system message with the pinned date, no developer")
    case("system_user", {"messages": [{"role": "system", "content": "Be brief."}, *USER]},
         "a leading system message becomes the developer message's instructions")
    case("developer_user", {"messages": [{"role": "developer", "content": "Answer in French."}, *USER]},
         "a leading developer message: instructions")
    case("system_parts", {"messages": [{"role": "system", "content": [{"type": "text", "text": "A"},
                                                                      {"type": "text", "text": "B"}]}, *USER]},
         "system content as text parts: joined")
    case("tools", {"messages": USER, "tools": TOOLS}, "tools: the functions namespace in the developer message")
    case("system_tools", {"messages": [{"role": "system", "content": "Be brief."}, *USER], "tools": TOOLS},
         "instructions and tools")
    case("tool_no_params", {"messages": USER, "tools": [NO_PARAMS]}, "a tool without parameters or description")
    for effort in ("low", "medium", "high"):
        case(f"effort_{effort}", {"messages": USER, "reasoning_effort": effort}, f"reasoning_effort {effort}")
    case("effort_none", {"messages": USER, "reasoning_effort": "none"}, "reasoning_effort none: 400")
    case("effort_minimal", {"messages": USER, "reasoning_effort": "minimal"}, "reasoning_effort minimal")
    case("history_final", {"messages": [*USER, {"role": "assistant", "content": "Sunny.", "reasoning": "Easy."},
                                        {"role": "user", "content": "And tomorrow?"}]},
         "an earlier final answer: its reasoning is dropped")
    case("history_reasoning_last", {"messages": [*USER, {"role": "assistant", "content": "", "reasoning": "Hmm."}]},
         "an assistant message with only reasoning")
    case("history_tool_call", {"messages": CALL_HISTORY, "tools": TOOLS},
         "an assistant tool call with content and reasoning, then the tool result (legacy call header)")
    case("history_tool_call_then_final", {"messages": [*CALL_HISTORY, {"role": "assistant", "content": "21 C."},
                                                       {"role": "user", "content": "Thanks"}], "tools": TOOLS},
         "a whole tool round trip then a final answer")
    case("history_unknown_tool_id", {"messages": [*USER, {"role": "tool", "tool_call_id": "nope", "content": "x"}]},
         "a tool result whose call id is unknown: functions.")
    case("later_system", {"messages": [*USER, {"role": "assistant", "content": "Hi"},
                                       {"role": "system", "content": "New rule."}, {"role": "user", "content": "Ok"}]},
         "a system message in the middle becomes a developer message")
    case("user_parts", {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello "},
                                                                   {"type": "text", "text": "there"}]}]},
         "user content as text parts")
    case("unicode", {"messages": [{"role": "user", "content": "東京の天気は？ 🌧️"}]}, "non-ASCII text")
    case("required", {"messages": USER, "tools": TOOLS, "tool_choice": "required"},
         "tool_choice required: the Harmony call tag")
    case("named", {"messages": USER, "tools": TOOLS,
                   "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
         "a named tool: the tag for that tool only")
    case("named_missing", {"messages": USER, "tools": TOOLS,
                           "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "a named tool that is not in tools")
    case("none", {"messages": USER, "tools": TOOLS, "tool_choice": "none"}, "tool_choice none: tools still rendered")
    case("auto_no_parallel", {"messages": USER, "tools": TOOLS, "parallel_tool_calls": False},
         "auto with parallel_tool_calls false: the tag with the final answer allowed")
    case("auto_strict", {"messages": USER, "tools": [STRICT, *TOOLS[1:]]}, "auto with a strict tool: schema pinned")
    case("required_strict", {"messages": USER, "tools": [STRICT], "tool_choice": "required"},
         "required with a strict tool")
    case("json_schema", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "schema": {"type": "object", "properties": {"t": {"type": "number"}}}}}},
         "response_format json_schema: a final-channel tag")
    case("json_object", {"messages": USER, "response_format": {"type": "json_object"}}, "response_format json_object")
    case("regex", {"messages": USER, "structured_outputs": {"regex": "[0-9]+"}}, "structured_outputs regex")
    case("choice", {"messages": USER, "structured_outputs": {"choice": ["yes", "no"]}}, "structured_outputs choice")
    case("auto_strict_json_schema", {"messages": USER, "tools": [STRICT], "response_format": {
        "type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}},
         "auto with a strict tool and a response format: or of both tags")
    case("required_json_schema", {"messages": USER, "tools": TOOLS, "tool_choice": "required",
                                  "response_format": {"type": "json_object"}},
         "required with a response format: the call tag wins")
    case("sampling", {"messages": USER, "max_tokens": 7, "temperature": 0.2, "top_p": 0.9, "seed": 3,
                      "stop": ["x"], "logprobs": True, "top_logprobs": 2, "include_reasoning": False},
         "sampling knobs, stop strings, include_reasoning false")
    case("max_completion_tokens_over", {"messages": USER, "max_completion_tokens": 200000},
         "max_completion_tokens over max_model_len: no error on the Harmony path")
    case("stream_usage", {"messages": USER, "stream": True, "stream_options": {"include_usage": True},
                          "return_token_ids": True}, "stream with usage")
    case("untrusted_template", {"messages": USER, "chat_template": "{{ 'x' }}"},
         "a chat template in the request: Harmony ignores it (no untrusted-template error)")
    case("reuse_ids", {"messages": USER, "kv_transfer_params": {"prompt_token_ids": [200006, 17360, 200008]}},
         "decode-side reuse of the prefill's ids")
    case("empty_messages", {"messages": []}, "no messages: the system message alone")
    case("assistant_last", {"messages": [*USER, {"role": "assistant", "content": "Partial"}]},
         "the last message is the assistant's")
    if plain is not None:
        case("plain_required", {"messages": USER, "tools": TOOLS, "tool_choice": "required"},
             "no parser flags: tool_choice required is accepted, no tag", plain)
        case("plain_json_schema", {"messages": USER, "response_format": {"type": "json_object"}},
             "no parser flags: the response format stays as is", plain)
        case("plain_tools", {"messages": USER, "tools": TOOLS}, "no parser flags: tools rendered", plain)


def record_render() -> None:
    rec = Recorder("render_gptoss", "vLLM 0.33 chat render of a gpt-oss model (Harmony), tiny-gptoss", SCRIPT)
    key = rec.server("gptoss-parsers", 8130, M, PARSER_FLAGS)
    plain = rec.server("gptoss-plain", 8131, M, ["--served-model-name tiny-gptoss"]) if healthy(8131) else None
    render_cases(rec, key, plain)
    rec.write()


# (output of tests/core/parsers/harmony_cases.py, request variant) recorded through the server
DERENDER = [("reasoning_then_final", "auto"), ("reasoning_then_final", "no_tools"), ("final_only", "no_tools"),
            ("reasoning_then_call", "auto"), ("reasoning_then_call", "none"), ("reasoning_then_call", "required"),
            ("reasoning_then_call", "named"), ("reasoning_then_call", "hide_reasoning"), ("preamble_then_call", "auto"),
            ("two_calls", "auto"), ("two_calls", "no_parallel"), ("call_legacy_header", "auto"),
            ("call_unicode_args", "auto"), ("call_nested_args", "auto"), ("call_invalid_json", "auto"),
            ("multiple_finals", "auto"), ("truncated_in_final", "auto"), ("truncated_in_header", "auto"),
            ("unicode_content", "no_tools"), ("special_tokens_in_content", "no_tools"),
            ("junk_between_messages", "auto"), ("call_then_final", "auto")]


def record_derender() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.core.parsers.harmony_cases import OUTPUTS, REQUESTS

    rec = Recorder("parsers_gptoss", "vLLM 0.33 derender with --tool-call-parser openai --reasoning-parser "
                   "openai_gptoss --enable-auto-tool-choice (tiny-gptoss, Harmony)", SCRIPT)
    tok = Tok("tiny-gptoss")
    f = Family(rec, "gptoss-parsers", 8130, M, PARSER_FLAGS, tok, eos=200002)
    for output, variant in DERENDER:
        text = OUTPUTS[output]
        ids = tok.ids(text)
        finish = "stop" if ids[-1] in (200002, 200012) else "length"
        _, request = REQUESTS[variant]
        f.scenario(f"{output}__{variant}", {"messages": USER, **request}, text,
                   f"Harmony output {output!r}, request {variant}", finish=finish, ids=ids)
    if healthy(8131):
        plain = Family(rec, "gptoss-plain", 8131, M, ["--served-model-name tiny-gptoss"], tok, eos=200002)
        for output, variant in [("reasoning_then_call", "auto"), ("reasoning_then_call", "required"),
                                ("reasoning_then_final", "no_tools")]:
            text = OUTPUTS[output]
            _, request = REQUESTS[variant]
            plain.scenario(f"plain__{output}__{variant}", {"messages": USER, **request}, text,
                           f"no parser flags (reasoning parser openai_gptoss by default): {output!r}, {variant}",
                           ids=tok.ids(text))
    rec.write()


if __name__ == "__main__":
    todo = sys.argv[1:] or ["render", "derender"]
    if "render" in todo:
        record_render()
    if "derender" in todo:
        record_derender()
