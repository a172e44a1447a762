"""Inputs for the goldens of vLLM 0.33's single-block JSON tool parsers (`phi4_mini_json`,
`internlm`, `jamba`): plain data, shared by tests/oracle/record_json_block.py (run with the
oracle's vLLM 0.33) and tests/core/parsers/test_json_block.py.

Tokenizers (parser_models.py): phi4_mini_json reads `functools[` as text, so Qwen3's own
tokenizer serves; internlm is Qwen3's plus `<|action_start|>`, `<|plugin|>`, `<|action_end|>` as
special tokens (`INTERNLM_TOKENS`, as in InternLM2/3); jamba is Qwen3's plus `<tool_calls>`,
`</tool_calls>` as special tokens (`JAMBA_TOKENS`; vLLM's jamba parser refuses a vocabulary
without them).
"""

import json

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
]
ARGS = {"city": "Tokyo", "days": 3, "ratio": 2.5, "metric": True, "off": False, "code": None,
        "tags": ["a", 1, {"k": []}], "filters": {"year": 2020}, "uni": "天气 😀", "esc": 'a"b\\n\u00e9'}
W = json.dumps({"name": "get_weather", "arguments": ARGS}, ensure_ascii=False)
S = '{"name": "search", "arguments": {"query": "rain <b>"}}'
S_PARAMS = '{"name": "search", "parameters": {"query": "x"}}'

REQUESTS = {
    "auto": {"tools": TOOLS},
    "none": {"tools": TOOLS, "tool_choice": "none"},
    "required": {"tools": TOOLS, "tool_choice": "required"},
    "named": {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "no_tools": {},
}
# forced choices: the output is the JSON the structured output constrains it to
FORCED = {"required": '[{"name": "get_weather", "parameters": {"city": "Oslo"}}]',
          "named": '{"city": "Oslo", "days": 2}'}
REQUEST_VARIANTS = ("one_call", "text_before", "plain")

PHI4 = {
    "plain": "It is sunny in Tokyo.",
    "empty": "",
    "one_call": f"functools[{S}]",
    "several_calls": f"functools[{S}, {S_PARAMS}]",
    "text_before": f"Let me check. functools[{S}]",
    "text_after": f"functools[{S}] and after",
    "nested_list_in_args": f"functools[{W}]",
    "parameters_key": f"functools[{S_PARAMS}]",
    "both_keys": 'functools[{"name": "search", "parameters": {"a": 1}, "arguments": {"b": 2}}]',
    "string_arguments": 'functools[{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}]',
    "null_arguments": 'functools[{"name": "search", "arguments": null}]',
    "number_arguments": 'functools[{"name": "search", "arguments": 5}]',
    "missing_arguments": 'functools[{"name": "search"}]',
    "missing_name": 'functools[{"arguments": {}}]',
    "int_name": 'functools[{"name": 7, "arguments": {}}]',
    "not_an_object": 'functools["search", 1]',
    "bad_json": "Sure functools[{name: search}] x",
    "empty_list": "functools[]",
    "blank_list": "a functools[  ] b",
    "unclosed": f"Sure functools[{S}",
    "second_block": f"functools[{S}] functools[{S_PARAMS}]",
    "partial_marker": "import functools\nfunctools.reduce(f, [1, 2]) and functools",
    "duplicate_keys": 'functools[{"name": "a", "name": "search", "arguments": {"q": 1}, "arguments": {"q": 2}}]',
    "nan": 'functools[{"name": "search", "arguments": {"x": NaN, "y": -Infinity}}]',
    "unicode": 'functools[{"name": "search", "arguments": {"query": "雨 🌧 été"}}]',
    "whitespace_around": f"  \n functools[ {S} ]\n ",
    "truncated_in_call": f"Sure functools[{S[:20]}",
    "truncated_after_call": f"functools[{S}] and th",
}

INTERNLM_START, INTERNLM_END = "<|action_start|><|plugin|>", "<|action_end|>"


def _ilm(body: str, end: bool = True) -> str:
    return f"{INTERNLM_START}\n{body}{INTERNLM_END if end else ''}"


INTERNLM = {
    "plain": "It is sunny in Tokyo.",
    "one_call": _ilm(S),
    "text_before": f"Let me check.\n{_ilm(S)}",
    "text_after": f"{_ilm(S)} and after",
    "whitespace_before": f"  \n{_ilm(S)}",
    "args_types": _ilm(W),
    "parameters_key": _ilm(S_PARAMS),
    "both_keys": _ilm('{"name": "search", "parameters": {"a": 1}, "arguments": {"b": 2}}'),
    "no_arguments": _ilm('{"name": "search"}'),
    "null_parameters": _ilm('{"name": "search", "parameters": null}'),
    "string_arguments": _ilm('{"name": "search", "arguments": "x"}'),
    "prefix_before_brace": _ilm('call: {"name": "search", "arguments": {}}'),
    "no_end": f"ok {_ilm(S, end=False)}",
    "unknown_tool": _ilm('{"name": "no_such_tool", "arguments": {"x": 1}}'),
    "action_start_only": "<|action_start|> just text <|action_end|>",
    "plugin_alone": f"<|plugin|>{S}",
    "unicode": _ilm('{"name": "search", "arguments": {"query": "雨 🌧 été"}}'),
    "nan": _ilm('{"name": "search", "arguments": {"x": NaN}}'),
    # vLLM's parser raises on these (its server answers an error): ours answers the output as content
    "bad_json": f"Hi {_ilm('{name: search}')}",
    "missing_name": _ilm('{"arguments": {}}'),
    "int_name": _ilm('{"name": 7, "arguments": {}}'),
    "trailing_text_in_call": _ilm(f"{S} trailing"),
    "two_calls": f"{_ilm(S)}\n{_ilm(S_PARAMS)}",
    "no_brace": _ilm("search"),
    "truncated_in_call": f"Sure {_ilm(S[:20], end=False)}",
    "truncated_after_call": f"{_ilm(S)} and th",
}
# the outputs vLLM's internlm parser raises on (tests: ours gives the whole output as content)
INTERNLM_RAISES = {"bad_json", "missing_name", "int_name", "trailing_text_in_call", "two_calls", "no_brace",
                   "truncated_in_call"}

JAMBA_START, JAMBA_END = "<tool_calls>", "</tool_calls>"


def _jb(body: str) -> str:
    return f"{JAMBA_START}{body}{JAMBA_END}"


JAMBA = {
    "plain": "It is sunny in Tokyo.",
    "one_call": _jb(f"[{S}]"),
    "several_calls": _jb(f"[{W}, {S}]"),
    "text_before": f"Let me check. {_jb(f'[{S}]')}",
    "space_before": f" {_jb(f'[{S}]')}",
    "whitespace_before": f"\n\n{_jb(f'[{S}]')}",
    "text_after": f"{_jb(f'[{S}]')} and after",
    "second_block": f"{_jb(f'[{S}]')}{_jb(f'[{W}]')}",
    "parameters_key": _jb(f"[{S_PARAMS}]"),
    "null_arguments": _jb('[{"name": "search", "arguments": null}]'),
    "string_arguments": _jb('[{"name": "search", "arguments": "x"}]'),
    "object_not_list": _jb(S),
    "empty_list": f"Hi {_jb('[]')}",
    "empty_object": _jb("{}"),
    "empty_string": _jb('""'),
    "int_name": _jb('[{"name": 7, "arguments": {}}]'),
    "bad_json": f"Hi {_jb('[{name: search}]')} x",
    "unclosed": f"Sure {JAMBA_START}[{S}]",
    "end_only": f"x {JAMBA_END}",
    "end_before_start": f"{JAMBA_END} a {_jb(f'[{S}]')}",
    "nested_start": f"{JAMBA_START}a{_jb(f'[{S}]')}",
    "unicode": _jb('[{"name": "search", "arguments": {"query": "雨 🌧 été"}}]'),
    "nan": _jb('[{"name": "search", "arguments": {"x": NaN}}]'),
    "truncated_in_call": f"Sure {JAMBA_START}[{S[:20]}",
    "truncated_after_call": f"{_jb(f'[{S}]')} and th",
}

FAMILIES = {"phi4_mini_json": PHI4, "internlm": INTERNLM, "jamba": JAMBA}


def cases(family: str) -> list[dict]:
    out = []
    for name, text in FAMILIES[family].items():
        for req in ("auto", *(("none", "required", "named", "no_tools") if name in REQUEST_VARIANTS else ())):
            out.append({"name": f"{name}__{req}", "text": text, "reasoning_parser": None, "tool_parser": family,
                        "request": REQUESTS[req], "chat_template_kwargs": {},
                        "finish": "length" if name.startswith("truncated") else "stop"})
    for req, json_text in FORCED.items():
        out.append({"name": f"forced_json__{req}", "text": json_text, "reasoning_parser": None,
                    "tool_parser": family, "request": REQUESTS[req], "chat_template_kwargs": {}, "finish": "stop"})
    return out
