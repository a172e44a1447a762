"""Inputs for the goldens of vLLM 0.33's `k2_horizon` reasoning and tool parsers: plain data, shared
by tests/oracle/record_k2_horizon.py (run with the oracle's vLLM 0.33) and
tests/core/parsers/test_k2_horizon.py.

The tokenizer is Qwen3's plus K2 Horizon's `<ifm|...>` tags (added, not special) and turn markers
(special; `<|ifm|im_end|>` the eos): parser_models.py `make_k2_horizon`. K2 Horizon's template
opens the reasoning in the prompt (`<ifm|think>\\n`), so an output usually starts inside it.
"""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "ratio": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
        "filters": {"type": "object"}, "maybe": {"type": ["string", "null"]}, "unit": {"enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "ping"}},
]
THINK, THINK_END = "<ifm|think>", "</ifm|think>"
CALLS_OPEN, CALLS_CLOSE = "<ifm|tool_calls>", "</ifm|tool_calls>"
CALL_OPEN, CALL_CLOSE = "<ifm|tool_call>", "</ifm|tool_call>"
KEY, KEY_END = "<ifm|arg_key>", "</ifm|arg_key>"
TYPE, TYPE_END = "<ifm|arg_type>", "</ifm|arg_type>"
VALUE, VALUE_END = "<ifm|arg_value>", "</ifm|arg_value>"


def pair(key: str, value: object, kind: str | None = None, sep: str = "") -> str:
    typed = f"{TYPE}{kind}{TYPE_END}{sep}" if kind is not None else ""
    return f"{KEY}{key}{KEY_END}{sep}{typed}{VALUE}{value}{VALUE_END}"


def call(name: str, args: dict, types: dict | None = None, sep: str = "") -> str:
    """An XML call (`types`: the xml_typed format's type per key)."""
    pairs = sep.join(pair(k, v, (types or {}).get(k), sep) for k, v in args.items())
    return f"{CALL_OPEN}{name}{sep}{pairs}{CALL_CLOSE}"


def json_call(body: str) -> str:
    return f"{CALL_OPEN}{body}{CALL_CLOSE}"


def group(*calls: str, sep: str = "\n") -> str:
    return CALLS_OPEN + sep + sep.join(calls) + sep + CALLS_CLOSE


W = call("get_weather", {"city": "Tokyo", "days": 3})
S = call("search", {"query": "rain <b>today</b>"})
R = "Let me think.\n" + THINK_END + "\n"

OUTPUTS = {
    "plain": "Just an answer.",
    "reasoning_content": R + "It is sunny.",
    "open_tag": THINK + "\nr\n" + THINK_END + "\nc",
    "double_open": THINK + THINK + "r" + THINK_END + "c",
    "open_not_first": " " + THINK + "r" + THINK_END + "c",
    "empty_reasoning": THINK_END + "Answer.",
    "empty_content": "r" + THINK_END,
    "double_end": "r" + THINK_END + "c" + THINK_END + "d",
    "other_effort_end": "r</ifm|think_fast>c",
    "call": R + group(W),
    "content_call": R + "Let me check.\n" + group(W),
    "call_without_end": "I should look. " + group(W),
    "call_then_end": "r " + group(W) + THINK_END + "c",
    "ws_around_call": R + "  \n" + group(W) + "\n\n",
    "ws_only_content": R + " " + group(W) + " ",
    "text_after": R + "Before. " + group(W) + " After.",
    "two_calls": R + group(W, S),
    "two_calls_tight": R + group(W, S, sep=""),
    "pairs_spaced": R + group(call("get_weather", {"city": "Oslo", "days": 2}, sep="\n")),
    "typed": R + group(call("get_weather", {"city": "  Paris ", "days": " 7 ", "metric": "TRUE", "ratio": "2.50",
                                            "tags": '["a", "b"]', "filters": '{"a": 1}', "maybe": "null",
                                            "unit": " f "})),
    "typed_bad": R + group(call("get_weather", {"days": "3.5", "metric": "yes", "ratio": "abc", "tags": "[1",
                                                "maybe": "NULL"})),
    "typed_odd": R + group(call("get_weather", {"days": "1_000", "ratio": "inf", "metric": "1", "filters": "[1]"})),
    "no_schema": R + group(call("ping", {"x": " 1 ", "y": "true", "z": '{"a": 1}'})),
    "unknown_key": R + group(call("get_weather", {"note": " 5 "})),
    "no_args": R + group(call("ping", {})),
    "no_args_ws": R + group(f"{CALL_OPEN}\n ping \n{CALL_CLOSE}"),
    "unknown_tool": R + "x " + group(call("nope", {"a": "1"})),
    "name_with_space": R + group(call("get weather", {"city": "A"})),
    "empty_name": R + group(call("", {"city": "A"})),
    "duplicate_key": R + group(call("get_weather", {"city": "A"}).replace(CALL_CLOSE, pair("city", "B") + CALL_CLOSE)),
    "empty_key": R + group(call("get_weather", {" ": "A"})),
    "junk_between_pairs": R + group(call("get_weather", {"city": "A", "days": 1}).replace(
        VALUE_END + KEY, VALUE_END + " x " + KEY)),
    "junk_after_pairs": R + group(call("get_weather", {"city": "A"}).replace(CALL_CLOSE, " tail" + CALL_CLOSE)),
    "stray_arg_tag": R + group(f"{CALL_OPEN}ping{VALUE_END}{CALL_CLOSE}"),
    "key_without_value": R + group(f"{CALL_OPEN}get_weather{KEY}city{KEY_END}{CALL_CLOSE}"),
    "type_in_xml": R + group(call("get_weather", {"city": "A"}, {"city": "string"})),
    "junk_in_group": R + group(W, "x", S),
    "junk_before_call": R + CALLS_OPEN + "x" + W + CALLS_CLOSE,
    "empty_group": R + "before " + CALLS_OPEN + "\n" + CALLS_CLOSE + " after",
    "calls_close_only": R + "x " + CALLS_CLOSE + " y",
    "second_group": R + group(W) + " mid " + group(S),
    "second_group_bad": R + group(W) + " mid " + group("junk"),
    "calls_close_in_value": R + CALLS_OPEN + W.replace("Tokyo", "To" + CALLS_CLOSE + "kyo") + CALLS_CLOSE + " t",
    "call_close_in_value": R + group(W.replace("Tokyo", "To" + CALL_CLOSE + "kyo")),
    "call_open_in_value": R + group(W.replace("Tokyo", "To" + CALL_OPEN + "kyo")),
    "bad_call_after_good": R + group(W, call("nope", {})),
    "unicode": "天气 été 🗼" + THINK_END + "答案 😀" + group(call("search", {"query": "雨 🌧\n\"q\" \\"})),
    "special_tokens": "r<|ifm|endoftext|>x" + THINK_END + "c<|ifm|im_start|>d " + group(
        W.replace("Tokyo", "To<|ifm|endoftext|>kyo")),
    "truncated_reasoning": THINK + "Still thinking about",
    "truncated_in_group": R + "Sure. " + CALLS_OPEN + "\n" + W[:-20],
    "truncated_after_call": R + "Sure. " + CALLS_OPEN + "\n" + W + "\n",
    "truncated_after_calls": R + CALLS_OPEN + W + S[:30],
}

# outputs in the other formats (the request's chat_template_kwargs.tool_call_format)
FORMAT_OUTPUTS = {
    "json": {
        "json_call": R + group(json_call('{"name": "get_weather", "arguments": {"city": "Oslo", "days": "3"}}')),
        "json_types": R + group(json_call(' {"name": "get_weather", "arguments": {"city": 3, "days": 2.0, '
                                          '"metric": "false", "tags": "[\\"x\\"]", "filters": {"a": [1]}, '
                                          '"maybe": null, "unit": "f", "note": [1, 2]}} ')),
        "json_two": R + group(json_call('{"name": "ping"}'), json_call('{"arguments": {"query": "q"}, '
                                                                        '"name": "search", "extra": 1}')),
        "json_nan": R + group(json_call('{"name": "get_weather", "arguments": {"note": NaN}}')),
        "json_nan_typed": R + group(json_call('{"name": "get_weather", "arguments": {"ratio": Infinity}}')),
        "json_args_not_object": R + group(json_call('{"name": "ping", "arguments": "{}"}')),
        "json_no_name": R + group(json_call('{"arguments": {}}')),
        "json_not_object": R + group(json_call('["ping"]')),
        "json_invalid": R + group(json_call('{"name": "ping", }')),
        "json_duplicate_key": R + group(json_call('{"name": "ping", "name": "search", "arguments": {"query": "a", '
                                                  '"query": "b"}}')),
        "json_unicode": R + group(json_call(
            '{"name": "search", "arguments": {"query": "\\u96e8 🌧 \\ud83d\\ude00"}}')),
        "xml_in_json": R + group(W),
    },
    "xml_typed": {
        "typed_call": R + group(call("get_weather", {"city": "Oslo", "days": " 4 "}, {"city": "string",
                                                                                   "days": "integer"}, sep="\n")),
        "typed_explicit": R + group(call("get_weather", {"maybe": "null", "tags": '["a"]', "unit": " c "},
                                         {"maybe": "null", "tags": "array[string]", "unit": "String"})),
        "typed_no_schema": R + group(call("ping", {"x": " 5 ", "y": " raw ", "z": "1.5", "w": "[1]"},
                                          {"x": "integer", "y": "any", "z": "float", "w": "list"})),
        "typed_missing_type": R + group(call("get_weather", {"city": "Oslo"})),
        "typed_empty_type": R + group(call("get_weather", {"city": "Oslo"}, {"city": " "})),
        "typed_unknown_type": R + group(call("ping", {"x": " [1, 2] "}, {"x": "tuple"})),
    },
}

REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "named_other": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
    "no_parallel": {"tools": TOOLS, "parallel_tool_calls": False},
    "no_tools": {},
}
# (reasoning parser, tool parser)
FLAGS = {"both": ("k2_horizon", "k2_horizon"), "tools_only": (None, "k2_horizon"),
         "reasoning_only": ("k2_horizon", None)}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "reasoning_content", "unknown_tool", "ws_only_content",
                    "plain", "junk_in_group")
# the reasoning_effort picks the think tags (medium: <ifm|think_fast>, low: <ifm|think_faster>)
EFFORT_OUTPUTS = {
    "medium": {"fast": "<ifm|think_fast>r</ifm|think_fast>c", "fast_with_high_tags": R + "c",
               "fast_call": "r " + group(W)},
    "low": {"faster": "r</ifm|think_faster>c" + group(S), "faster_open_only": "<ifm|think_faster>r"},
}


def _case(name: str, text: str, flags: str, req: str, kwargs: dict) -> dict:
    reasoning, tool = FLAGS[flags]
    return {"name": f"{name}__{flags}_{req}", "text": text, "reasoning_parser": reasoning, "tool_parser": tool,
            "request": REQUESTS[req], "chat_template_kwargs": kwargs,
            "finish": "length" if name.startswith("truncated") else "stop"}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        variants = [("both", "auto"), ("tools_only", "auto")]
        if name in REQUEST_VARIANTS:
            variants += [("both", req) for req in REQUESTS if req != "auto"]
            variants += [("reasoning_only", "auto")]
        out += [_case(name, text, flags, req, {}) for flags, req in variants]
    for fmt, outputs in FORMAT_OUTPUTS.items():
        for name, text in outputs.items():
            out += [_case(name, text, flags, "auto", {"tool_call_format": fmt}) for flags in ("both", "tools_only")]
    out += [_case("json_call", FORMAT_OUTPUTS["json"]["json_call"], "both", req, {"tool_call_format": "json"})
            for req in ("required", "named", "named_other")]
    for effort, outputs in EFFORT_OUTPUTS.items():
        for name, text in outputs.items():
            out += [_case(name, text, flags, "auto", {"reasoning_effort": effort})
                    for flags in ("both", "reasoning_only")]
    return out


# render side: what adjust_request does (or refuses) per request
RENDER_REQUESTS = {
    **REQUESTS,
    "json_format": {"tools": TOOLS, "chat_template_kwargs": {"tool_call_format": "json"}},
    "typed_format": {"tools": TOOLS, "tool_choice": "required", "chat_template_kwargs": {"tool_call_format":
                                                                                         "xml_typed"}},
    "bad_format": {"tools": TOOLS, "chat_template_kwargs": {"tool_call_format": "yaml"}},
    "bad_format_no_tools": {"chat_template_kwargs": {"tool_call_format": "XML"}},
    "bad_format_none": {"tools": TOOLS, "tool_choice": "none", "chat_template_kwargs": {"tool_call_format": 1}},
    "effort_medium": {"tools": TOOLS, "chat_template_kwargs": {"reasoning_effort": "medium"}},
    "bad_effort": {"tools": TOOLS, "chat_template_kwargs": {"reasoning_effort": "none"}},
    "bad_effort_top_level": {"reasoning_effort": "minimal"},
}
PROMPTS = {"open": "<|ifm|im_start|>assistant\n<ifm|think>\n",
           "closed": "<|ifm|im_start|>assistant\n<ifm|think>\nr\n</ifm|think>\n",
           "calls": "<|ifm|im_start|>assistant\n<ifm|think>r<ifm|tool_calls>",
           "history": "</ifm|think>old<|ifm|im_end|><|ifm|im_start|>user\nq<|ifm|im_end|><|ifm|im_start|>assistant\n",
           "none": "<|ifm|im_start|>assistant\n",
           "fast_open": "<|ifm|im_start|>assistant\n<ifm|think_fast>\n",
           "fast_closed": "<|ifm|im_start|>assistant\n<ifm|think_fast>r</ifm|think_fast>"}
EFFORT_KWARGS = {"high": {}, "medium": {"reasoning_effort": "medium"}, "low": {"reasoning_effort": "low"}}
