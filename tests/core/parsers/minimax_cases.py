"""Inputs for the MiniMax M2 parser goldens: plain data, shared by the recorder
(tests/oracle/record_minimax.py, run with the oracle's vLLM 0.33) and the tests.

A case: the assistant output text, the parser flags (`minimax_m2` or `minimax_m2_append_think`
reasoning, or none; `minimax_m2` tools, or none), the request fields and whether the output ended
by EOS or by length. The tokenizer is Qwen3's plus MiniMax's block markers
(tests/core/parsers/parser_models.py, MINIMAX_TOKENS).
"""

import json

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "unit": {"type": "string", "enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "set_config", "parameters": {
        "type": "object", "properties": {
            "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
            "o": {"type": "object", "properties": {"k": {"type": "array", "items": {"type": "integer"}}}},
            "a": {"type": "array"}, "z": {"type": "null"},
            "u": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}}},
    {"type": "function", "function": {"name": "ping"}},
]
START, END = "<minimax:tool_call>", "</minimax:tool_call>"


def param(key: str, value, quote: str = '"') -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"<parameter name={quote}{key}{quote}>{text}</parameter>"


def invoke(name: str, args: dict, quote: str = '"') -> str:
    body = "".join(f"\n{param(k, v)}" for k, v in args.items())
    return f"<invoke name={quote}{name}{quote}>{body}\n</invoke>"


def block(*invokes: str) -> str:
    return START + "\n" + "\n".join(invokes) + "\n" + END


W = invoke("get_weather", {"city": "Seattle", "days": 3})
T = invoke("set_config", {"s": "hello", "i": "42"})
R = "Let me think.\n</think>\n\n"  # reasoning closed (the template opened it in the prompt)

OUTPUTS = {
    "content_only": "It is sunny.",
    "reasoning_content": "Let me think.\n</think>\n\nIt is sunny.",
    "reasoning_ws": "Let me think.  \n\n</think>\n\nIt is sunny.  ",
    "think_start": "<think>\nabc\n</think>\n\nAnswer.",
    "think_tags_in_content": "r</think>a <think>b</think> c",
    "empty_content": "All of it is reasoning.\n</think>\n\n",
    "call": R + block(W),
    "call_no_reasoning": block(W),
    "call_in_reasoning": "thinking " + block(W),
    "content_call": R + "Let me check.\n\n" + block(W),
    "two_invokes": R + block(W, T),
    "two_blocks": R + block(W) + "\n" + block(T),
    "after_block": R + block(W) + "\nDone.",
    "text_around": R + "Before " + block(W) + " after " + block(T) + " end",
    "bare_invoke": R + W,
    "sq_name": R + block(invoke("get_weather", {"city": "Oslo"}, quote="'")),
    "bare_name": R + block(invoke("get_weather", {"city": "Oslo"}, quote="")),
    "mixed_quotes": R + block("<invoke name=\"get_weather'>\n" + param("city", "Oslo") + "\n</invoke>"),
    "name_spaces": R + block('<invoke name=" get_weather ">\n' + param("city", "Oslo") + "\n</invoke>"),
    "param_quoting": R + block('<invoke name="get_weather">\n' + param("city", "Oslo", "'") + "\n"
                               + param("days", 2, "") + '\n< parameter  name = "unit" >f</ parameter >\n</invoke>'),
    "typed": R + block(invoke("set_config", {"s": "hello", "i": "42", "n": "1.5", "b": "true", "o": '{"k": ["1", 2]}',
                                             "a": '[1, "a"]', "z": "null", "u": "7", "extra": "x"})),
    "typed_bad": R + block(invoke("set_config", {"i": "abc", "n": "NaN", "b": "yes", "o": "not json", "u": "seven",
                                                 "s": "42"})),
    "typed_json_literals": R + block(invoke("get_weather", {"city": "true", "days": "3.0", "unit": "null"})),
    "no_schema_tool": R + block(invoke("ping", {"x": "1", "y": "[1]"})),
    "multiline_value": R + block(invoke("get_weather", {"city": "line1\nline2 \"q\" \\ <b> </param"})),
    "value_ws": R + block(invoke("get_weather", {"city": "  Tokyo \n", "days": " 3 "})),
    "no_params": R + block('<invoke name="ping">\n</invoke>'),
    "duplicate_param": R + block(invoke("get_weather", {"city": "A", "days": 1}).replace(
        "</invoke>", param("city", "B") + "\n</invoke>")),
    "unclosed_param": R + block('<invoke name="get_weather">\n<parameter name="city">Oslo\n'
                                + param("days", 2) + "\n</invoke>"),
    "unclosed_last_param": R + block('<invoke name="get_weather">\n' + param("days", 2)
                                     + '\n<parameter name="city">Oslo\n</invoke>'),
    "empty_param_name": R + block('<invoke name="get_weather">\n<parameter name="">x</parameter>\n'
                                  + param("city", "Oslo") + "\n</invoke>"),
    "quoted_bare_param": R + block('<invoke name="get_weather">\n<parameter name="city>Oslo</parameter>\n'
                                   + param("days", 2) + "\n</invoke>"),
    "unknown_tool": R + "Hmm " + block(invoke("nope", {"a": "b"})),
    "unknown_then_known": R + block(invoke("nope", {"a": "b"}), W),
    "tool_end_in_args": R + START + '\n<invoke name="get_weather">\n' + param("city", "Oslo") + "\n" + END + " tail",
    "end_without_block": R + "x " + END + " y",
    "open_without_invoke": R + "before " + START + "\nno invoke here",
    "open_closed_empty": R + "before " + START + "\n" + END + " after",
    "invoke_end_in_name": R + '<invoke name="get_weather</invoke>">' + param("city", "A") + "</invoke>",
    "unicode": R + "東京 🌞 naïve " + block(invoke("get_weather", {"city": "東京 🌞"})),
    "special_tokens": "r<|im_end|>x\n</think>\n\nc<|endoftext|>d " + block(W.replace("Seattle", "Sea<|im_end|>ttle")),
    "truncated_value": (R + block(W))[:-60],
    "truncated_name": R + START + '\n<invoke name="get_wea',
    "truncated_invoke": R + START + '\n<invoke name="get_weather">\n' + param("city", "Oslo") + "\n",
    "truncated_reasoning": "Still thinking about",
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
FLAGS = {
    "m2": ("minimax_m2", "minimax_m2"),
    "append": ("minimax_m2_append_think", "minimax_m2"),
    "tools_only": (None, "minimax_m2"),
    "reasoning_only": ("minimax_m2", None),
    "append_only": ("minimax_m2_append_think", None),
}
REQUEST_VARIANTS = ("call", "two_invokes", "content_call", "reasoning_content", "unknown_tool")


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        variants = [("m2", "auto"), ("append", "auto"), ("tools_only", "auto")]
        if name in REQUEST_VARIANTS:
            variants += [("m2", req) for req in ("none", "required", "named", "no_parallel", "no_tools")]
            variants += [("reasoning_only", "auto"), ("append_only", "auto")]
        for flags, req in variants:
            reasoning, tool = FLAGS[flags]
            out.append({"name": f"{name}__{flags}_{req}", "text": text, "reasoning_parser": reasoning,
                        "tool_parser": tool, "request": REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    return out


# render side: the structural tag vLLM sets for these requests (strict tools, forced choices)
_STRICT = [dict(TOOLS[0], function=dict(TOOLS[0]["function"], strict=True)), TOOLS[1]]
_NOT_STRICT = [dict(TOOLS[0], function=dict(TOOLS[0]["function"], strict=False)), TOOLS[1], TOOLS[2]]
RENDER_REQUESTS = {
    **{name: REQUESTS[name] for name in ("auto", "none", "required", "named", "no_parallel")},
    "auto_strict": {"tools": _STRICT},
    "required_not_strict": {"tools": _NOT_STRICT, "tool_choice": "required"},
    "required_no_parallel": {"tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False},
    "auto_strict_json_object": {"tools": _STRICT, "response_format": {"type": "json_object"}},
    "named_strict": {"tools": _STRICT, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
}
# ((reasoning parser, tool parser), request): every request with the usual pair, a few with the others
RENDER_CASES = [(("minimax_m2", "minimax_m2"), name) for name in RENDER_REQUESTS] + [
    (pair, name) for pair in (("minimax_m2_append_think", "minimax_m2"), (None, "minimax_m2"),
                              ("minimax_m2", None), ("minimax_m2_append_think", None))
    for name in ("auto", "required", "no_parallel")]
