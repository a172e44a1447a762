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
