"""Inputs for the goldens of vLLM 0.33's `gemma4` reasoning and tool parsers: plain data, shared by
tests/oracle/record_gemma4.py (run with the oracle's vLLM 0.33) and tests/core/parsers/test_gemma4.py.

The tokenizer is Qwen3's with Gemma 4's control tokens added as special tokens (parser_models.py
`GEMMA4_TOKENS`): each marker and the string delimiter `<|"|>` is one token, as in the real model.
"""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "ratio": {"type": "number"}, "filters": {"type": "object", "properties": {"year": {"type": "integer"}}},
        "tags": {"type": "array", "items": {"type": "integer"}}, "code": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
]
Q = '<|"|>'
CALL = (f"<|tool_call>call:get_weather{{city:{Q}Tokyo{Q},days:3,metric:true,ratio:2.5,"
        f"filters:{{year:2020}},tags:[1,2],code:{Q}007{Q}}}<tool_call|>")
CALL2 = f"<|tool_call>call:search{{query:{Q}rain, \"today\" {{x}} [y]: z{Q}}}<tool_call|>"
START, END = "<|channel>", "<channel|>"

OUTPUTS = {
    "plain": "The answer is 4.",
    "reasoning_content": f"{START}thought\nLet me think.\n{END}It is sunny.",
    "reasoning_ws": f"{START}thought\n  Let me think.   \n\n{END}\n\nIt is sunny.  ",
    "reasoning_no_thought_label": f"{START}Let me think.{END}Answer.",
    "reasoning_only": f"{START}thought\nStill thinking about it.  ",
    "thought_only": f"{START}thought{END}Answer.",
    "thought_ws": f"{START}thought  \n {END}Answer.",
    "opened_by_prompt": f"thought\nLet me think.{END}The answer.",
    "closed_without_start": f"Let me think.{END}The answer.",
    "thought_then_channel": f"thought\nabc{START}x{END}y",
    "thought_word": "thought",
    "thought_sentence": "thought about it: yes.",
    "reasoning_call": f"{START}thought\nI should call it.{END}{CALL}",
    "call_in_reasoning": f"{START}thought\nthinking {CALL}",
    "reasoning_content_call": f"{START}thought\nok{END}Let me check.\n\n{CALL}",
    "one_call": CALL,
    "several_calls": f"{CALL}{CALL2}",
    "calls_then_text": f"{CALL}\nDone, see above.",
    "text_around_calls": f"Checking. {CALL} and {CALL2} done",
    "bare_colon_opener": f"<|tool_call>:search{{query:{Q}x{Q}}}<tool_call|>",
    "paren_args": f"<|tool_call>call:search(query:{Q}x (y){Q})<tool_call|>",
    "no_args": "<|tool_call>call:get_weather<tool_call|>",
    "empty_args": "<|tool_call>call:get_weather{}<tool_call|>",
    "unknown_tool": "<|tool_call>call:unknown_tool{x:1}<tool_call|>",
    "nested": (f"<|tool_call>call:get_weather{{filters:{{year:1999,inner:{{deep:[{Q}a{Q},{{k:{Q}}}{Q}}}]}}}},"
               f"tags:[[1,2],[3]],city:{Q}a{{b}}c{Q}}}<tool_call|>"),
    "bare_values": "<|tool_call>call:search{query:hello world,n:-1.5e3,b:false,z:null}<tool_call|>",
    "quoted_key": f"<|tool_call>call:search{{{Q}query{Q}:{Q}x{Q}}}<tool_call|>",
    "unterminated_string": f"<|tool_call>call:search{{query:{Q}never closed}}<tool_call|>",
    "unclosed_object": f"<|tool_call>call:get_weather{{filters:{{year:2020,city:{Q}x{Q}<tool_call|>",
    "empty_value": "<|tool_call>call:search{query:}<tool_call|>",
    "no_progress": "<|tool_call>call:search{query:,x:1}<tool_call|>",
    "repeated_key": f"<|tool_call>call:search{{query:{Q}a{Q},query:{Q}b{Q}}}<tool_call|>",
    "no_call_prefix": f"<|tool_call>search{{query:{Q}x{Q}}}<tool_call|>",
    "stray_markers": f"a{END}b<tool_call|>c{START}",
    "special_tokens": f"{START}thought\nr<|turn>x{END}c<|im_end|>d<turn|>e<|tool_response>f{Q}g",
    "double_start": f"{START}thought\na{START}b{END}c",
    "unicode": (f"{START}thought\n天气 été 🗼{END}答案 😀"
                f"<|tool_call>call:search{{query:{Q}雨 😀{Q}}}<tool_call|>"),
}
# cut off by max_tokens (finish_reason "length": no end-of-turn token)
TRUNCATED = {
    "truncated_in_reasoning": f"{START}thought\nLet me th",
    "truncated_in_call": f"Sure.{CALL[:60]}",
    "truncated_in_string": f"<|tool_call>call:search{{query:{Q}half a sent",
}
KWARGS = {"default": {}, "thinking": {"enable_thinking": True}}
THINKING_OUTPUTS = ("reasoning_content", "plain", "opened_by_prompt", "reasoning_call", "one_call")

CHOICES = {
    "required": (f"{START}thought\nr{END}{CALL}", {"tool_choice": "required"}),
    "named": (CALL2, {"tool_choice": {"type": "function", "function": {"name": "search"}}}),
    "named_json": ('{"query": "x"}', {"tool_choice": {"type": "function", "function": {"name": "search"}}}),
    "none": (f"{START}thought\nr{END}Text {CALL} more", {"tool_choice": "none"}),
    "single": (f"{CALL}{CALL2}", {"parallel_tool_calls": False}),
    "hidden_reasoning": (f"{START}thought\nr{END}{CALL}", {"include_reasoning": False}),
}
# prompts: vLLM's is_reasoning_end on the rendered prompt (Gemma 4 turn markers)
PROMPTS = {
    "open": "<|turn>user\nhi<turn|>\n<|turn>model\n",
    "open_channel": "<|turn>user\nhi<turn|>\n<|turn>model\n<|channel>thought\n",
    "closed": "<|turn>user\nhi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
    "channel_in_earlier_turn": "<|turn>model\n<|channel>a<turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\n",
    "after_tool_response": "<|turn>model\n<|tool_call>call:f{}<tool_call|><|tool_response>x<tool_response|>",
}
FLAGS = {"reasoning_parser": "gemma4", "tool_parser": "gemma4"}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        for kw, kwargs in KWARGS.items():
            if kw == "thinking" and name not in THINKING_OUTPUTS:
                continue
            out.append({"name": f"{name}__{kw}", "text": text, **FLAGS, "request": {"tools": TOOLS},
                        "chat_template_kwargs": kwargs, "finish": "stop"})
    for name, text in TRUNCATED.items():
        out.append({"name": f"{name}__default", "text": text, **FLAGS, "request": {"tools": TOOLS},
                    "chat_template_kwargs": {}, "finish": "length"})
    for name, (text, request) in CHOICES.items():
        out.append({"name": f"choice_{name}__default", "text": text, **FLAGS, "request": {"tools": TOOLS, **request},
                    "chat_template_kwargs": {}, "finish": "stop"})
    # each parser alone: without a reasoning parser the channel markers are text to the tool parser
    for name in ("reasoning_call", "special_tokens", "plain", "closed_without_start", "opened_by_prompt"):
        out.append({"name": f"tools_only:{name}__default", "text": OUTPUTS[name], "reasoning_parser": None,
                    "tool_parser": "gemma4", "request": {"tools": TOOLS}, "chat_template_kwargs": {},
                    "finish": "stop"})
        out.append({"name": f"reasoning_only:{name}__default", "text": OUTPUTS[name], "reasoning_parser": "gemma4",
                    "tool_parser": None, "request": {"tools": TOOLS}, "chat_template_kwargs": {},
                    "finish": "stop"})
    return out
