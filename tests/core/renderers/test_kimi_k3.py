"""core/renderers/kimi_k3.py's pieces, without a tokenizer: vLLM's kwargs mapping and tool-result
ordering, the encoder's segments, Kimi's run cuts. Whole prompts are checked against vLLM in
tests/proxy/test_kimi_k3_render.py."""

from __future__ import annotations

import pytest

from core.protocol.common import VLLMValidationError
from core.renderers.kimi_k3 import (MAX_RUN_CHARS, order_tool_results, segments, split_runs, template_kwargs)


def text(segs):
    return "".join(t for t, _ in segs)


@pytest.mark.parametrize(("kwargs", "want"), [
    ({}, {}),
    ({"enable_thinking": False}, {"thinking": False}),
    ({"enable_thinking": False, "thinking": True}, {"thinking": True}),
    ({"reasoning_effort": "none", "enable_thinking": False}, {"thinking": False}),
    ({"reasoning_effort": "low"}, {"thinking_effort": "low"}),
    ({"reasoning_effort": "low", "thinking_effort": "high"}, {"thinking_effort": "high"}),
    ({"reasoning_effort": None, "enable_thinking": None}, {}),
])
def test_thinking_kwargs(kwargs, want):
    assert template_kwargs(kwargs, None, None) == want


@pytest.mark.parametrize("effort", ["medium", "xhigh", "", 3])
def test_an_effort_k3_does_not_know_is_a_400(effort):
    with pytest.raises(VLLMValidationError, match="Kimi K3 supports thinking_effort values: low, high, max") as info:
        template_kwargs({"thinking_effort": effort, "thinking": False}, None, None)
    assert info.value.parameter == "thinking_effort"


def test_tool_choice_and_response_format_are_passed_but_auto_is_not():
    kwargs = {"add_generation_prompt": True}
    assert template_kwargs(kwargs, "auto", None) == kwargs
    assert template_kwargs(kwargs, "required", {"type": "json_object"}) == {
        **kwargs, "tool_choice": "required", "response_format": {"type": "json_object"}}
    assert kwargs == {"add_generation_prompt": True}  # a copy


CALLS = [{"id": "a", "function": {"name": "f", "arguments": {}}}, {"id": "b", "function": {"name": "g", "arguments": {}}}]


def test_results_sorted_by_id_or_alias_and_named():
    conv = [{"role": "assistant", "tool_calls": CALLS}, {"role": "tool", "tool_call_id": "g:1", "content": "2"},
            {"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "user", "content": "u"}]
    out = order_tool_results(conv)
    assert [(m.get("tool"), m.get("index"), m.get("content")) for m in out[1:3]] == [("f", 1, "1"), ("g", 2, "2")]
    assert out[3] == conv[3] and "tool" not in conv[1]  # the conversation is not changed


def test_one_unmatched_result_keeps_the_block():
    conv = [{"role": "assistant", "tool_calls": CALLS}, {"role": "tool", "tool_call_id": "b", "content": "2"},
            {"role": "tool", "content": "1"}]
    assert order_tool_results(conv) == conv


def test_segments_structure_and_index_of_a_partial_answer():
    """Only the second call answered: vLLM names it and gives it the call's index."""
    conv = order_tool_results([{"role": "user", "content": "u"}, {"role": "assistant", "content": "c",
                                                                   "tool_calls": CALLS},
                               {"role": "tool", "tool_call_id": "b", "content": "r"}])
    segs = segments(conv, None, {"thinking": False, "add_generation_prompt": False})
    assert text(segs).endswith('<|open|>message role="tool" tool="g" index="2"<|sep|>r<|close|>message<|sep|>'
                               "<|end_of_msg|>")
    structural = {t for t, special in segs if special}
    assert structural == {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"}
    assert ("u", False) in segs and (' role="', False) in segs and ("user", False) in segs


def test_response_schema_kwarg_only_with_a_json_schema_format():
    base = {"thinking": False, "add_generation_prompt": False}
    assert text(segments([], None, {**base, "response_schema": {"a": 1}})) == ""
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "json_schema": {"b": 1, "a": {"d": 1, "c": 2}}}}
    assert '{"a":{"c":2,"d":1},"b":1}' in text(segments([], None, {**base, "response_format": fmt}))


def test_split_runs_as_kimi_cuts():
    assert list(split_runs("")) == []  # (segments are never empty)
    assert list(split_runs("a b")) == ["a b"]
    long = "x" * (2 * MAX_RUN_CHARS + 5) + " " * 3 + "y"
    pieces = list(split_runs(long))
    assert "".join(pieces) == long and [len(p) for p in pieces] == [MAX_RUN_CHARS, MAX_RUN_CHARS, 9]
