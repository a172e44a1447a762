"""Inputs for the gpt-oss (Harmony) parser goldens: plain data, shared by the recorder
(tests/oracle/record_harmony_parser.py, run with the oracle's vLLM 0.33) and the tests.

A case: name, the assistant output as text with Harmony's special tokens written out (encoded
with the tokenizer, special tokens recognized), the parser flags and the request's fields.
"""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Current time",
                                          "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}
TOOLS = [WEATHER, TIME]

A = "<|start|>assistant"
ANALYSIS = "<|channel|>analysis<|message|>The user asks about the weather. I should call get_weather.<|end|>"
CALL = (A + "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city":"Tokyo","unit":"c"}<|call|>')
FINAL = A + "<|channel|>final<|message|>It is sunny in Tokyo.<|return|>"

BOTH = {"reasoning_parser": "openai_gptoss", "tool_parser": "openai"}
REASONING_ONLY = {"reasoning_parser": "openai_gptoss", "tool_parser": None}

OUTPUTS = {
    "reasoning_then_final": ANALYSIS + FINAL,
    "final_only": "<|channel|>final<|message|>Hello there!<|return|>",
    "reasoning_then_call": ANALYSIS + CALL,
    "preamble_then_call": ANALYSIS + A + "<|channel|>commentary<|message|>Let me check.<|end|>" + CALL,
    "two_calls": (ANALYSIS + A + "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                  '{"city": "Oslo"}<|call|>' + A + "<|channel|>commentary to=functions.get_time <|constrain|>json"
                  '<|message|>{"tz":"Europe/Oslo"}<|call|>'),
    "call_legacy_header": (ANALYSIS + "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                           '<|message|>{"city":"Paris"}<|call|>'),
    "call_on_analysis_channel": ('<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>'
                                 '{"city": "Rome"}<|call|>'),
    "call_no_content_type": '<|channel|>commentary to=functions.get_time<|message|>{"tz": "UTC"}<|call|>',
    "call_code_content_type": ('<|channel|>commentary to=functions.get_weather <|constrain|>code<|message|>'
                               '{"city":  "Lima"}<|call|>'),
    "call_invalid_json": '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{city: Lima}<|call|>',
    "call_plain_text_args": '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>Lima<|call|>',
    "call_empty_args": "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|><|call|>",
    "call_unicode_args": ('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
                          '{"city":"東京 🗼 São Paulo"}<|call|>'),
    "call_nested_args": ('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
                         '{"city":"x","opts":{"a":[1,2.50,1e3,true,null],"s":"q\\"uote\\u00e9"}}<|call|>'),
    "call_bare_recipient": '<|channel|>commentary to=get_weather <|constrain|>json<|message|>{"city":"Bern"}<|call|>',
    "call_builtin_recipient": '<|channel|>analysis to=python code<|message|>print(1)<|call|>',
    "call_then_final": CALL.replace("<|call|>", "<|end|>") + FINAL,
    "multiple_finals": ("<|channel|>final<|message|>Part one.<|end|>" + A
                        + "<|channel|>final<|message|>Part two.<|return|>"),
    "multiple_analysis": (ANALYSIS + A + "<|channel|>analysis<|message|>More thoughts.<|end|>" + FINAL),
    "preamble_then_final": (A[len("<|start|>assistant"):] + "<|channel|>commentary<|message|>Checking.<|end|>"
                            + FINAL),
    "truncated_in_analysis": "<|channel|>analysis<|message|>Still thinking about the",
    "truncated_in_final": ANALYSIS + A + "<|channel|>final<|message|>It is sun",
    "truncated_in_args": '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tok',
    "truncated_in_header": ANALYSIS + A + "<|channel|>fin",
    "truncated_first_header": "<|channel|>ana",
    "no_channel_header": "<|message|>Hi without channel<|return|>",
    "junk_between_messages": ANALYSIS + "stray text" + FINAL,
    "bad_header_then_final": "<|channel|>final extra words here<|message|>lost<|end|>" + FINAL,
    "unknown_channel": "<|channel|>secret<|message|>hidden<|end|>" + FINAL,
    "tool_author_message": (ANALYSIS + "<|start|>functions.get_weather to=assistant<|channel|>commentary"
                            "<|message|>{\"t\": 20}<|end|>" + FINAL),
    "empty_final": "<|channel|>final<|message|><|return|>",
    "whitespace_final": "<|channel|>final<|message|>  \n<|return|>",
    # whitespace-only content beside a call: vLLM's Harmony path keeps it (no generic content rule)
    "whitespace_final_then_call": "<|channel|>final<|message|> \n<|end|>" + CALL,
    "whitespace_preamble_then_call": ANALYSIS + A + "<|channel|>commentary<|message|>\n\n<|end|>" + CALL,
    "special_tokens_in_content": "<|channel|>final<|message|>a <|channel|> b <|startoftext|> c<|return|>",
    "unicode_content": "<|channel|>final<|message|>東京は晴れ 🌞 naïve<|return|>",
    "no_stop_token": "<|channel|>final<|message|>no stop token at the end",
}

# (name suffix, flags, request fields) variants applied to some outputs
REQUESTS = {
    "auto": (BOTH, {"tools": TOOLS}),
    "no_tools": (BOTH, {}),
    "reasoning_only": (REASONING_ONLY, {"tools": TOOLS}),
    "none": (BOTH, {"tools": TOOLS, "tool_choice": "none"}),
    "required": (BOTH, {"tools": TOOLS, "tool_choice": "required"}),
    "named": (BOTH, {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    "no_parallel": (BOTH, {"tools": TOOLS, "parallel_tool_calls": False}),
    "hide_reasoning": (BOTH, {"tools": TOOLS, "include_reasoning": False}),
}
VARIANTS_FOR = {
    "reasoning_then_call": ["no_tools", "reasoning_only", "none", "required", "named", "hide_reasoning"],
    "two_calls": ["no_parallel", "required", "named"],
    "reasoning_then_final": ["no_tools", "reasoning_only", "required", "named", "hide_reasoning"],
    "preamble_then_call": ["required", "reasoning_only"],
    "whitespace_final": ["required", "named"],
    "whitespace_final_then_call": ["required", "no_parallel"],
    "whitespace_preamble_then_call": ["named"],
    "empty_final": ["named"],
}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        for variant in ["auto", *VARIANTS_FOR.get(name, [])]:
            flags, request = REQUESTS[variant]
            out.append({"name": f"{name}__{variant}", "text": text, **flags, "request": request})
    return out
