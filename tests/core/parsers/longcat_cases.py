"""Inputs for the goldens of vLLM 0.33's `longcat` tool parser (hermes with `<longcat_tool_call>`
markers): plain data, shared by tests/oracle/record_longcat.py (run with the oracle's vLLM 0.33)
and tests/core/parsers/test_longcat.py.

The tokenizer is Qwen3's with the two LongCat markers as added, non-special tokens
(parser_models.py `LONGCAT_TOKENS`). LongCat has no reasoning parser in vLLM 0.33: every case
runs the tool parser alone. Qwen3's own `<tool_call>` is plain text here.
"""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
]
START, END = "<longcat_tool_call>", "</longcat_tool_call>"


def call(body: str, newline: bool = True) -> str:
    sep = "\n" if newline else ""
    return f"{START}{sep}{body}{sep}{END}"


W = call('{"name": "get_weather", "arguments": {"city": "Tokyo", "days": 3}}')
S = call('{"name": "search", "arguments": {"query": "rain <b>today</b>"}}')

OUTPUTS = {
    "plain": "Just an answer.",
    "plain_ws": "  \n Just an answer.\n\n",
    "call": W,
    "call_compact": call('{"name": "get_weather", "arguments": {"city": "Oslo"}}', newline=False),
    "content_call": "Let me check.\n\n" + W,
    "two_calls": W + "\n" + S,
    "text_after": "Before. " + W + " After.",
    "typed": call('{"name": "get_weather", "arguments": {"city": "東京 😀", "days": -2.5e3, "metric": true, '
                  '"x": null, "y": [1, {"z": "\\u00e9"}]}}'),
    "args_string": call('{"name": "search", "arguments": "{\\"query\\": \\"q\\"}"}'),
    "args_first": call('{"arguments": {"query": "q"}, "name": "search"}'),
    "no_arguments": "x " + call('{"name": "search"}'),
    "name_not_string": "x " + call('{"name": 3, "arguments": {}}'),
    "not_json": "x " + call("get_weather(city='Oslo')"),
    "second_bad": W + call('{"name": "search", "arguments": '),
    "unknown_tool": call('{"name": "nope", "arguments": {"a": 1}}'),
    "end_in_value": call('{"name": "search", "arguments": {"query": "a </longcat_tool_call> b"}}'),
    "hermes_markers_are_text": '<tool_call>{"name": "search", "arguments": {}}</tool_call>',
    "end_only": "x " + END + " y",
    "unclosed_last": W + START + '\n{"name": "search", "arguments": {"query": "q"}}',
    "truncated_before_call": "Sure." + START[:6],
    "truncated_in_call": "Sure. " + W[:-30],
    "truncated_after_call": "Sure. " + W + S[:30],
}

REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "no_parallel": {"tools": TOOLS, "parallel_tool_calls": False},
    "no_tools": {},
}
FLAGS = {"tools_only": (None, "longcat")}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "plain")


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        requests = ["auto"] + (["none", "required", "named", "no_parallel", "no_tools"]
                               if name in REQUEST_VARIANTS else [])
        for req in requests:
            out.append({"name": f"{name}__tools_only_{req}", "text": text, "reasoning_parser": None,
                        "tool_parser": "longcat", "request": REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    return out
