"""ResponsesRequest's function-tool fast path gives what the SDK's tool union gives.

The fast path exists for speed only; these compare it with the union it skips, on valid and
invalid shapes, so a change in the openai SDK's types cannot make them drift apart silently.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses.tool import Tool
from pydantic import TypeAdapter, ValidationError

from core.protocol.responses import ResponsesRequest

TOOL_UNION = TypeAdapter(list[Tool])

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                        max_size=3), max_leaves=6)
tool_fields = {
    "name": st.text(max_size=8) | json_values,
    "description": st.text(max_size=8) | st.none() | json_values,
    "parameters": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | st.none() | json_values,
    "strict": st.booleans() | st.none() | json_values,
    "async": st.booleans() | json_values,
    "defer_loading": st.booleans(),
    "allowed_callers": st.lists(st.sampled_from(["direct", "programmatic", "other"]), max_size=2),
    "extra_field": json_values,
}
function_tools = st.fixed_dictionaries({"type": st.just("function")},
                                       optional={k: v for k, v in tool_fields.items()})


def validate_tools(tools: list[Any]) -> tuple[str, Any]:
    try:
        return "ok", ResponsesRequest.model_validate({"input": "hi", "tools": tools}, from_attributes=True).tools
    except ValidationError as exc:
        return "error", [(e["type"], e["loc"]) for e in exc.errors(include_url=False)]


def union_tools(tools: list[Any]) -> tuple[str, Any]:
    try:
        return "ok", TOOL_UNION.validate_python(tools)
    except ValidationError as exc:
        return "error", [(e["type"], ("tools", *e["loc"])) for e in exc.errors(include_url=False)]


@settings(max_examples=300, deadline=None)
@given(st.lists(function_tools, max_size=3))
def test_function_tools_validate_as_the_union_does(tools: list[dict[str, Any]]) -> None:
    ours, union = validate_tools(tools), union_tools(tools)
    assert ours[0] == union[0]
    if ours[0] == "ok":
        assert [(type(t), t.model_dump(), t.model_fields_set) for t in ours[1]] == \
               [(type(t), t.model_dump(), t.model_fields_set) for t in union[1]]
    else:
        assert ours[1] == union[1]


@pytest.mark.parametrize("tools", [
    [{"type": "function", "name": "f"}, {"type": "web_search"}],  # a mix takes the union
    [{"type": "function"}],  # no name: the union's errors
    [{"type": "function", "name": "f", "parameters": "not an object"}],
])
def test_mixed_and_invalid_tools_take_the_union(tools: list[dict[str, Any]]) -> None:
    ours, union = validate_tools(tools), union_tools(tools)
    assert ours[0] == union[0]
    if ours[0] == "error":
        assert ours[1] == union[1]
        assert len(ours[1]) > 1  # every member of the union reported, not FunctionTool's alone
