"""Inputs for the goldens of vLLM 0.33's `minimax_m3` reasoning and tool parsers: plain data, shared
by tests/oracle/record_minimax_m3.py (run with the oracle's vLLM 0.33) and
tests/core/parsers/test_minimax_m3.py.

The tokenizer is Qwen3's with MiniMax M3's `<mm:think>`, `</mm:think>` and `]<]minimax[>[` added as
tokens that are not special (parser_models.py `MINIMAX_M3_TOKENS`).
"""

NS = "]<]minimax[>["
TS, TE = "<mm:think>", "</mm:think>"

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "filters": {"type": "object", "properties": {"year": {"type": "integer"}, "tags": {"type": "array"}}},
        "hours": {"type": "array", "items": {"type": "integer"}}, "note": {"type": ["string", "null"]},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
        "choice": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "string"}}]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}}}}},
    {"type": "function", "function": {"name": "ping"}},
]


def el(name: str, body: str) -> str:
    return f"{NS}<{name}>{body}{NS}</{name}>"


def invoke(name: str, body: str, quote: str = '"') -> str:
    return f"{NS}<invoke name={quote}{name}{quote}>\n{body}\n{NS}</invoke>"


def block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n" + "\n".join(invokes) + f"\n{NS}</tool_call>"


W = invoke("get_weather", el("city", "Tokyo") + "\n" + el("days", "3"))
S = invoke("search", el("query", "rain <b>today</b>") + el("limit", "2.5"))
NESTED = invoke("get_weather", "\n".join([
    el("filters", el("year", "2020") + el("tags", el("item", "a") + el("item", "b"))),
    el("hours", el("item", "1") + el("item", "2")),
    el("extra", el("x", "1.5") + el("y", "z")),
    el("choice", el("item", "p")),
    el("note", "null"),
    el("metric", "true")]))

OUTPUTS = {
    "plain": "Just an answer.",
    "think_content": f"{TS}Let me think.{TE}\n\nIt is sunny.",
    "think_only": f"{TS}Still thinking",
    "leading_end": f"{TE}Answer after a stray closer.",
    "text_before_think": f"Intro. {TS}r{TE}c",
    "second_end": f"{TS}r{TE}c{TE}d{TS}e",
    "no_start_with_end": f"r{TE}c",
    "empty_think": f"{TS}{TE}answer",
    "call": f"{TS}r{TE}" + block(W),
    "content_call": f"{TS}r{TE}Let me check.\n\n" + block(W),
    "ws_call": f"{TS}r{TE}\n\n" + block(W) + "\n",
    "two_calls": f"{TS}r{TE}" + block(W, S),
    "text_after_block": f"{TS}r{TE}Before. " + block(W) + " After.",
    "nested": f"{TS}r{TE}" + block(NESTED),
    "repeated": f"{TS}r{TE}" + block(invoke("get_weather", el("city", "A") + el("city", "B") + el("city", "C"))),
    "mixed_text": f"{TS}r{TE}" + block(invoke("get_weather", el("filters", "loose " + el("year", "1") + " text"))),
    "empty_containers": f"{TS}r{TE}" + block(invoke("get_weather", el("hours", "") + el("filters", " ")
                                                     + el("city", ""))),
    "unknown_tool": f"{TS}r{TE}" + block(invoke("nope", el("a", "1"))),
    "no_schema": f"{TS}r{TE}" + block(invoke("ping", el("x", "1") + el("y", el("z", "2")))),
    "quotes": f"{TS}r{TE}" + block(invoke("get_weather", el("city", "A"), "'"), invoke("search", el("query", "q"), "")),
    "malformed_element": f"{TS}r{TE}" + block(invoke("get_weather", el("city", "A") + f"{NS}<days>3{NS}</city>"
                                                     + el("metric", "true"))),
    "unclosed_element": f"{TS}r{TE}" + block(invoke("get_weather", el("city", "A") + f"{NS}<days>3")),
    "text_before_element": f"{TS}r{TE}" + block(invoke("get_weather", "junk " + el("city", "A"))),
    "no_params": f"{TS}r{TE}" + block(invoke("ping", "")),
    "bare_invoke": f"{TS}r{TE}" + W,
    "no_block_end": f"{TS}r{TE}" + f"{NS}<tool_call>\n" + W,
    "m2_markup": f"{TS}r{TE}<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">A"
                 "</parameter>\n</invoke>\n</minimax:tool_call>",
    "think_markers_in_call": f"{TS}r{TE}" + block(invoke("search", el("query", f"x{TS}y{TE}z"))),
    "unicode": f"{TS}天气 🗼{TE}答案 😀" + block(invoke("search", el("query", "雨 🌧"))),
    "special_tokens": f"{TS}r<|im_end|>x{TE}c<|endoftext|>d" + block(invoke("search", el("query", "a<|im_end|>b"))),
    "truncated_reasoning": f"{TS}Still thinking about",
    "truncated_in_call": f"{TS}r{TE}Sure. " + block(W, S)[:-60],
    "truncated_in_name": f"{TS}r{TE}" + f'{NS}<tool_call>\n{NS}<invoke name="get_wea',
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
FLAGS = {"both": ("minimax_m3", "minimax_m3"), "tools_only": (None, "minimax_m3"),
         "reasoning_only": ("minimax_m3", None)}
REQUEST_VARIANTS = ("call", "two_calls", "content_call", "think_content")
KWARGS = {"default": {}, "thinking": {"thinking_mode": "enabled"}}
THINKING_VARIANTS = ("think_content", "no_start_with_end", "leading_end", "call", "plain", "text_before_think",
                     "truncated_reasoning")


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        variants = [("both", "auto", "default"), ("tools_only", "auto", "default")]
        if name in REQUEST_VARIANTS:
            variants += [("both", req, "default") for req in ("none", "required", "named", "no_parallel", "no_tools")]
            variants += [("reasoning_only", "auto", "default")]
        if name in THINKING_VARIANTS:
            variants += [("both", "auto", "thinking")]
        for flags, req, kw in variants:
            reasoning, tool = FLAGS[flags]
            out.append({"name": f"{name}__{flags}_{req}_{kw}", "text": text, "reasoning_parser": reasoning,
                        "tool_parser": tool, "request": REQUESTS[req], "chat_template_kwargs": KWARGS[kw],
                        "finish": "length" if name.startswith("truncated") else "stop"})
    # thinking on: the output starts inside the reasoning the template opened
    for name, text in {"open_reasoning": f"Let me think.{TE}Answer.", "open_call": f"r{TE}" + block(W)}.items():
        out.append({"name": f"{name}__both_auto_thinking", "text": text, "reasoning_parser": "minimax_m3",
                    "tool_parser": "minimax_m3", "request": REQUESTS["auto"], "chat_template_kwargs": KWARGS["thinking"],
                    "finish": "stop"})
    return out


PROMPTS = {"open": f"<|im_start|>assistant\n{TS}", "closed": f"<|im_start|>assistant\n{TS}r{TE}",
           "none": "<|im_start|>assistant\n", "history": f"{TS}a{TE}b<|im_end|><|im_start|>assistant\n{TS}"}
