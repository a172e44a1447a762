"""Inputs for the goldens of vLLM 0.33's Qwen3-grammar variants (`step3p5` reasoning and tools,
`nemotron_v3` reasoning): plain data, shared by tests/oracle/record_qwen3_variants.py (run with the
oracle's vLLM 0.33 on the oracle's tiny-qwen3) and the tests. Qwen3's tokenizer has every marker of
these formats (`<think>`, `<tool_call>`, ChatML turn boundaries).
"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
CALL = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n</function>\n</tool_call>")

OUTPUTS = {
    "reasoning_content": "Let me think.\n</think>\n\nIt is sunny.",
    "reasoning_ws": "Let me think.   \n\n</think>\n\nIt is sunny.  ",
    "reasoning_only": "Still thinking about it.  ",
    "reasoning_call": "I should call it.\n</think>\n\n" + CALL,
    "call_in_reasoning": "thinking " + CALL,
    "think_tags": "<think>\nabc\n</think>\n\nAnswer.",
    "no_close": "plain text without tags",
    "empty_content": "All of it is reasoning.\n</think>\n\n",
    "special_tokens": "r<|im_end|>x\n</think>\n\nc<|endoftext|>d",
}
FLAGS = {
    "step3p5": {"reasoning_parser": "step3p5", "tool_parser": "step3p5"},
    "nemotron_v3": {"reasoning_parser": "nemotron_v3", "tool_parser": "qwen3_coder"},
}
KWARGS = {"default": {}, "nothink": {"enable_thinking": False}, "force": {"force_nonempty_content": True}}


def cases() -> list[dict]:
    out = []
    for fam, flags in FLAGS.items():
        for name, text in OUTPUTS.items():
            for kw in ("default", "nothink", "force"):
                if kw == "force" and fam != "nemotron_v3":
                    continue
                out.append({"name": f"{fam}:{name}__{kw}", "text": text, **flags, "request": {"tools": TOOLS},
                            "chat_template_kwargs": KWARGS[kw], "finish": "stop"})
    return out
