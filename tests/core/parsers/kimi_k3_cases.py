"""Inputs for the Kimi K3 parser goldens: plain data, shared by the recorder
(tests/oracle/record_kimi_k3.py, run with the oracle's vLLM 0.33) and the tests.

A case: the assistant output text (XTML), the parser flags (`kimi_k3` reasoning and/or tools),
the request fields, chat_template_kwargs and whether the output ended by EOS or by length. The
tokenizer is Qwen3's plus `<|open|>`, `<|close|>`, `<|sep|>` (parser_models.KIMI_K3_TOKENS).
"""

import json

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "set_config", "parameters": {
        "type": "object", "properties": {"s": {"type": "string"}, "o": {"type": "object"}}}}},
]
O, C, S = "<|open|>", "<|close|>", "<|sep|>"


def el(name: str, body: str, attrs: str = "") -> str:
    head = f"{name} {attrs}" if attrs else name
    return f"{O}{head}{S}{body}{C}{name}{S}"


def arg(key: str, value, type_: str = "string") -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return el("argument", text, f'key="{key}" type="{type_}"')


def call(name: str, *args: str, index: int = 1) -> str:
    return el("call", "".join(args), f'tool="{name}" index="{index}"')


def tools(*calls: str) -> str:
    return el("tools", "".join(calls))


THINK = el("think", "Let me think.")
RESP = el("response", "It is sunny.")
END = f"{C}message{S}"
W = call("get_weather", arg("city", "Seattle"), arg("days", 3, "integer"))
T = call("set_config", arg("s", "a \"b\" <c>"), arg("o", {"k": [1, 2]}, "object"), index=2)

OUTPUTS = {
    "content_plain": "It is sunny.",
    "response_only": RESP + END,
    "think_response": THINK + RESP + END,
    "prefix_consumed": "Let me think." + f"{C}think{S}" + RESP + END,  # the think open was the prompt's
    "response_prefix_consumed": "It is sunny." + f"{C}response{S}" + END,
    "think_only": THINK,
    "truncated_reasoning": f"{O}think{S}Still thinking about",
    "empty_reasoning": el("think", "") + RESP,
    "ws_between": THINK + "\n" + RESP + "\n" + END,
    "call": THINK + el("response", "") + tools(W) + END,
    "call_no_response": THINK + tools(W) + END,
    "content_call": THINK + el("response", "Let me check.") + tools(W) + END,
    "two_calls": THINK + el("response", "Both.") + tools(W, T) + END,
    "calls_no_think": el("response", "x") + tools(W, T),
    "text_around": THINK + "before " + tools(W) + " after",
    "response_after_tools": THINK + tools(W) + el("response", "late"),
    "types": THINK + tools(call("set_config", arg("n", 1.5, "number"), arg("b", True, "boolean"),
                                 arg("z", None, "null"), arg("a", [1, "x"], "array"), arg("s", "42"),
                                 arg("bad", "not json", "object"), arg("nan", "NaN", "number"))),
    "escaped_attrs": THINK + tools(el("call", arg("k&amp;", "v"), 'tool="a&quot;b&amp;c" index="1"')),
    "no_tool_attr": THINK + tools(el("call", arg("k", "v"), 'index="1"'), W),
    "no_args": THINK + tools(el("call", "", 'tool="ping" index="1"')),
    "default_type": THINK + tools(el("call", el("argument", "5", 'key="days"'), 'tool="get_weather" index="1"')),
    "unclosed_call": THINK + tools(W) .replace(f"{C}call{S}{C}tools", f"{C}tools"),
    "tools_unclosed": THINK + f"{O}tools{S}" + W,
    "nested_call_open": THINK + f"{O}tools{S}{O}call tool=\"a\"{S}" + W + f"{C}tools{S}",
    "spaced_markers": f"{O} think {S}r{C} think {S}{O} response {S}hi{C} response {S}{O} tools {S}"
                      f"{O} call tool=\"get_weather\"{S}{O} argument key=\"city\" type=\"string\"{S}Oslo"
                      f"{C} argument {S}{C} call {S}{C} tools {S}",
    "markers_in_reasoning": el("think", f"a {O}response{S} b {O}think{S} c") + RESP,
    "close_before_open": f"x{C}think{S}y{O}think{S}z",
    "text_before_think": "lead " + THINK + RESP,
    "text_before_response": THINK + "lead " + RESP,
    "stray_markers": THINK + f"a{O}b{C}c{S}d{O}zz{S}e" + END,
    "special_tokens": THINK.replace("think.", "think<|im_end|>.") + el("response", "a<|endoftext|>b") + END,
    "unicode": el("think", "東京 🌞") + el("response", "naïve ") + tools(call("get_weather", arg("city", "東京 🌞"))),
    "multiline_value": THINK + tools(call("get_weather", arg("city", "l1\nl2 \"q\" \\ <b>"))),
    "truncated_call": (THINK + tools(W))[:-40],
    "truncated_response": THINK + f"{O}response{S}It is su",
}

REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "no_parallel": {"tools": TOOLS, "parallel_tool_calls": False},
    "no_tools": {},
}
FLAGS = {"k3": ("kimi_k3", "kimi_k3"), "tools_only": (None, "kimi_k3"), "reasoning_only": ("kimi_k3", None)}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "think_response", "response_only", "text_around")
KWARGS = {"on": {}, "off": {"thinking": False}, "off_enable": {"enable_thinking": False},
          "on_over_enable": {"thinking": True, "enable_thinking": False}}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        variants = [("k3", "auto", "on"), ("k3", "no_tools", "on"), ("tools_only", "auto", "on")]
        if name in REQUEST_VARIANTS:
            variants += [("k3", req, "on") for req in ("none", "required", "named", "no_parallel")]
            variants += [("reasoning_only", "auto", "on"), ("reasoning_only", "no_tools", "on"),
                         ("tools_only", "none", "on")]
            variants += [("k3", "auto", kw) for kw in ("off", "off_enable", "on_over_enable")]
            variants += [("k3", "no_tools", "off")]
        for flags, req, kw in variants:
            reasoning, tool = FLAGS[flags]
            out.append({"name": f"{name}__{flags}_{req}_{kw}", "text": text, "reasoning_parser": reasoning,
                        "tool_parser": tool, "request": REQUESTS[req], "chat_template_kwargs": KWARGS[kw],
                        "finish": "length" if name.startswith("truncated") else "stop"})
    return out


NAMED = REQUESTS["named"]["tool_choice"]
# render side: what adjust_request sets (skip_special_tokens, the structural tag)
RENDER_REQUESTS = {
    **{name: REQUESTS[name] for name in ("auto", "none", "required", "named", "no_parallel", "no_tools")},
    "auto_strict": {"tools": [dict(TOOLS[0], function=dict(TOOLS[0]["function"], strict=True)), TOOLS[1]]},
}
_RICH = {"type": "function", "function": {"name": "book", "strict": True, "parameters": {
    "type": "object", "required": ["who"], "$defs": {"d": {"type": "integer"}},
    "properties": {"who": {"type": "string", "maxLength": 20, "minLength": 2}, "kind": {"type": "string", "enum": ["a", "b"]},
                   "one": {"type": "string", "const": "x"}, "n": {"$ref": "#/$defs/d", "type": "integer"},
                   "u": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "q\"&": {"type": "boolean"}}}}}
RENDER_REQUESTS.update({
    "named_second": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "set_config"}}},
    "required_strict": {"tools": [_RICH, TOOLS[0]], "tool_choice": "required"},
    "auto_strict_json_object": {"tools": [_RICH], "response_format": {"type": "json_object"}},
    "named_no_parallel": {"tools": TOOLS, "tool_choice": NAMED, "parallel_tool_calls": False},
})
RENDER_CASES = [(pair, name) for pair in (("kimi_k3", "kimi_k3"), (None, "kimi_k3"), ("kimi_k3", None))
                for name in RENDER_REQUESTS]
