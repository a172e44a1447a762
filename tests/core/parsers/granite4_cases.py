"""Inputs for the goldens of vLLM 0.33's Granite 4 parsers (`--tool-call-parser granite4`,
`--reasoning-parser granite_thinking_parser`): plain data, shared by
tests/oracle/record_granite4.py (run with the oracle's vLLM 0.33) and tests/core/parsers/test_granite4.py.

The tokenizer is Qwen3's plus Granite 4's role markers as special tokens (parser_models.py
`GRANITE4_TOKENS`, `<|end_of_text|>` the eos): `<think>`, `</think>`, `<tool_call>` and
`</tool_call>` are Qwen3's own added tokens (one id each, not special), which is what the
reasoning engine needs (it matches `<think>` / `</think>` by id); the granite4 tool parser reads
text only.
"""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}}}}},
]
ARGS = ('{"city": "Tokyo", "days": 3, "ratio": 2.5, "metric": true, "off": false, "code": null, '
        '"tags": ["a", 1, {"k": []}], "filters": {"year": 2020}, "uni": "天气 😀", "esc": "a\\"b\\\\n\\u00e9"}')
CALL = f'<tool_call>\n{{"name": "get_weather", "arguments": {ARGS}}}\n</tool_call>'
CALL2 = '<tool_call>\n{"name": "search", "arguments": {"query": "rain <b>", "limit": 2}}\n</tool_call>'
CALL_FLAT = '<tool_call>{"arguments": {"query": "x"}, "name": "search"}</tool_call>'  # keys in the other order
THINK, END = "<think>", "</think>"


def call(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


OUTPUTS = {
    "plain": "It is sunny in Tokyo.",
    "reasoning_content": f"{THINK}Let me think.\n{END}\nIt is sunny.",
    "reasoning_newlines": f"{THINK}\n  Let me think.   \n\n{END}\n\n\nIt is sunny.\n",
    "opened_by_prompt": f"Let me think.{END}\nThe answer.",
    "reasoning_only": f"{THINK}Still thinking about it.  ",
    "empty_content": f"{THINK}All of it is reasoning.{END}\n\n",
    "content_spaces": f"{THINK}r{END} \n ",
    "empty_reasoning": f"{THINK}{END}\nJust the answer.",
    "no_think_tags": "plain text\nwithout tags\n",
    "one_call": CALL,
    "reasoning_call": f"{THINK}I should call it.\n{END}\n{CALL}",
    "reasoning_content_call": f"{THINK}ok{END}\nLet me check.\n{CALL}",
    "several_calls": f"{THINK}Two calls.{END}\n{CALL}\n{CALL2}",
    "text_around_calls": f"Before {CALL} middle {CALL2} after.",
    "calls_back_to_back": f"{CALL}{CALL2}{CALL_FLAT}",
    "call_in_reasoning": f"{THINK}thinking {CALL}",
    "string_arguments": call('{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}'),
    "null_arguments": call('{"name": "search", "arguments": null}'),
    "list_arguments": call('{"name": "search", "arguments": [1, 2]}'),
    "number_arguments": call('{"name": "search", "arguments": 5}'),
    "empty_arguments": call('{"name": "search", "arguments": {}}'),
    "int_name": call('{"name": 7, "arguments": {}}'),
    "missing_arguments": call('{"name": "search"}'),
    "missing_name": call('{"arguments": {}}'),
    "extra_keys": call('{"name": "search", "arguments": {"q": 1}, "id": "x"}'),
    "duplicate_keys": call('{"name": "a", "name": "search", "arguments": {"q": 1}, "arguments": {"q": 2}}'),
    "unknown_tool": call('{"name": "no_such_tool", "arguments": {"x": 1}}'),
    "not_an_object": call('["search", {}]'),
    "bad_json": f"Text {call('{name: search}')} more",
    "bad_second_call": f"Hi {CALL} {call('{oops')}",
    "empty_call": f"a{call('')}b",
    "whitespace_call": f"a{call('  ')}b",
    "nested_start": "<tool_call>{\"name\": \"search\", <tool_call>\"arguments\": {}}</tool_call>",
    "end_without_start": 'x</tool_call>{"name": "search", "arguments": {}}',
    "unclosed_call": "Sure. <tool_call>{\"name\": \"search\", \"arguments\": {}}",
    "partial_start_tag_text": "a <tool_ca b <tool_call c",
    "json_nan": call('{"name": "search", "arguments": {"limit": NaN, "x": Infinity}}'),
    "trailing_text_in_call": call('{"name": "search", "arguments": {}} trailing'),
    "special_tokens": f"{THINK}r<|end_of_text|>x{END}\nc<|start_of_role|>d<|im_end|>e<|endoftext|>{CALL2}",
    "markers_in_arguments": call('{"name": "search", "arguments": {"query": "<think> a </think> b"}}'),
    "double_end_think": f"{THINK}r{END}c{END}d",
    "unicode": f"{THINK}天气 été 🗼{END}\n答案 😀{CALL2.replace('rain', '雨')}",
}
# cut off by max_tokens (finish_reason "length": no end-of-turn token)
TRUNCATED = {
    "truncated_in_reasoning": f"{THINK}Let me th",
    "truncated_in_call": f"{THINK}r{END}\nSure.{CALL[:60]}",
    "truncated_after_call": f"{THINK}r{END}\n{CALL}\nAnd th",
}
KWARGS = {"default": {}, "nothink": {"enable_thinking": False}, "force": {"force_nonempty_content": True}}
# the outputs also run with thinking off / forced content (the swap rules)
KWARGS_OUTPUTS = ("plain", "reasoning_content", "reasoning_only", "empty_content", "content_spaces", "opened_by_prompt",
                  "reasoning_call", "empty_reasoning", "no_think_tags")

# forced and suppressed calls: (name, text, request fields)
CHOICES = {
    "required": (f"{THINK}r{END}\n[{{\"name\": \"get_weather\", \"parameters\": {{\"city\": \"Rome\"}}}}]",
                 {"tool_choice": "required"}),
    "named": (f"{THINK}r{END}\n{{\"city\": \"Rome\"}}",
              {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    "none": (f"{THINK}r{END}\nText {CALL} more", {"tool_choice": "none"}),
    "auto": (f"{THINK}r{END}\n{CALL}", {"tool_choice": "auto"}),
    "single": (f"{THINK}r{END}\n{CALL}{CALL2}", {"parallel_tool_calls": False}),
    "hidden_reasoning": (f"{THINK}r{END}\n{CALL}", {"include_reasoning": False}),
    "hidden_reasoning_text": (f"{THINK}r{END}\nhello", {"include_reasoning": False}),
}
# prompts: vLLM's is_reasoning_end on a rendered prompt
PROMPTS = {
    "open": "<|start_of_role|>user<|end_of_role|>hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
    "prefilled_think": "<|start_of_role|>assistant<|end_of_role|><think>",
    "closed": "<|start_of_role|>assistant<|end_of_role|><think>\n</think>\n",
    "closed_in_earlier_turn": "<|im_start|>assistant\n<think>a</think>b<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                              "<|im_start|>assistant\n",
}
FLAGS = {"reasoning_parser": "granite_thinking_parser", "tool_parser": "granite4"}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        for kw, kwargs in KWARGS.items():
            if kw != "default" and name not in KWARGS_OUTPUTS:
                continue
            out.append({"name": f"{name}__{kw}", "text": text, **FLAGS, "request": {"tools": TOOLS},
                        "chat_template_kwargs": kwargs, "finish": "stop"})
    for name, text in TRUNCATED.items():
        for kw in ("default", "force"):
            out.append({"name": f"{name}__{kw}", "text": text, **FLAGS, "request": {"tools": TOOLS},
                        "chat_template_kwargs": KWARGS[kw], "finish": "length"})
    for name, (text, request) in CHOICES.items():
        out.append({"name": f"choice_{name}__default", "text": text, **FLAGS, "request": {"tools": TOOLS, **request},
                    "chat_template_kwargs": {}, "finish": "stop"})
    # each parser alone: the reasoning markup is plain text to the tool parser without a reasoning parser
    for name in ("reasoning_call", "special_tokens", "text_around_calls", "reasoning_newlines", "bad_json"):
        out.append({"name": f"tools_only:{name}__default", "text": OUTPUTS[name], "reasoning_parser": None,
                    "tool_parser": "granite4", "request": {"tools": TOOLS}, "chat_template_kwargs": {},
                    "finish": "stop"})
        out.append({"name": f"reasoning_only:{name}__default", "text": OUTPUTS[name],
                    "reasoning_parser": "granite_thinking_parser", "tool_parser": None, "request": {"tools": TOOLS},
                    "chat_template_kwargs": {}, "finish": "stop"})
    # a request without tools: the parsers still run (skip_special_tokens stays the default)
    for name in ("reasoning_call", "text_around_calls"):
        out.append({"name": f"no_tools_in_request:{name}__default", "text": OUTPUTS[name], **FLAGS, "request": {},
                    "chat_template_kwargs": {}, "finish": "stop"})
    return out
