"""Inputs for the goldens of vLLM 0.33's `hunyuan_a13b` reasoning and tool parsers: plain data, shared
by tests/oracle/record_hunyuan_a13b.py (the oracle's vLLM 0.33) and tests/core/parsers/test_hunyuan_a13b.py.

The tokenizer is Qwen3's as it is: Hunyuan A13B's markers (`<think>\\n`, `\\n</think>\\n<answer>\\n`,
`\\n</answer>`, `<tool_calls>`) are text to both vLLM's non-streaming rules and ours.
"""

import json

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
]


def block(*calls: object, raw: str | None = None) -> str:
    return "<tool_calls>" + (raw if raw is not None else json.dumps(list(calls), ensure_ascii=False)) + "</tool_calls>"


W = {"name": "get_weather", "arguments": {"city": "Tokyo", "days": 3}}
S = {"name": "search", "arguments": {"query": "rain <b>today</b> 雨"}}
T = "<think>\nLet me think.\n</think>\n<answer>\n"
E = "\n</answer>"

OUTPUTS = {
    "full": T + "It is sunny." + E,
    "full_after": T + "It is sunny." + E + "\ntrailing",
    "no_think": "Just an answer." + E,
    "plain": "No markers at all.",
    "half": T + "An answer never closed",
    "half_mid": "pre " + T + "answer",
    "think_only": "<think>\nStill reasoning",
    "empty_reasoning": "<think>\n\n</think>\n<answer>\nA" + E,
    "empty_answer": T + E,
    "end_in_reasoning": "<think>\nr\n</answer> more\n</think>\n<answer>\nA",
    "end_in_both": "<think>\nr\n</answer> more\n</think>\n<answer>\nA" + E,
    "two_rs": T + "a\n</think>\n<answer>\nb" + E,
    "think_no_newline": "<think>r\n</think>\n<answer>\nA" + E,
    "assistant_prefix": "助手：Hello there.",
    "call": T + block(W) + E,
    "content_call": T + "Let me check.\n" + block(W) + E,
    "ws_call": T + "  \n" + block(W) + E,
    "two_calls": T + block(W, S) + E,
    "text_after": T + "Before. " + block(W) + " After." + E,
    "call_no_reasoning": block(W),
    "call_spaced": T + "<tool_calls>\n  " + json.dumps([W]) + "\n</tool_calls>" + E,
    "args_string": T + block({"name": "search", "arguments": '{"query": "x"}'}) + E,
    "args_list": T + "x " + block({"name": "search", "arguments": [1]}) + E,
    "args_empty": T + block({"name": "ping", "arguments": {}}) + E,
    "name_not_str": T + "x " + block({"name": 1, "arguments": {}}) + E,
    "missing_args": T + "x " + block({"name": "ping"}) + E,
    "skip_bad_item": T + block({"name": "ping"}, "junk", W) + E,
    "not_a_list": T + "x " + block(raw=json.dumps(W)) + E,
    "empty_list": T + "x " + block() + E,
    "bad_json_then_good": T + "a " + block(raw="[{oops") + " b " + block(W) + E,
    "good_then_more": T + block(W) + " mid " + block(S) + E,
    "json_no_calls_then_good": T + "a " + block(raw="{}") + " b " + block(W) + E,
    "unclosed_block": T + "x " + "<tool_calls>" + json.dumps([W]) + E,
    "nested_args": T + block({"name": "search", "arguments": {"q": {"a": [1, {"b": None}]}, "n": 1.5}}) + E,
    "unicode": "<think>\n天气 🗼\n</think>\n<answer>\n答案 😀 " + block({"name": "search", "arguments": {"query": "雨 🌧"}}) + E,
    "think_wrapped_call": "<think>x " + block(W) + " y</think> z",
    "truncated_reasoning": "<think>\nStill thinking about",
    "truncated_answer": T + "Sure, here is",
    "truncated_block": T + "Sure. " + block(W)[:-20],
}

REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "no_parallel": {"tools": TOOLS, "parallel_tool_calls": False},
    "no_tools": {},
}
FLAGS = {"both": ("hunyuan_a13b", "hunyuan_a13b"), "tools_only": (None, "hunyuan_a13b"),
         "reasoning_only": ("hunyuan_a13b", None)}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "full")
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
        out.append({"name": f"forced_json__both_{req}", "text": json_text, "reasoning_parser": "hunyuan_a13b",
                    "tool_parser": "hunyuan_a13b", "request": REQUESTS[req], "chat_template_kwargs": {},
                    "finish": "stop"})
    return out


PROMPTS = {"open": "<|im_start|>assistant\n<think>\n", "closed": "<think>\nr\n</think>\n<answer>\n",
           "none": "<|im_start|>assistant\n"}
