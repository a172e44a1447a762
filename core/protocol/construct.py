"""`construct(cls, **values)`: pydantic's `model_construct` for values that are already valid.

`BaseModel.model_construct` walks every field of the class on each call looking for aliases, and
fills each field left out through pydantic's default machinery (which inspects default factories'
signatures each time): for the ~70 fields of a chat request that is ~0.2 ms on a request's
first-token path (the Responses front door builds one per request, and two tool models per tool).
Here the field table is read once per class (a template dict, copied per call); the instance is
built as model_construct builds it (the same `__dict__` in field order, fields set, extra and
private attributes), for values given by their field names (no aliases), all of them fields.
tests/core/test_construct.py compares the two.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic._internal._model_construction import init_private_attributes
from pydantic_core import PydanticUndefined

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__


def _private_defaults(cls: type[BaseModel]) -> dict[str, Any] | None:
    """The private attributes' defaults when pydantic's own post-init would only set those (no
    factories, no model_post_init of the class's own): copied per instance instead of pydantic
    walking them (~6 us of a chat request's construct). None: call model_post_init."""
    if cls.model_post_init is not init_private_attributes:
        return None
    defaults: dict[str, Any] = {}
    for name, private in cls.__private_attributes__.items():
        if private.default_factory is not None or type(private.default) in (list, dict, set):
            return None
        if private.default is not PydanticUndefined:
            defaults[name] = private.default
    return defaults


@cache
def _plan(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...], tuple[str, ...], bool,
                                         dict[str, Any] | None]:
    """What every instance of `cls` starts from, read once: (every field in field order with its
    default, or a placeholder; the fields whose default is made per instance, with its maker; the
    required fields; whether extra is allowed; the private attributes' defaults, or None when
    model_post_init must run)."""
    template: dict[str, Any] = {}
    fresh: list[tuple[str, Any]] = []
    required: list[str] = []
    for name, field in cls.model_fields.items():
        template[name] = field.default
        if field.default_factory is not None:
            fresh.append((name, field.default_factory))
        elif field.is_required():
            required.append(name)
        elif type(field.default) in (list, dict):
            fresh.append((name, field.default.copy))  # (model_construct copies mutable defaults)
    private = _private_defaults(cls) if cls.__pydantic_post_init__ else None
    return template, tuple(fresh), tuple(required), cls.model_config.get("extra") == "allow", private


def construct(cls: type[M], **values: Any) -> M:
    template, fresh, required, allow_extra, private = _plan(cls)
    # a copy of the template keeps the field order; given values replace defaults in place
    data = template.copy()
    data.update(values)
    for name, make in fresh:
        if name not in values:
            data[name] = make()
    for name in required:
        if name not in values:
            del data[name]  # (model_construct leaves a missing required field out)
    model = cls.__new__(cls)
    _set(model, "__dict__", data)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", {} if allow_extra else None)
    if private is not None:
        _set(model, "__pydantic_private__", private.copy())
    else:
        _set(model, "__pydantic_private__", None)
        if cls.__pydantic_post_init__:
            model.model_post_init(None)  # (the private attributes' defaults)
    return model
