"""Inputs for the goldens of vLLM 0.33's `olmo3` reasoning parser: plain data, shared by
tests/oracle/record_olmo3.py (run with the oracle's vLLM 0.33) and tests/core/parsers/test_olmo3.py.

The tokenizer is Qwen3's without its `<think>` / `</think>` added tokens (parser_models.py
`OLMO3_DROPPED`): like Olmo 3's, it spells them with ordinary entries (`<th` `ink` `>`, `</`
`think` `>`), and vLLM's parser reads them as text.
"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}}]

OUTPUTS = {
    "plain": "Just an answer.",
    "think_content": "<think>Let me think.</think>It is sunny.",
    "no_open": "Let me think.</think>\n\nIt is sunny.",
    "ws": "<think>\n  r \n</think>\n\n c \n",
    "empty_reasoning": "<think></think>Answer",
    "empty_content": "<think>All reasoning.</think>",
    "only_end": "</think>",
    "double_end": "r</think>c</think>d",
    "think_mid": "a<think>b</think>c",
    "double_think": "<think><think>r</think>c",
    "think_after_end": "r</think>c<think>d",
    "unclosed": "<think>Still thinking, never closed",
    "no_tags_multiline": "line one\n\nline two <b>",
    "partial_tags": "<thin>r</thin k></think >x</think>c",
    "lt_chars": "a < b </ c</think>d <",
    "unicode": "天气 été 🗼</think>答案 😀",
    "special_tokens": "r<|im_end|>x</think>c<|endoftext|>d",
    "call_text": 'r</think><function_calls>get_weather(city="Oslo")</function_calls>',
    "truncated_reasoning": "<think>Still thinking about",
    "truncated_content": "<think>r</think>The answer is",
}

REQUESTS = {"auto": {"tools": TOOLS}, "no_tools": {}, "none": {"tools": TOOLS, "tool_choice": "none"},
            "required": {"tools": TOOLS, "tool_choice": "required"},
            "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
            "skip_special_false": {"skip_special_tokens": False}}
FLAGS = {"reasoning_only": ("olmo3", None)}
REQUEST_VARIANTS = ("think_content", "special_tokens")


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        requests = ["no_tools"] + (["auto", "none", "skip_special_false"] if name in REQUEST_VARIANTS else [])
        for req in requests:
            out.append({"name": f"{name}__reasoning_only_{req}", "text": text, "reasoning_parser": "olmo3",
                        "tool_parser": None, "request": REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    return out


PROMPTS = {"open": "<|im_start|>assistant\n<think>", "closed": "<|im_start|>assistant\n<think>r</think>",
           "closed_space": "<|im_start|>assistant\nr </think>", "closed_newlines": "<think>r</think>\n\n",
           "history": "x</think>old<|im_end|><|im_start|>user\nq<|im_end|><|im_start|>assistant\n",
           "none": "<|im_start|>assistant\n"}


# -- the olmo3 tool parser (Olmo3PythonicToolParser): newline-separated pythonic calls --------------

CALL_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "ping"}},
]
OPEN, CLOSE = "<function_calls>", "</function_calls>"
W = 'get_weather(city="Paris", days=3)'
S = "search(query='rain \"today\"')"


def block(*lines: str) -> str:
    return OPEN + "\n" + "\n".join(lines) + "\n" + CLOSE


TOOL_OUTPUTS = {
    "block": block(W),
    "block_two": block(W, S),
    "block_two_one_line": block(W + ", " + S),
    "block_blank_lines": OPEN + "\n\n  " + W + "  \n\n" + S + "\n\n" + CLOSE,
    "block_tight": OPEN + W + CLOSE,
    "text_before": "Let me check.\n" + block(W),
    "ws_before": "\n\n" + block(W),
    "text_after": block(W) + "\nDone.",
    "json_literals": block("get_weather(metric=true, city=null, days=false)"),
    "python_literals": block("search(query={'a': [1, (2, 3), {4}], 'b': None, 'c': True}, n=-2.5, f=f'x', p=+1)"),
    "positional_first": block('get_weather("Paris")'),
    "positional_later": block(W, "ping(1, x=2)"),
    "dotted_first": block('functions.get_weather(city="a")'),
    "dotted_later": block(W, 'functions.ping(x="a")'),
    "no_args": block("ping()"),
    "unknown_tool": block('nope(a="1")'),
    "bare_calls": W + "\n" + S,
    "bare_calls_blank_lines": "\n\n" + W + "\n\n",
    "bare_with_prose": "Sure.\n" + W,
    "bare_prose_after": W + "\nThat is all.",
    "bare_multiline_call": 'get_weather(\n  city="x")',
    "bare_call_closed_next_line": 'get_weather(city="x"\n)',
    "invalid_python": block('get_weather(city="x"'),
    "not_literal": block("get_weather(city=x)"),
    "call_expression_value": block("get_weather(city=str(1))"),
    "empty_block": "a " + OPEN + "\n" + CLOSE + " b",
    "two_blocks": block(W) + "\nmid\n" + block(S),
    "first_block_bad": block("oops") + "\n" + block(S),
    "tag_in_string": block('get_weather(city="' + CLOSE + '")'),
    "open_tag_in_bare_string": 'get_weather(city="' + OPEN + '")',
    "plain": "Just an answer.",
    "plain_call_like": "Note(this is prose) and more.",
    "unicode": block('search(query="天气 🗼 été")'),
    "escapes": block('search(query="line1\\nline2 \\"q\\" \\\\ \\u00e9")'),
    "special_tokens": block('search(query="a<|endoftext|>b")'),
    "reasoning_then_block": "Let me think.</think>\n\n" + block(W),
    "reasoning_then_text": "Let me think.</think>It is sunny.",
    "truncated_in_block": block(W, S)[:-25],
    "truncated_bare": 'get_weather(city="Par',
}
TOOL_REQUESTS = {"auto": {"tools": CALL_TOOLS}, "none": {"tools": CALL_TOOLS, "tool_choice": "none"},
                 "required": {"tools": CALL_TOOLS, "tool_choice": "required"},
                 "named": {"tools": CALL_TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
                 "no_parallel": {"tools": CALL_TOOLS, "parallel_tool_calls": False}, "no_tools": {}}
TOOL_FLAGS = {"both": ("olmo3", "olmo3"), "tools_only": (None, "olmo3")}
TOOL_REQUEST_VARIANTS = ("block", "block_two", "text_before", "plain", "bare_calls")
# forced choices: the output is the JSON the structured output constrains it to
FORCED = {"required": '[{"name": "search", "parameters": {"query": "x"}}]', "named": '{"query": "x"}'}


def tool_cases() -> list[dict]:
    out = []
    for name, text in TOOL_OUTPUTS.items():
        variants = [("both", "auto"), ("tools_only", "auto")]
        if name in TOOL_REQUEST_VARIANTS:
            variants += [("tools_only", req) for req in TOOL_REQUESTS if req != "auto"]
        for flags, req in variants:
            reasoning, tool = TOOL_FLAGS[flags]
            out.append({"name": f"{name}__{flags}_{req}", "text": text, "reasoning_parser": reasoning,
                        "tool_parser": tool, "request": TOOL_REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    for req, json_text in FORCED.items():
        out.append({"name": f"forced_json__both_{req}", "text": "r</think>" + json_text, "reasoning_parser": "olmo3",
                    "tool_parser": "olmo3", "request": TOOL_REQUESTS[req], "chat_template_kwargs": {},
                    "finish": "stop"})
    return out
