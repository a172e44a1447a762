"""`construct(cls, **values)`: pydantic's `model_construct` for values that are already valid.

`BaseModel.model_construct` walks every field of the class on each call looking for aliases, and
fills each field left out through pydantic's default machinery (which inspects default factories'
signatures each time): for the ~70 fields of a chat request that is ~0.2 ms on a request's
first-token path (the Responses front door builds one per request, and two tool models per tool).
Here the field table is read once per class; the instance is built as model_construct builds it
(the same `__dict__` in field order, fields set, extra and private attributes), for values given
by their field names (no aliases), all of them fields. tests/core/test_construct.py compares the two.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
_MISSING = object()
_set = object.__setattr__


@cache
def _fields(cls: type[BaseModel]) -> tuple[tuple[tuple[str, Any, Any], ...], bool]:
    """((name, default factory, default or _MISSING when required), ...), and whether extra is allowed."""
    table = tuple((name, field.default_factory, _MISSING if field.is_required() else field.default)
                  for name, field in cls.model_fields.items())
    return table, cls.model_config.get("extra") == "allow"


def construct(cls: type[M], **values: Any) -> M:
    table, allow_extra = _fields(cls)
    data: dict[str, Any] = {}
    for name, factory, default in table:
        if name in values:
            data[name] = values[name]
        elif factory is not None:
            data[name] = factory()
        elif default is not _MISSING:
            data[name] = default.copy() if type(default) in (list, dict) else default  # (model_construct copies)
    model = cls.__new__(cls)
    _set(model, "__dict__", data)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", {} if allow_extra else None)
    _set(model, "__pydantic_private__", None)
    if cls.__pydantic_post_init__:
        model.model_post_init(None)  # (the private attributes' defaults)
    return model
