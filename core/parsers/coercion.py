"""Argument types from the tool schema, as vLLM 0.33's engine parsers correct them.

vLLM's engine families (qwen3_xml, glm45, kimi_k2, mistral) pass every call's arguments through
`ParserEngine._fix_arg_types`: values are coerced to the types the tool's JSON schema allows
(`coerce_to_schema_type`, priority null > integer > number > boolean > object > array > string),
recursing into nested objects with `properties` and arrays with `items`; when anything changed
the arguments are re-serialized with `json.dumps(..., ensure_ascii=False)`, else kept as written.
"""

from __future__ import annotations

import json
from typing import Any

from core.parsers.jsonstream import dumps

_TYPE_ALIASES = {"str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
                 "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer",
                 "uint64": "integer", "long": "integer", "short": "integer", "unsigned": "integer",
                 "float": "number", "float32": "number", "float64": "number", "double": "number",
                 "bool": "boolean", "dict": "object", "arr": "array", "list": "array", "sequence": "array"}
_PRIORITY = ("null", "integer", "number", "boolean", "object", "array", "string")
# an enum value's type (bool before int: True is an int too)
_ENUM_TYPES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))


def schema_types(schema: Any) -> set[str]:
    """The types a property allows: `type`, enum values, anyOf/oneOf/allOf; "string" by default."""
    if not isinstance(schema, dict):
        return {"string"}
    types: set[str] = set()
    kind = schema.get("type")
    if isinstance(kind, str):
        types.add(kind)
    elif isinstance(kind, list):
        types.update(t for t in kind if isinstance(t, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        for value in enum:
            kind = next((name for py, name in _ENUM_TYPES if isinstance(value, py)), None)
            if kind is not None:
                types.add(kind)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for choice in schema[key]:
                types |= schema_types(choice)
    return types or {"string"}


def normalized(types: set[str]) -> set[str]:
    return {_TYPE_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}


def finite(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return False
    return True


def coerce(value: str, types: set[str]) -> Any:
    """A raw string as the first schema type it parses as; the same object when none applies."""
    wanted = normalized(types)
    for kind in _PRIORITY:
        if kind not in wanted:
            continue
        if kind == "null":
            if value.lower() == "null":
                return None
        elif kind == "string":
            return value
        elif kind == "integer":
            try:
                return int(value)
            except (ValueError, TypeError):
                continue
        elif kind == "number":
            try:
                return int(value)
            except (ValueError, TypeError):
                pass
            try:
                number = float(value)
            except (ValueError, TypeError):
                continue
            if number != number or number in (float("inf"), float("-inf")):
                continue
            return number if number != int(number) else int(number)
        elif kind == "boolean":
            lowered = value.lower().strip()
            if lowered in ("true", "1"):
                return True
            if lowered in ("false", "0"):
                return False
        else:  # object, array
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if finite(parsed):
                return parsed
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if finite(parsed) else value


def string_only(schema: Any) -> bool:
    """Whether a value of this property always stays the string written (it can stream as is)."""
    return normalized(schema_types(schema)) == {"string"}


def tool_properties(tools: list[dict[str, Any]] | None, name: Any) -> dict[str, Any]:
    """The `properties` of the first tool with this name ({} when there are none)."""
    for tool in tools or ():
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            continue
        function = tool.get("function") or {}
        if function.get("name") == name:
            params = function.get("parameters") or {}
            props = params.get("properties", {}) if isinstance(params, dict) else {}
            return props if isinstance(props, dict) else {}
    return {}


def _coerce_value(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    if isinstance(value, str):
        coerced = coerce(value, schema_types(schema))
        return coerced, coerced is not value
    if isinstance(value, dict):
        nested = schema.get("properties")
        return value, _coerce_dict(value, nested) if isinstance(nested, dict) else False
    if isinstance(value, list):
        items = schema.get("items")
        changed = False
        if isinstance(items, dict):
            for i, item in enumerate(value):
                coerced, item_changed = _coerce_value(item, items)
                if item_changed:
                    value[i] = coerced
                    changed = True
        return value, changed
    coerced = coerce(json.dumps(value, ensure_ascii=False), schema_types(schema))
    if type(coerced) is not type(value) or coerced != value:
        return coerced, True
    return value, False


def _coerce_dict(args: dict[str, Any], properties: dict[str, Any]) -> bool:
    changed = False
    for key, value in args.items():
        prop = properties.get(key)
        if not isinstance(prop, dict):
            continue
        coerced, value_changed = _coerce_value(value, prop)
        if value_changed:
            args[key] = coerced
            changed = True
    return changed


def coerced(value: Any, prop: Any) -> Any:
    """One argument value as `fix_arg_types` leaves it under its property's schema."""
    return _coerce_value(value, prop)[0] if isinstance(prop, dict) else value


def fix_arg_types(args_json: str, name: Any, tools: list[dict[str, Any]] | None) -> str:
    """vLLM's `_fix_arg_types`: the arguments with schema types applied (re-serialized if changed)."""
    if not tools or not name:
        return args_json
    try:
        args = json.loads(args_json)
    except ValueError:
        return args_json
    if not isinstance(args, dict):
        return args_json
    properties = tool_properties(tools, name)
    if not properties or not _coerce_dict(args, properties):
        return args_json
    return dumps(args)
