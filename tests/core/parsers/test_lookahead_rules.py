"""Regressions of issue 14's look-ahead classes that are closed: the non-streaming answer follows
what the stream sends (a deliberate difference from vLLM 0.33, core/parsers/README.md, "vLLM 0.33
bugs we do not follow"), or the stream holds text until what follows decides.

Each case is a minimal output through its family's real test tokenizer: the non-streaming answer
is the one written here, and a stream one token per chunk and in one chunk aggregates to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.parsers.engine_parsers import MAX_RAW_HOLD
from tests.core.parsers import gemma4_cases, minimax_cases, step3_cases
from tests.core.parsers.helpers import chunk_texts, make_parser, stream

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
QWEN_XML = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
SEED_XML = ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n"
            "</seed:tool_call>")
GLM = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
MISTRAL = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
MINIMAX = minimax_cases.block(minimax_cases.invoke("get_weather", {"city": "Paris"}))
GEMMA4 = f"<|tool_call>call:get_weather{{city:{gemma4_cases.Q}Paris{gemma4_cases.Q}}}<tool_call|>"
STEP3 = step3_cases.block(step3_cases.call("get_weather", {"city": "Paris"}))
OLMO = 'get_weather(city="Paris")'
LLAMA = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
PARIS = [("get_weather", '{"city": "Paris"}')]
LLAMA_ARGS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
V31_PING = "<｜tool▁call▁begin｜>ping<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
V3_PING = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>ping\n```json\n{}\n```<｜tool▁call▁end｜>"
DS_BLOCK = "<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>"

# (id, tokenizer, reasoning parser, tool parser, output, reasoning, content, calls (name, arguments))
CASES: list[tuple[str, str, str | None, str, str, str | None, str | None, list[tuple[str, str]]]] = [
    # the leading whitespace of the content before calls: kept (vLLM's answer strips it)
    ("qwen3_xml", "qwen3", "qwen3", "qwen3_xml", f"<think>r</think>\n\nHi \n{QWEN_XML}", "r", "\n\nHi", PARIS),
    ("qwen3_coder no reasoning", "qwen3", None, "qwen3_coder", f"  Hi\n{QWEN_XML}", None, "  Hi", PARIS),
    ("nemotron_v3", "qwen3", "nemotron_v3", "qwen3_coder", f"r</think>\n\nHi \n{QWEN_XML}", "r", "\n\nHi", PARIS),
    ("step3p5", "qwen3", "step3p5", "step3p5", f"r</think>\n\nHi \n{QWEN_XML}", "r", "\n\nHi", PARIS),
    ("glm45", "qwen3", "glm45", "glm45", f"<think>r</think>\n Hi\n{GLM}", "r", "\n Hi", PARIS),
    ("mistral v13", "mistral13", "mistral", "mistral", f"[THINK]r[/THINK]\n\nHi \n{MISTRAL}", "r", "\n\nHi", PARIS),
    ("seed_oss", "seed_oss", "seed_oss", "seed_oss", f"<seed:think>r</seed:think>\n\nHi \n{SEED_XML}", "r",
     "\n\nHi", PARIS),
    ("minimax_m2", "minimax", "minimax_m2", "minimax_m2", f"r</think>\n\nHi\n{MINIMAX}", "r", "\n\nHi", PARIS),
    ("gemma4", "gemma4", None, "gemma4", f"\n\nHi \n{GEMMA4}", None, "\n\nHi", PARIS),
    ("step3 text before", "step3", "step3", "step3", f"r</think>\n\nHi \n{STEP3} ", "r", "\n\nHi", PARIS),
    # (Step 3: the text after the block is content too; the whole is right-stripped)
    ("step3 text after", "step3", "step3", "step3", f"r</think>\n\n{STEP3}\n Done. ", "r", "\n\n\n Done.", PARIS),
    ("step3 whitespace only", "step3", "step3", "step3", f"r</think>\n\n{STEP3}\n ", "r", None, PARIS),
    # llama3_json: the prose before the first call is the content (vLLM's answer drops it)
    ("llama3_json prose", "llama3", None, "llama3_json", f'Sure! {LLAMA} and {LLAMA}', None, "Sure! ", PARIS * 2),
    ("llama4_json prose", "llama3", None, "llama4_json", f"Let me check.\n{LLAMA}", None, "Let me check.\n", PARIS),
    ("llama3_json calls first", "llama3", None, "llama3_json", f" {LLAMA} text", None, None, PARIS),
    # phi4_mini_json: the text before the block is the content (vLLM's answer drops it)
    ("phi4_mini_json", "qwen3", None, "phi4_mini_json", f"Sure. functools[{LLAMA}] done", None, "Sure. ", PARIS),
    # mistral pre-v11: the text before [TOOL_CALLS] stays when no valid call follows (vLLM drops it)
    ("mistral pre-v11", "mistral3", None, "mistral", 'Let me see. [TOOL_CALLS] [{"nam": 1}] ', None,
     'Let me see. [{"nam": 1}]', []),
    # olmo3 tools: the text before a block of calls is the content (vLLM's answer drops it); a call
    # list without the tags whose call spans lines is content (vLLM's answer joins the lines)
    ("olmo3 text before block", "olmo3", "olmo3", "olmo3",
     f'r</think>Sure.\n<function_calls>\n{OLMO}\n</function_calls>\nbye', "r", "Sure.\n", PARIS),
    ("olmo3 call spanning lines", "olmo3", None, "olmo3", 'get_weather(city="Paris"\n)', None,
     'get_weather(city="Paris"\n)', []),
    ("olmo3 call list", "olmo3", None, "olmo3", f"\n{OLMO}\n{OLMO}\n", None, None, PARIS * 2),
    # k2_horizon behind its classic reasoning: a content of whitespace alone is sent as it comes and
    # kept (as vLLM's answer: the content as written)
    ("k2_horizon whitespace content", "k2_horizon", "k2_horizon", "k2_horizon",
     "<ifm|think>r</ifm|think>\r\n\r\n", "r", "\r\n\r\n", []),
    # mistral pre-v11: a call list after other text behind [TOOL_CALLS] is content (vLLM's regex
    # finds it; its stream sends nothing after the marker)
    ("mistral pre-v11 list after text", "mistral3", None, "mistral", f"Hi [TOOL_CALLS] ok [{LLAMA_ARGS}]", None,
     f"Hi ok [{LLAMA_ARGS}]", []),
    # deepseek: a complete envelope before the block marker is no call (vLLM's answer finds it,
    # its stream sends it as content)
    ("deepseek_v31 envelope before the marker", "deepseek", None, "deepseek_v31", f"A{V31_PING}B{DS_BLOCK}", None,
     f"A{V31_PING}B", []),
    ("deepseek_v3 envelope before the marker", "deepseek", None, "deepseek_v3", f"A{V3_PING}B{DS_BLOCK} C", None,
     f"A{V3_PING}B C", []),
    ("mistral pre-v11 call", "mistral3", None, "mistral",
     'Let me see. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]', None, "Let me see. ",
     PARIS),
]


def _answer(parser: Any, model: Any, ids: list[int]) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    reasoning, content, calls = parser.parse_complete(model.tokenizer.decode(ids), ids, None)
    return reasoning, content, [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


@pytest.mark.parametrize(("tokenizer", "reasoning", "tool", "text", "want_reasoning", "want_content", "want_calls"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_stream_sends_the_non_streaming_answer(parser_models, tokenizer, reasoning, tool, text,
                                                   want_reasoning, want_content, want_calls):
    model = parser_models[tokenizer]
    request = {"tools": TOOLS}
    ids = model.tokenizer.encode(text)
    assert model.tokenizer.decode(ids) == text
    answer = _answer(make_parser(model, reasoning, tool, request), model, ids)
    assert answer == (want_reasoning, want_content, want_calls)
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(model, reasoning, tool, request), chunk_texts(model, ids, cuts), None)
        assert (agg["reasoning"] or None, agg["content"] or None,
                [(c["name"], c["arguments"]) for c in agg["tool_calls"]]) == answer


@pytest.mark.parametrize(("words", "content"), [(10, "Hi <tool_call>" + "word " * 10), (1000, "Hi ")],
                         ids=["held", "past the hold bound"])
def test_classic_composition_without_a_call(parser_models, words, content):
    """An engine tool parser behind a classic reasoning parser, no call: the text as written (vLLM's
    answer) while the stream can hold it; past MAX_RAW_HOLD characters from the first markup, the
    engine's content (markup and the text the engine drops removed), which the stream had to send
    (vLLM's answer keeps the text as written)."""
    model = parser_models["qwen3"]
    text = "<think>r</think>Hi <tool_call>" + "word " * words
    assert (len(text) - len("<think>r</think>Hi ") > MAX_RAW_HOLD) == (words == 1000)
    ids = model.tokenizer.encode(text)
    request = {"tools": TOOLS}
    answer = _answer(make_parser(model, "deepseek_r1", "qwen3_xml", request), model, ids)
    assert answer == ("r", content, [])
    for cuts in (list(range(1, len(ids))), []):
        agg = stream(make_parser(model, "deepseek_r1", "qwen3_xml", request), chunk_texts(model, ids, cuts), None)
        assert (agg["reasoning"] or None, agg["content"] or None, agg["tool_calls"]) == answer
