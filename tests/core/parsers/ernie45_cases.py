"""Inputs for the goldens of vLLM 0.33's `ernie45` reasoning and tool parsers: plain data, shared by
tests/oracle/record_ernie45.py (run with the oracle's vLLM 0.33) and tests/core/parsers/test_ernie45.py.

The tokenizer is Qwen3's (its `<think>`, `</think>`, `<tool_call>`, `</tool_call>`) with ERNIE 4.5's
`<response>` / `</response>` added as non-special tokens (parser_models.py `ERNIE45_TOKENS`).
ERNIE's prompt opens the reasoning, so an output starts inside it.
"""

import json

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "ping"}},
]


def call(name: object, args: object = None, *, raw: str | None = None, ws: str = "\n") -> str:
    body = raw if raw is not None else json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>{ws}{body}{ws}</tool_call>"


W = call("get_weather", {"city": "Tokyo", "days": 3})
S = call("search", {"query": "rain <b>today</b> 雨"})
R = "Let me think.\n</think>\n\n"

OUTPUTS = {
    "plain_no_end": "Just text, no end marker",
    "response": R + "<response>\nIt is sunny.\n</response>\n",
    "no_response": "abc\n</think>\ndef",
    "reasoning_only": "All reasoning, still going",
    "think_start": "<think>\nr\n</think>\n\n<response>\nc\n</response>\n",
    "think_mid": "before<think>r</think>c",
    "think_after_end": "r</think>c<think>x",
    "think_twice": "<think>a<think>b</think>c",
    "empty_reasoning": "</think>\n\n<response>\nAnswer.\n</response>",
    "empty_content": "Thinking.</think>",
    "empty_response": "r</think><response></response>",
    "response_unclosed": R + "<response>\nhalf an answer",
    "response_end_only": R + "answer</response>tail",
    "response_reversed": R + "</response>x<response>y",
    "two_response_ends": R + "<response>a</response>b</response>c",
    "text_before_response": R + "pre <response>in</response>post",
    "double_end": "r</think>c</think>d",
    "call": R + "\n" + W + "\n",
    "content_call": R + "Let me check.\n\n" + W + "\n",
    "two_calls": R + W + "\n" + S + "\n",
    "text_after": R + "Before.\n" + W + " After.",
    "call_in_response": R + "<response>\n" + W + "\n</response>\n",
    "no_args": R + call("ping", raw='{"name": "ping"}'),
    "no_name": R + call(None, raw='{"arguments": {"a": 1}}'),
    "name_not_str": R + "x " + call(None, raw='{"name": 3, "arguments": {}}'),
    "args_string": R + call(None, raw='{"name": "ping", "arguments": "{\\"a\\": 1}"}'),
    "args_types": R + call("get_weather", {"city": "東京 😀", "days": 2.5, "n": None, "l": [1, {"x": True}]}),
    "nested_braces": R + call("search", {"query": "a}b{c", "f": {"g": {"h": 1}}}),
    "bad_json": R + "x " + call(None, raw='{"name": "ping", "arguments": {'),
    "bad_second": R + W + call(None, raw='{"name": oops}'),
    "not_json_body": R + "x <tool_call>\nnot json\n</tool_call> y",
    "unclosed_call": R + "x\n" + W[:-len("</tool_call>")],
    "start_only": R + "text <tool_call> more",
    "no_ws": R + call("ping", {}, ws=""),
    "ws_lots": R + call("ping", {}, ws=" \n\t "),
    "extra_keys": R + call(None, raw='{"name": "ping", "arguments": {}, "id": "x", "name2": 1}'),
    "dup_keys": R + call(None, raw='{"name": "a", "name": "ping", "arguments": {"k": 1, "k": 2}}'),
    "nan": R + call(None, raw='{"name": "ping", "arguments": {"v": NaN, "w": 1e400}}'),
    "spanning": R + "<tool_call>{\"a\": 1} x</tool_call> " + W,
    "call_in_reasoning": "thinking " + W + "</think>ok",
    "tools_no_think": W,
    "unicode": "天气 été 🗼</think>\n<response>答案 😀</response>",
    "truncated_reasoning": "Still thinking about",
    "truncated_in_response": R + "<response>\nSure, here is",
    "truncated_in_call": R + "Sure.\n" + W[:-20],
    "truncated_after_call": R + W + "\n" + S[:25],
}

REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "no_parallel": {"tools": TOOLS, "parallel_tool_calls": False},
    "no_tools": {},
}
# (reasoning parser, tool parser)
FLAGS = {"both": ("ernie45", "ernie45"), "tools_only": (None, "ernie45"), "reasoning_only": ("ernie45", None)}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "response", "no_response")
FORCED = {"required": '[{"name": "get_weather", "parameters": {"city": "Oslo"}}]',
          "named": '{"city": "Oslo", "days": 2}'}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        variants = [("both", "auto"), ("tools_only", "auto"), ("reasoning_only", "auto")]
        if name in REQUEST_VARIANTS:
            variants += [("both", req) for req in ("none", "required", "named", "no_parallel", "no_tools")]
        for flags, req in variants:
            reasoning, tool = FLAGS[flags]
            out.append({"name": f"{name}__{flags}_{req}", "text": text, "reasoning_parser": reasoning,
                        "tool_parser": tool, "request": REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    for req, json_text in FORCED.items():
        out.append({"name": f"forced_json__both_{req}", "text": R + json_text, "reasoning_parser": "ernie45",
                    "tool_parser": "ernie45", "request": REQUESTS[req], "chat_template_kwargs": {}, "finish": "stop"})
    return out


PROMPTS = {"open": "<|im_start|>assistant\n<think>\n", "closed": "<|im_start|>assistant\n<think>\nr</think>\n",
           "history": "</think>old answer<|im_end|><|im_start|>user\nq<|im_end|><|im_start|>assistant\n",
           "none": "<|im_start|>assistant\n"}
