"""Inputs for the DeepSeek V3.2 / V4 / V4.1 (DSML) parser goldens: plain data, shared by the recorder
(tests/oracle/record_dsml_parser.py, run with the oracle's vLLM 0.33) and the tests.

A case: the family (v32 / v4 / v41: tokenizer, parser flags, DSML spelling), the assistant output
text, the request fields and chat template kwargs, and whether the output ended by EOS or length.
"""

import json

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string"}, "n": {"type": "integer"}}}}},
]

FAMILIES = {
    "v32": {"tool_parser": "deepseek_v32", "reasoning_parser": "deepseek_v3", "model": "tiny-deepseek-v32",
            "open": "<｜DSML｜function_calls>", "close": "</｜DSML｜function_calls>", "dsml": "｜DSML｜", "sp": ""},
    "v4": {"tool_parser": "deepseek_v4", "reasoning_parser": "deepseek_v4", "model": "tiny-deepseek-v4",
           "open": "<｜DSML｜tool_calls>", "close": "</｜DSML｜tool_calls>", "dsml": "｜DSML｜", "sp": ""},
    "v41": {"tool_parser": "deepseek_v41", "reasoning_parser": "deepseek_v41", "model": "tiny-deepseek-v4",
            "open": "<｜DSML｜ calls>", "close": "</｜DSML｜ calls>", "dsml": "｜DSML｜", "sp": " "},
}


def invoke(f: dict, name: str, args: dict, string_attr: bool = True) -> str:
    d, sp = f["dsml"], f["sp"]
    params = []
    for key, value in args.items():
        attr = f' string="{"true" if isinstance(value, str) else "false"}"' if string_attr else ""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        params.append(f'<{d}{sp}parameter name="{key}"{attr}>{text}</{d}{sp}parameter>')
    return f'<{d}{sp}invoke name="{name}">\n' + "\n".join(params) + f"\n</{d}{sp}invoke>"


def block(f: dict, *invokes: str) -> str:
    return f["open"] + "\n" + "\n".join(invokes) + "\n" + f["close"]


def outputs(f: dict) -> dict[str, str]:
    w = invoke(f, "get_weather", {"city": "杭州", "unit": "c"})
    t = invoke(f, "get_time", {"tz": "UTC", "n": 3})
    d, sp = f["dsml"], f["sp"]
    return {
        "content": "It is sunny.",
        "reasoning_content": "Let me think.</think>It is sunny.",
        "reasoning_ws": "Let me think.  \n</think>\n\nIt is sunny.  ",
        "call": block(f, w),
        "reasoning_call": "I should call it.</think>\n\n" + block(f, w),
        "content_call": "Let me check.\n\n" + block(f, w),
        "ws_call": "  \n" + block(f, w),
        "two_calls": block(f, w, t),
        "two_blocks": block(f, w) + "\n" + block(f, t),
        "after_block": block(f, w) + "\nDone.",
        "call_in_reasoning": "thinking " + block(f, w),
        "bare_invoke": w,
        "no_string_attr": block(f, invoke(f, "get_weather", {"city": "Oslo", "n": 2}, string_attr=False)),
        "typed": block(f, invoke(f, "get_time", {"tz": "UTC", "n": 3, "ok": True, "x": None, "l": [1, "a"],
                                                  "o": {"k": "v"}, "f": 1.5})),
        "string_false_text": block(f, f'<{d}{sp}invoke name="get_time">\n<{d}{sp}parameter name="n" '
                                      f'string="false">not json</{d}{sp}parameter>\n</{d}{sp}invoke>'),
        "multiline_value": block(f, invoke(f, "get_weather", {"city": "line1\nline2 \"q\" \\ <b>"})),
        "no_params": block(f, f'<{d}{sp}invoke name="get_time">\n</{d}{sp}invoke>'),
        "wrapper_args": block(f, invoke(f, "get_weather", {"arguments": {"city": "Rome"}})),
        "wrapper_args_string": block(f, invoke(f, "get_weather", {"input": '{"city": "Rome"}'})),
        "duplicate_param": block(f, invoke(f, "get_weather", {"city": "A"}) .replace(
            f"</{d}{sp}invoke>", f'<{d}{sp}parameter name="city" string="true">B</{d}{sp}parameter>\n</{d}{sp}invoke>')),
        "unclosed_param": block(f, f'<{d}{sp}invoke name="get_weather">\n<{d}{sp}parameter name="city" string="true">'
                                   f'Oslo\n<{d}{sp}parameter name="unit" string="true">c</{d}{sp}parameter>\n'
                                   f'</{d}{sp}invoke>'),
        "truncated_value": block(f, w)[:-45],
        "truncated_name": f["open"] + f'\n<{d}{sp}invoke name="get_wea',
        "unicode": "東京 🌞 naïve",
        "think_tags": "a <think>b</think> c",
        "stray_close": "answer </think> more",
        "end_without_block": "x " + f["close"] + " y",
        "open_without_invoke": "before " + f["open"] + "\nno invoke here",
        "open_closed_empty": "before " + f["open"] + "\n" + f["close"] + " after",
    }


KWARGS = {
    "default": {},
    "think": {"thinking": True},
    "nothink": {"thinking": False},
    "effort_none": {"reasoning_effort": "none"},
}
REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "no_parallel": {"tools": TOOLS, "parallel_tool_calls": False},
    "no_tools": {},
}


def cases() -> list[dict]:
    out = []
    for fam, f in FAMILIES.items():
        for name, text in outputs(f).items():
            variants = [("auto", "default"), ("auto", "nothink")]
            if name in ("call", "reasoning_call", "two_calls", "content_call"):
                variants += [("none", "nothink"), ("required", "nothink"), ("named", "nothink"),
                             ("no_parallel", "nothink"), ("no_tools", "nothink")]
            if name in ("reasoning_content", "think_tags", "call_in_reasoning"):
                variants += [("auto", "think"), ("auto", "effort_none")]
            for req, kw in variants:
                finish = "length" if name.startswith("truncated") else "stop"
                out.append({"name": f"{fam}:{name}__{req}_{kw}", "family": fam, "text": text,
                            "tool_parser": f["tool_parser"], "reasoning_parser": f["reasoning_parser"],
                            "model": f["model"], "request": REQUESTS[req], "chat_template_kwargs": KWARGS[kw],
                            "finish": finish})
    return out
