"""Inputs for the goldens of vLLM 0.33's `seed_oss` reasoning and tool parsers: plain data, shared
by tests/oracle/record_seed_oss.py (run with the oracle's vLLM 0.33) and tests/core/parsers/test_seed_oss.py.

The tokenizer is Qwen3's with Seed-OSS's six control tokens added as special tokens
(parser_models.py `SEED_OSS_TOKENS`): `<seed:think>`, `<seed:tool_call>` and the turn boundaries
are one token each, as in the real model. Qwen3's own `<think>` / `<tool_call>` stay in the
vocabulary as ordinary added tokens: for Seed-OSS they are plain text.
"""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "filters": {"type": "object", "properties": {"year": {"type": "integer"}}}, "code": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}}}}},
]
CALL = ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=filters>\n{\"year\": 2020}\n</parameter>\n"
        "<parameter=code>\n007\n</parameter>\n</function>\n</seed:tool_call>")
CALL2 = ("<seed:tool_call>\n<function=search>\n<parameter=query>\nrain \"today\" <b>\n</parameter>\n"
         "<parameter=limit>\n2.5\n</parameter>\n</function>\n</seed:tool_call>")
THINK = "<seed:think>"
END = "</seed:think>"

OUTPUTS = {
    "reasoning_content": f"{THINK}Let me think.\n{END}\n\nIt is sunny.",
    "reasoning_ws": f"{THINK}\n  Let me think.   \n\n{END}\n\nIt is sunny.  ",
    "opened_by_prompt": f"Let me think.{END}The answer.",
    "reasoning_only": f"{THINK}Still thinking about it.  ",
    "reasoning_call": f"{THINK}I should call it.\n{END}\n\n{CALL}",
    "reasoning_content_call": f"{THINK}ok{END}Let me check.\n\n{CALL}",
    "call_in_reasoning": f"{THINK}thinking {CALL}",
    "several_calls": f"{THINK}Two calls.{END}\n{CALL}\n{CALL2}",
    "calls_then_text": f"{THINK}r{END}{CALL}\nDone, see above.",
    "budget_reflect": (f"{THINK}Step one.<seed:cot_budget_reflect>I have used 12 tokens.</seed:cot_budget_reflect>"
                       f"\nStep two.{END}Answer."),
    "empty_reasoning": f"{THINK}{END}\n\nJust the answer.",
    "empty_content": f"{THINK}All of it is reasoning.{END}\n\n",
    "no_markers": "plain text without tags",
    "qwen_markers_are_text": f"<think>not markup</think>{THINK}r{END}<tool_call>\n<function=get_weather>\n</tool_call>",
    "special_tokens": f"{THINK}r<seed:eos>x{END}c<|endoftext|>d<seed:bos>e<|im_end|>f",
    "double_end": f"{THINK}r{END}c{END}d",
    "bare_function": f"{THINK}r{END}<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>",
    "unclosed_parameter": (f"{THINK}r{END}<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                           "<parameter=days>\n2\n</parameter>\n</function>\n</seed:tool_call>"),
    "unclosed_function_name": f"{THINK}r{END}<seed:tool_call>\n<function=get_weather\n</seed:tool_call>after",
    "no_function": f"{THINK}r{END}<seed:tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{}}}}\n</seed:tool_call>",
    "unknown_tool": (f"{THINK}r{END}<seed:tool_call>\n<function=unknown_tool>\n<parameter=x>\n1\n</parameter>\n"
                     "</function>\n</seed:tool_call>"),
    "markup_in_value": (f"{THINK}r{END}<seed:tool_call>\n<function=search>\n<parameter=query>\na </function> b\n"
                        "</parameter>\n</function>\n</seed:tool_call>"),
    "unicode": f"{THINK}天气 été 🗼{END}答案 😀{CALL2.replace('rain', '雨')}",
}
# cut off by max_tokens (finish_reason "length": no end-of-turn token)
TRUNCATED = {
    "truncated_in_reasoning": f"{THINK}Let me th",
    "truncated_in_call": f"{THINK}r{END}Sure.{CALL[:70]}",
    "truncated_in_value": f"{THINK}r{END}{CALL[:55]}",
}
KWARGS = {"default": {}, "nothink": {"enable_thinking": False}, "budget": {"thinking_budget": 0}}
BUDGET_OUTPUTS = ("reasoning_content", "reasoning_call", "budget_reflect", "no_markers")

# forced and suppressed calls: (name, text, request fields)
CHOICES = {
    "required": (f"{THINK}r{END}[{{\"name\": \"get_weather\", \"parameters\": {{\"city\": \"Rome\"}}}}]",
                 {"tool_choice": "required"}),
    "named": (f"{THINK}r{END}{{\"city\": \"Rome\"}}",
              {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    "none": (f"{THINK}r{END}Text {CALL} more", {"tool_choice": "none"}),
    "single": (f"{THINK}r{END}{CALL}{CALL2}", {"parallel_tool_calls": False}),
    "hidden_reasoning": (f"{THINK}r{END}{CALL}", {"include_reasoning": False}),
}
# prompts: vLLM's is_reasoning_end on the rendered prompt (Seed-OSS turn boundaries)
PROMPTS = {
    "open": "<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n",
    "prefilled_think": "<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n<seed:think>",
    "closed": "<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n<seed:think></seed:think>",
    "closed_in_earlier_turn": "<seed:bos>assistant\n<seed:think>a</seed:think>b<seed:eos><seed:bos>user\nhi<seed:eos>"
                              "<seed:bos>assistant\n",
    "qwen_markers": "<|im_start|>assistant\n<think>\n\n</think>\n\n",
}
FLAGS = {"reasoning_parser": "seed_oss", "tool_parser": "seed_oss"}


def cases() -> list[dict]:
    out = []
    for name, text in OUTPUTS.items():
        for kw, kwargs in KWARGS.items():
            if kw == "budget" and name not in BUDGET_OUTPUTS:
                continue
            out.append({"name": f"{name}__{kw}", "text": text, **FLAGS, "request": {"tools": TOOLS},
                        "chat_template_kwargs": kwargs, "finish": "stop"})
    for name, text in TRUNCATED.items():
        out.append({"name": f"{name}__default", "text": text, **FLAGS, "request": {"tools": TOOLS},
                    "chat_template_kwargs": {}, "finish": "length"})
    for name, (text, request) in CHOICES.items():
        out.append({"name": f"choice_{name}__default", "text": text, **FLAGS, "request": {"tools": TOOLS, **request},
                    "chat_template_kwargs": {}, "finish": "stop"})
    # each parser alone: the reasoning markup is plain text to the tool parser without a reasoning parser
    for name in ("reasoning_call", "special_tokens", "no_markers"):
        out.append({"name": f"tools_only:{name}__default", "text": OUTPUTS[name], "reasoning_parser": None,
                    "tool_parser": "seed_oss", "request": {"tools": TOOLS}, "chat_template_kwargs": {},
                    "finish": "stop"})
        out.append({"name": f"reasoning_only:{name}__default", "text": OUTPUTS[name], "reasoning_parser": "seed_oss",
                    "tool_parser": None, "request": {"tools": TOOLS}, "chat_template_kwargs": {},
                    "finish": "stop"})
    return out
