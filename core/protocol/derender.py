"""Request bodies of `/v1/chat/completions/derender` and `/v1/completions/derender` (docs/vllm-wire-spec.md §2.4, 2.5).

Each path takes two shapes selected by `stream`. vLLM declares the body as the union
`NonStream | Stream`, so a body that fits neither is reported with the errors of both
members (e.g. `DerenderChatRequest.generate_response: Field required` and
`DerenderChatStreamRequest.stream: Field required`). `validate_derender_body` picks the
member by `stream` for speed and, only when that fails, re-validates against the union so the
400 lists exactly what vLLM lists.

`stream_state` is ours (docs/vllm-wire-spec.md §0.3): an opaque string checked by `core.derender.state`, so it
is typed `Any` here and validated there with `invalid stream_state ...` messages.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, NonNegativeInt, TypeAdapter, ValidationError, model_validator

from core.protocol.chat import ChatCompletionRequest
from core.protocol.completion import CompletionRequest
from core.protocol.generate import GenerateTokensResponse, GenerateTokensStreamResponse


class DerenderChatRequest(BaseModel):
    stream: Literal[False] = False
    model: str | None = None
    generate_response: GenerateTokensResponse
    prompt_tokens: int | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    chat_request: ChatCompletionRequest | None = None


class DerenderCompletionRequest(BaseModel):
    stream: Literal[False] = False
    model: str | None = None
    generate_responses: list[GenerateTokensResponse]
    prompt_tokens: list[int] | None = None
    prompt_token_ids: list[list[NonNegativeInt] | None] | None = None
    completion_request: CompletionRequest | None = None

    @model_validator(mode="after")
    def _parallel_lengths(self) -> DerenderCompletionRequest:
        n = len(self.generate_responses)
        if self.prompt_tokens is not None and len(self.prompt_tokens) != n:
            raise ValueError(f"prompt_tokens length ({len(self.prompt_tokens)}) must equal "
                             f"generate_responses length ({n})")
        if self.prompt_token_ids is not None and len(self.prompt_token_ids) != n:
            raise ValueError(f"prompt_token_ids length ({len(self.prompt_token_ids)}) must "
                             f"equal generate_responses length ({n})")
        return self


class DerenderChatStreamRequest(BaseModel):
    stream: Literal[True]
    model: str | None = None
    generate_chunk: GenerateTokensStreamResponse
    stream_state: Any = None
    prompt_tokens: int | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    chat_request: ChatCompletionRequest | None = None


class DerenderCompletionStreamRequest(BaseModel):
    stream: Literal[True]
    model: str | None = None
    generate_chunk: GenerateTokensStreamResponse
    stream_state: Any = None
    prompt_tokens: int | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    completion_request: CompletionRequest | None = None


_CHAT_UNION = TypeAdapter(Union[DerenderChatRequest, DerenderChatStreamRequest])  # noqa: UP007
_COMPLETION_UNION = TypeAdapter(Union[DerenderCompletionRequest, DerenderCompletionStreamRequest])  # noqa: UP007


def validate_derender_body(data: Any, *, chat: bool) -> BaseModel:
    """The body as the member `stream` selects; raises ValidationError with the union's errors."""
    if not isinstance(data, dict):
        return (_CHAT_UNION if chat else _COMPLETION_UNION).validate_python(data)
    if chat:
        member = DerenderChatStreamRequest if data.get("stream") is True else DerenderChatRequest
        union = _CHAT_UNION
    else:
        member = DerenderCompletionStreamRequest if data.get("stream") is True else DerenderCompletionRequest
        union = _COMPLETION_UNION
    try:
        return member.model_validate(data)
    except ValidationError:
        return union.validate_python(data)  # raises the same errors vLLM reports (or succeeds)
