"""Render side: the JSON schema vLLM forces for tool_choice "required" / a named tool.

Used by tool families that read forced calls as plain JSON (`supports_required_and_named`):
"required" becomes an array (at least one item, at most one with `parallel_tool_calls:
false`) of `{"name": <enum of one tool>, "parameters": <its schema>}` alternatives; a named
tool becomes that tool's parameters schema. `$defs` inside the tools' parameters are lifted to
the top (vLLM moves them; two different definitions of one name are a 400).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel


def _dump(value: Any) -> Any:
    return value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value


def _params(params: Any) -> dict[str, Any]:
    return params if params else {"type": "object", "properties": {}}


def json_schema_from_tools(request: Any) -> dict[str, Any] | None:
    from core.protocol.common import VLLMValidationError

    choice = getattr(request, "tool_choice", None)
    tools = [_dump(t) for t in (getattr(request, "tools", None) or [])]
    if choice in ("none", None) or not tools:
        return None
    functions = [t.get("function") or {} for t in tools if t.get("type", "function") == "function"]
    if not isinstance(choice, str):
        name = (_dump(choice).get("function") or {}).get("name")
        for function in functions:
            if function.get("name") == name:
                return _params(function.get("parameters"))
        raise ValueError(f"Tool '{name}' has not been passed in `tools`.")
    if choice != "required":
        return None
    items, defs = [], {}
    for function in functions:
        params = copy.deepcopy(function.get("parameters"))
        if isinstance(params, dict) and "$defs" in params:
            found = params.pop("$defs")
            if not isinstance(found, dict):
                raise VLLMValidationError(f"`$defs` in the parameters of tool '{function.get('name')}' must be an "
                                          f"object, got {type(found).__name__}.", parameter="tools")
            for def_name, def_schema in found.items():
                if def_name in defs and defs[def_name] != def_schema:
                    raise VLLMValidationError(f"Tool definition '{def_name}' has multiple schemas, which is not "
                                              "supported.", parameter="tools")
                defs[def_name] = def_schema
        items.append({"properties": {"name": {"type": "string", "enum": [function.get("name")]},
                                     "parameters": _params(params)},
                      "required": ["name", "parameters"]})
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": items}}
    if getattr(request, "parallel_tool_calls", None) is False:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema
