"""Render side: the `structured_outputs.structural_tag` vLLM 0.33 adds for tool calling.

vLLM (with its default `VLLM_ENFORCE_STRICT_TOOL_CALLING`) constrains tool calls with an
xgrammar structural tag whenever the tool parser has a builtin tag model and the request needs
it: tool_choice "required" or a named tool, "auto" with `parallel_tool_calls: false` or with a
tool marked `strict: true`. The tag lists, per callable tool, the family's call envelope
(`begin`/`end` around the arguments' JSON); arguments are free JSON (`true`) unless the tool
is strict, in which case they follow its `parameters` schema (still `true` when it has none).
With "auto" and a response format, the tag is or-ed with that format. The string is
`json.dumps` of the tag, so key order and spacing here are part of the wire format (they end up
in `sampling_params`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from core.errors import bad_request


def _dump(value: Any) -> Any:
    return value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value


def _json_content(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": schema, "style": "json", "any_order": False,
            "max_whitespace_cnt": None, "excludes": []}


def _output_format(structured: Any) -> dict[str, Any] | None:
    """The response-format branch of an `or` tag (JSON kinds only; None when unsupported)."""
    if structured is None:
        return None
    data = structured.as_wire() if hasattr(structured, "as_wire") else dict(structured)
    if data.get("json_object"):
        return _json_content({"type": "object"})
    schema = data.get("json")
    if schema is not None:
        return _json_content(json.loads(schema) if isinstance(schema, str) else schema)
    return None


THINK_EXCLUDES = ["<think>", "</think>"]


class TagModel:
    """One xgrammar builtin tag model: the call envelope(s) and how calls are listed.

    `envelopes`: (begin, end) with `{name}`; `style`: the arguments' JSON style;
    `triggers`: what starts a call in "auto"; `excludes`: markup the auto tag forbids inside
    (xgrammar lists the think tags for most models); `separator`: between calls;
    `wrapper`: (begin, end) around the whole list (DeepSeek), or None.
    """

    def __init__(self, envelopes: list[tuple[str, str]], triggers: list[str], *, style: str = "json",
                 excludes: list[str] | None = None, separator: str = "",
                 wrapper: tuple[str, str] | None = None, required_triggered: bool = False,
                 named_single_tag: bool = True, function_level: bool = False,
                 named_single_call: bool = True) -> None:
        self.envelopes = envelopes
        self.triggers = triggers
        self.style = style
        self.excludes = excludes or []
        self.separator = separator
        self.wrapper = wrapper
        self.required_triggered = required_triggered
        self.named_single_tag = named_single_tag  # a named choice is one bare tag (else a 1-tag list)
        self.function_level = function_level  # the family's default strict level is FUNCTION: always a tag
        # a named choice stops after the first call (xgrammar's builtin models; vLLM's own K3 tag does not)
        self.named_single_call = named_single_call

    def tags(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        tags = []
        for function in tools:
            strict = function.get("strict") is True
            # vLLM's get_function_parameters / xgrammar's: no parameters means free JSON too
            schema = (function.get("parameters") if function.get("parameters") is not None
                      else True) if strict else True
            content = _json_content(schema)
            content["style"] = self.style
            for begin, end in self.envelopes:
                tags.append({"type": "tag", "begin": begin.replace("{name}", function.get("name", "")),
                             "content": content, "end": end})
        return tags

    def format(self, tools: list[dict[str, Any]], required: bool, named: bool = False) -> dict[str, Any]:
        tags = self.tags(tools)
        if named:
            if self.wrapper is not None:
                for tag in tags:
                    tag["begin"] = self.wrapper[0] + tag["begin"]
                    tag["end"] = tag["end"] + self.wrapper[1]
            if len(tags) == 1 and self.named_single_tag:
                return tags[0]
            return {"type": "tags_with_separator", "tags": tags, "separator": self.separator,
                    "at_least_one": True, "stop_after_first": True}
        if self.wrapper is not None:
            inner = {"type": "tags_with_separator", "tags": tags, "separator": self.separator,
                     "at_least_one": True, "stop_after_first": False}
            block = {"type": "tag", "begin": self.wrapper[0], "content": inner, "end": self.wrapper[1]}
            if required:
                return block
            return {"type": "triggered_tags", "triggers": self.triggers, "tags": [block], "at_least_one": False,
                    "stop_after_first": False, "excludes": self.excludes}
        if required and not self.required_triggered:
            return {"type": "tags_with_separator", "tags": tags, "separator": self.separator,
                    "at_least_one": True, "stop_after_first": False}
        return {"type": "triggered_tags", "triggers": self.triggers, "tags": tags, "at_least_one": required,
                "stop_after_first": False, "excludes": self.excludes}


def _limit_to_single_call(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") in ("triggered_tags", "tags_with_separator"):
            node["stop_after_first"] = True
        for value in node.values():
            _limit_to_single_call(value)
    elif isinstance(node, list):
        for value in node:
            _limit_to_single_call(value)


def apply_structural_tag(request: Any, model: TagModel) -> Any:
    """Set `request.structured_outputs` like vLLM's `_apply_structural_tag` for one tag model."""
    tools = [_dump(t) for t in (getattr(request, "tools", None) or [])]
    if not tools:
        return request
    choice = getattr(request, "tool_choice", None)
    named = None
    if not isinstance(choice, str) and choice is not None:
        named = (_dump(choice).get("function") or {}).get("name")
    if choice not in ("auto", "required") and named is None:
        return request
    is_auto = choice == "auto"
    structured = request.extract_structured_outputs() if hasattr(request, "extract_structured_outputs") else None
    single_call = getattr(request, "parallel_tool_calls", True) is False
    any_strict = any((t.get("function") or {}).get("strict") is True for t in tools)
    function_level = model.function_level or (single_call and not (is_auto and structured is not None))
    if is_auto and not function_level and not any_strict:
        return request  # strict level AUTO: no tag
    output = None
    if is_auto and structured is not None:
        output = _output_format(structured)
        if output is None:
            return request  # not a JSON constraint: the structured output applies alone
    functions = [t.get("function") or {} for t in tools]
    if named is not None:
        functions = [f for f in functions if f.get("name") == named]
        if not functions:  # xgrammar's check (a chat request never gets here: its validator checks first)
            raise bad_request(f"The tool with name '{named}' is not found in the tools list.")
    fmt = model.format(functions, required=not (is_auto and output is None), named=named is not None)
    if single_call or (named is not None and model.named_single_call):
        _limit_to_single_call(fmt)
    if output is not None:
        fmt = {"type": "or", "elements": [fmt, output]}
    tag = json.dumps({"type": "structural_tag", "format": fmt})
    params_cls = type(structured) if structured is not None else None
    if params_cls is None:
        from core.protocol.common import StructuredOutputsParams
        params_cls = StructuredOutputsParams
    request.structured_outputs = params_cls(structural_tag=tag)
    request.response_format = None
    return request


def apply_tag_keeping_markers(request: Any, model: TagModel) -> Any:
    """`apply_structural_tag`, and special tokens kept in the text: the families whose markers are
    special tokens read them from the engine's output (vLLM's adjust_request for those parsers)."""
    request = apply_structural_tag(request, model)
    request.skip_special_tokens = False
    return request


def keep_markers_for_tools(request: Any) -> Any:
    """Special tokens kept in the text when the request has tools and may call them: the rule of
    the families whose call markers are special tokens only in some models (vLLM's adjust_request
    for hermes, granite4, internlm, jamba, step3)."""
    if getattr(request, "tools", None) and getattr(request, "tool_choice", None) != "none":
        request.skip_special_tokens = False
    return request
