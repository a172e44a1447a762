"""Inputs for the goldens of vLLM 0.33's `step3` reasoning and tool parsers: plain data, shared by
tests/oracle/record_step3.py (run with the oracle's vLLM 0.33) and tests/core/parsers/test_step3.py.

The tokenizer is Qwen3's (its `</think>` ends Step 3's reasoning) with Step 3's five tool-call
markers added as special tokens (parser_models.py `STEP3_TOKENS`). Step 3's prompt opens the
reasoning, so an output starts inside it: text before `</think>` is reasoning.
"""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "ratio": {"type": "number"}, "nothing": {"type": "null"}, "filters": {"type": "object"},
        "tags": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "ping"}},
]
CALLS_BEGIN, CALLS_END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"


def param(key: str, value: object) -> str:
    return f'<steptml:parameter name="{key}">{value}</steptml:parameter>'


def call(name: str, params: dict, kind: str = "function") -> str:
    body = "".join(param(k, v) for k, v in params.items())
    return f'{CALL_BEGIN}{kind}{SEP}<steptml:invoke name="{name}">{body}</steptml:invoke>{CALL_END}'


def block(*calls: str, sep: str = "") -> str:
    return CALLS_BEGIN + sep.join(calls) + CALLS_END


W = call("get_weather", {"city": "Tokyo", "days": 3})
S = call("search", {"query": "rain <b>today</b>"})
R = "Let me think.\n</think>\n\n"

OUTPUTS = {
    "plain": "</think>Just an answer.",
    "reasoning_content": R + "It is sunny.",
    "reasoning_only": "All of this is reasoning <think> still",
    "no_end": "No end marker at all",
    "empty_reasoning": "</think>\n\nAnswer.  ",
    "empty_content": "Thinking.</think>",
    "double_end": "r</think>c</think>d",
    "think_start_kept": "<think>\nr</think>c",
    "call": R + block(W),
    "content_call": R + "Let me check.\n\n" + block(W),
    "ws_around_call": R + "  \n" + block(W) + "\n\n",
    "ws_content_call": R + "  Let me check. \n" + block(W) + "\n",
    "two_calls": R + block(W, S),
    "two_calls_sep": R + block(W, S, sep="\n"),
    "text_after": R + "Before. " + block(W) + " After.",
    "text_after_only": R + block(W) + "\n\nDone, see above.  ",
    "typed": R + block(call("get_weather", {"city": "  Paris ", "days": " 7 ", "metric": "TRUE", "ratio": "2",
                                            "nothing": "NULL", "filters": '{"a": 1}', "tags": "x"})),
    "typed_bad": R + block(call("get_weather", {"days": "3.5", "metric": "yes", "ratio": "abc", "nothing": "nil"})),
    "typed_python": R + block(call("get_weather", {"days": "1_000", "ratio": "inf", "metric": "False"})),
    "typed_nan": R + block(call("get_weather", {"ratio": "nan", "days": "-0"})),
    "no_schema": R + block(call("ping", {"x": "1", "y": "true"})),
    "unknown_tool": R + block(call("nope", {"a": "1"})),
    "no_params": R + block(call("ping", {})),
    "duplicate_param": R + block(call("get_weather", {"city": "A", "days": 1}).replace(
        "</steptml:invoke>", param("city", "B") + "</steptml:invoke>")),
    "multiline_value": R + block(call("search", {"query": "line1\nline2 \"q\" \\ <b>"})),
    "other_type": R + "x " + block(call("get_weather", {"city": "A"}, kind="code")),
    "type_ws": R + block(call("get_weather", {"city": "A"}, kind="  function\n")),
    "other_then_function": R + block(call("get_weather", {"city": "A"}, kind="code"), S),
    "no_sep": R + "x " + block(f'{CALL_BEGIN}function<steptml:invoke name="ping"></steptml:invoke>{CALL_END}'),
    "no_invoke": R + "x " + block(f"{CALL_BEGIN}function{SEP}ping{CALL_END}"),
    "empty_name": R + block(f'{CALL_BEGIN}function{SEP}<steptml:invoke name=""></steptml:invoke>{CALL_END}', S),
    "part_zero": R + CALLS_BEGIN + f'function{SEP}<steptml:invoke name="ping"></steptml:invoke>{CALL_END}' + CALLS_END,
    "unclosed_call": R + block(W[:-len(CALL_END)], S),
    "unclosed_call_last": R + "a " + block(W[:-len(CALL_END)]) + " b",
    "empty_block": R + "before " + CALLS_BEGIN + CALLS_END + " after",
    "calls_end_only": R + "x " + CALLS_END + " y",
    "second_block": R + block(W) + " mid " + block(S),
    "calls_end_in_value": R + CALLS_BEGIN + W.replace("Tokyo", "To" + CALLS_END + "kyo") + CALLS_END + " t",
    "call_end_in_value": R + block(W.replace("Tokyo", "To" + CALL_END + "kyo")),
    "unclosed_param": R + block(call("get_weather", {"days": 2}).replace(
        "<steptml:invoke", param("city", "x").replace("</steptml:parameter>", "") + "<steptml:invoke")),
    "text_in_block": R + CALLS_BEGIN + "junk " + W + " more junk " + S + " tail" + CALLS_END,
    "call_in_reasoning": "thinking " + block(W) + "</think>ok",
    "unicode": "天气 été 🗼</think>答案 😀" + block(call("search", {"query": "雨 🌧"})),
    "special_tokens": "r<|im_end|>x</think>c<|endoftext|>d " + block(W.replace("Tokyo", "To<|im_end|>kyo")),
    "truncated_reasoning": "Still thinking about",
    "truncated_before_block": R + "Sure." + CALLS_BEGIN[:5],
    "truncated_in_first_call": R + "Sure. " + block(W)[:-40],
    "truncated_after_call": R + "Sure. " + CALLS_BEGIN + W + S[:30],
    "truncated_after_calls": R + CALLS_BEGIN + W + S,
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
FLAGS = {"both": ("step3", "step3"), "tools_only": (None, "step3"), "reasoning_only": ("step3", None)}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "reasoning_content", "unknown_tool")
# forced choices: the output is the JSON the structured output constrains it to
FORCED = {"required": '[{"name": "get_weather", "parameters": {"city": "Oslo"}}]',
          "named": '{"city": "Oslo", "days": 2}'}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        variants = [("both", "auto"), ("tools_only", "auto")]
        if name in REQUEST_VARIANTS:
            variants += [("both", req) for req in ("none", "required", "named", "no_parallel", "no_tools")]
            variants += [("reasoning_only", "auto")]
        for flags, req in variants:
            reasoning, tool = FLAGS[flags]
            out.append({"name": f"{name}__{flags}_{req}", "text": text, "reasoning_parser": reasoning,
                        "tool_parser": tool, "request": REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    for req, json_text in FORCED.items():
        out.append({"name": f"forced_json__both_{req}", "text": R + json_text, "reasoning_parser": "step3",
                    "tool_parser": "step3", "request": REQUESTS[req], "chat_template_kwargs": {}, "finish": "stop"})
    return out


PROMPTS = {"open": "<|im_start|>assistant\n<think>\n", "closed": "<|im_start|>assistant\n<think>\nr</think>\n",
           "history": "</think>old answer<|im_end|><|im_start|>user\nq<|im_end|><|im_start|>assistant\n"}
