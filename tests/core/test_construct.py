"""core.protocol.construct builds what pydantic's model_construct builds, for the models it is used on."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, PrivateAttr

from core.protocol.chat import ChatCompletionRequest
from core.protocol.common import ChatCompletionToolsParam, FunctionDefinition
from core.protocol.construct import construct

FUNCTION = {"name": "f", "description": None, "parameters": {"type": "object"}, "strict": None, "defer_loading": None}
CASES: list[tuple[type, dict[str, Any]]] = [
    (ChatCompletionRequest, {"messages": [{"role": "user", "content": "hi"}], "model": "m"}),
    (ChatCompletionRequest, {"messages": [], "model": "m", "tools": None, "stop": ["x"], "temperature": 0.5,
                             "request_id": "r", "chat_template_kwargs": {"enable_thinking": False}}),
    (FunctionDefinition, FUNCTION),
    (FunctionDefinition, {"name": "g"}),
    (FunctionDefinition, {"description": "no name"}),  # a required field left out stays out
    (ChatCompletionRequest, {"model": "m", "stream": True}),
    (ChatCompletionToolsParam, {"type": "function", "function": FunctionDefinition.model_construct(**FUNCTION),
                                "defer_loading": None}),
]


@pytest.mark.parametrize(("cls", "values"), CASES, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CASES)])
def test_construct_is_model_construct(cls, values):
    fast, slow = construct(cls, **values), cls.model_construct(**values)
    assert fast.model_fields_set == slow.model_fields_set == set(values)
    if "request_id" in cls.model_fields and "request_id" not in values:  # (a fresh random id each)
        assert fast.request_id != slow.request_id
        fast.__dict__["request_id"] = slow.request_id
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())  # the same fields, in the same order
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (slow.__pydantic_extra__, slow.__pydantic_private__)
    assert fast.model_dump() == slow.model_dump()


def test_mutable_defaults_are_not_shared():
    first = construct(ChatCompletionRequest, messages=[], model="m")
    first.stop_token_ids.append(1)
    first.stop.append("x")
    second = construct(ChatCompletionRequest, messages=[], model="m")
    assert (second.stop_token_ids, second.stop) == ([], [])


class _PrivateFactory(BaseModel):
    x: int = 0
    _seen: list[int] = PrivateAttr(default_factory=list)


class _OwnPostInit(BaseModel):
    x: int = 0
    _flag: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any) -> None:
        self._flag = True


@pytest.mark.parametrize("cls", [_PrivateFactory, _OwnPostInit, ChatCompletionRequest])
def test_private_attributes_as_model_construct(cls):
    """The copied private defaults stand in for pydantic's post-init only where that is all it does
    (no factory, no model_post_init of the class's own), and are never shared between instances."""
    values = {"messages": [], "model": "m"} if cls is ChatCompletionRequest else {"x": 1}
    first, second, slow = construct(cls, **values), construct(cls, **values), cls.model_construct(**values)
    assert first.__pydantic_private__ == slow.__pydantic_private__
    assert first.__pydantic_private__ is not second.__pydantic_private__
    if cls is _PrivateFactory:
        first._seen.append(1)
        assert second._seen == []
